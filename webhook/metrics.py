"""Prometheus metrics of one webhook app, in a registry of its own (two apps never share counts).

Request metrics are updated on each request; the policy metrics are read from the PolicyHolder
when Prometheus scrapes, so they can never disagree with ``/readyz``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from engine.policy.reload import PolicyHolder
from webhook.review import Verdict

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# Admission latency is a few milliseconds; the API server gives up after timeoutSeconds.
LATENCY_BUCKETS = (0.0005, 0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.025, 0.05, 0.1, 0.5, 1, 5)


class Metrics:
    def __init__(self, holder: PolicyHolder) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "fleetgate_webhook_requests",
            "Admission requests by endpoint and result "
            "(allowed, patched, warned, denied, bad_request, too_large, unavailable, error).",
            ["endpoint", "result"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "fleetgate_webhook_request_duration_seconds",
            "Time from request received to response ready, by endpoint.",
            ["endpoint"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.patches = Counter(
            "fleetgate_webhook_patches",
            "ResourceBinding patches sent, by decision (held, readmit, readmit-held).",
            ["decision"],
            registry=self.registry,
        )
        self.denials = Counter(
            "fleetgate_webhook_denials",
            "Job templates refused, by policy (builtin:queue, builtin:fit, builtin:demand "
            "for the built-in checks).",
            ["policy"],
            registry=self.registry,
        )
        self.warnings = Counter(
            "fleetgate_webhook_warnings",
            "Warnings returned with admitted job templates, by policy.",
            ["policy"],
            registry=self.registry,
        )
        self.dry_run = Counter(
            "fleetgate_webhook_dryrun_violations",
            "Violations of DryRun AdmissionPolicies (admitted, only counted), by policy.",
            ["policy"],
            registry=self.registry,
        )
        self.cel_errors = Counter(
            "fleetgate_webhook_cel_errors",
            "CEL expressions that failed at run time: scope (binding held anyway) or an "
            "AdmissionPolicy (handled by its failurePolicy).",
            ["policy"],
            registry=self.registry,
        )
        self.certificate_reloads = Counter(
            "fleetgate_webhook_certificate_reloads",
            "Serving certificate reloads, by result (ok, failed).",
            ["result"],
            registry=self.registry,
        )
        self.registry.register(PolicyCollector(holder))
        self.certificates = CertificateCollector()  # the server adds itself once it exists
        self.registry.register(self.certificates)

    def record(self, endpoint: str, verdict: Verdict) -> None:
        self.requests.labels(endpoint, verdict.outcome).inc()
        for what, detail in verdict.events:
            if what == "patch":
                self.patches.labels(detail).inc()
            elif what == "denied":
                self.denials.labels(detail).inc()
            elif what == "warned":
                self.warnings.labels(detail).inc()
            elif what == "dryrun":
                self.dry_run.labels(detail).inc()
            elif what == "scope_error":
                self.cel_errors.labels("scope").inc()
            elif what == "cel_error":
                self.cel_errors.labels(detail).inc()

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


class PolicyCollector(Collector):
    def __init__(self, holder: PolicyHolder) -> None:
        self._holder = holder

    def collect(self) -> Iterator[Metric]:
        status = self._holder.status
        info = GaugeMetricFamily(
            "fleetgate_policy_version_info",
            "The live PolicySet version (value 1); absent until one loads.",
            labels=["version"],
        )
        if status.version is not None:
            info.add_metric([status.version], 1)
        yield info
        yield GaugeMetricFamily(
            "fleetgate_policy_ready", "1 when a valid PolicySet is live.", value=status.ready
        )
        yield GaugeMetricFamily(
            "fleetgate_policy_healthy",
            "1 when the policy files on disk are what is live (the last reload succeeded).",
            value=status.healthy,
        )
        yield GaugeMetricFamily(
            "fleetgate_policy_fallback",
            "1 when the live PolicySet is the last good set fleetgate stored (a ConfigMap), "
            "because the policy files did not load at start.",
            value=status.fallback is not None,
        )
        yield CounterMetricFamily(
            "fleetgate_policy_reloads", "Successful policy loads.", value=status.reloads
        )
        yield CounterMetricFamily(
            "fleetgate_policy_reload_failures",
            "Policy loads that failed; the last good set stayed live.",
            value=status.failures,
        )


class CertificateCollector(Collector):
    """``fleetgate_serving_certificate_expiry_timestamp_seconds``: when the certificate each
    HTTPS server of this process serves expires, read from the server as Prometheus scrapes
    (a renewal that keeps failing shows as a date that stops moving, ``--tls-secret`` or
    cert-manager alike)."""

    def __init__(self) -> None:
        self._servers: dict[str, Any] = {}  # name → webhook.serve.WebhookServer

    def add(self, name: str, server: Any) -> None:
        self._servers[name] = server

    def collect(self) -> Iterator[Metric]:
        found = GaugeMetricFamily(
            "fleetgate_serving_certificate_expiry_timestamp_seconds",
            "When the serving certificate of each HTTPS server of this process expires (Unix "
            "seconds; server: webhook or visibility).",
            labels=["server"],
        )
        for name, server in sorted(self._servers.items()):
            reloader = getattr(server, "reloader", None)
            if reloader is not None and reloader.not_after is not None:
                found.add_metric([name], reloader.not_after)
        yield found
