"""Certificates fleetgate manages itself (webhook.certificates, webhook.certmanager): made into a
Secret of the sandbox, renewed before expiry, the CA injected into caBundles, and served."""

from __future__ import annotations

import base64
import datetime as dt
import ssl
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import kubernetes
import pytest
from cryptography import x509

from sandbox.server import Sandbox
from tests.sandbox.conftest import running_sandbox
from webhook import certificates
from webhook.certmanager import CertManager, Target

NAMES = (
    "fleetgate-webhook.fleetgate-system.svc",
    "fleetgate-webhook.fleetgate-system.svc.cluster.local",
)
T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


class Clock:
    def __init__(self, now: dt.datetime) -> None:
        self.now = now

    def __call__(self) -> dt.datetime:
        return self.now


def _cas(pem: bytes) -> list[x509.Certificate]:
    return x509.load_pem_x509_certificates(pem)


# -- the rules (pure) ---------------------------------------------------------------------------


def test_a_new_bundle_serves_its_names_until_a_third_of_its_life_is_left() -> None:
    bundle = certificates.renew(None, NAMES, T0)
    assert certificates.problem(bundle, NAMES, T0) is None
    cert = x509.load_pem_x509_certificate(bundle.cert)
    life = cert.not_valid_after_utc - cert.not_valid_before_utc
    just_before = cert.not_valid_after_utc - life / 3 - dt.timedelta(minutes=1)
    assert certificates.problem(bundle, NAMES, just_before) is None
    due = certificates.problem(bundle, NAMES, just_before + dt.timedelta(minutes=2))
    assert due is not None and due.startswith("it expires at")
    assert certificates.next_check(bundle, T0) == certificates.renewal_due(bundle.cert, T0)


def test_other_names_a_foreign_key_or_nothing_is_a_reason_to_renew() -> None:
    bundle = certificates.renew(None, NAMES, T0)
    assert "DNS names" in str(certificates.problem(bundle, NAMES[:1], T0))
    other = certificates.renew(None, NAMES, T0)
    mixed = certificates.Bundle(bundle.ca, bundle.ca_key, bundle.cert, other.key)
    assert certificates.problem(mixed, NAMES, T0) == "the certificate does not match its key"
    foreign = certificates.Bundle(bundle.ca, bundle.ca_key, other.cert, other.key)
    assert certificates.problem(foreign, NAMES, T0) == (
        "the certificate is not signed by the current CA"
    )
    assert certificates.problem(None, NAMES, T0) == "no certificate yet"
    garbage = certificates.Bundle(b"not pem", bundle.ca_key, bundle.cert, bundle.key)
    assert str(certificates.problem(garbage, NAMES, T0)).startswith("unreadable")


def test_renewing_keeps_the_ca_until_it_is_due_then_lists_the_old_one_after_the_new() -> None:
    first = certificates.renew(None, NAMES, T0)
    later = T0 + dt.timedelta(days=300)  # the serving certificate is due, the CA is not
    second = certificates.renew(first, NAMES, later)
    assert second.ca == first.ca and second.ca_key == first.ca_key
    assert second.cert != first.cert
    ca_due = T0 + dt.timedelta(days=certificates.CA_DAYS * 0.7)
    assert str(certificates.problem(second, NAMES, ca_due)).startswith("the CA expires")
    third = certificates.renew(second, NAMES, ca_due)
    new, old = _cas(third.ca)
    assert old.public_bytes(ssl_pem()) == _cas(first.ca)[0].public_bytes(ssl_pem())
    assert new.not_valid_after_utc > old.not_valid_after_utc
    assert certificates.problem(third, NAMES, ca_due) is None
    # once the old CA has expired it is a reason to renew, and the renewal drops it
    after_old = old.not_valid_after_utc + dt.timedelta(days=1)
    assert certificates.problem(third, NAMES, after_old) == (
        "an earlier CA it still lists has expired"
    )
    assert len(_cas(certificates.renew(third, NAMES, after_old).ca)) == 1


def ssl_pem():
    from cryptography.hazmat.primitives.serialization import Encoding

    return Encoding.PEM


# -- against the sandbox ------------------------------------------------------------------------


@pytest.fixture
def sandbox() -> Iterator[Sandbox]:
    with running_sandbox() as server:
        server.store.create("namespaces", {"metadata": {"name": "fleetgate-system"}})
        yield server


@pytest.fixture
def client(sandbox: Sandbox, tmp_path: Path) -> Iterator[kubernetes.client.ApiClient]:
    path = sandbox.write_kubeconfig(tmp_path / "kubeconfig")
    configuration = kubernetes.client.Configuration()
    kubernetes.config.load_kube_config(config_file=str(path), client_configuration=configuration)
    api = kubernetes.client.ApiClient(configuration)
    yield api
    api.close()


def _webhooks(sandbox: Sandbox, name: str) -> None:
    hook = {
        "admissionReviewVersions": ["v1"],
        "sideEffects": "None",
        "clientConfig": {"url": "https://fleetgate-webhook.fleetgate-system.svc/x"},
        "rules": [],
    }
    sandbox.store.create(
        "mutatingwebhookconfigurations.admissionregistration.k8s.io",
        {
            "metadata": {"name": name},
            "webhooks": [{**hook, "name": f"a.{name}.io"}, {**hook, "name": f"b.{name}.io"}],
        },
    )


def _api_service(sandbox: Sandbox) -> None:
    sandbox.store.create(
        "apiservices.apiregistration.k8s.io",
        {
            "metadata": {"name": "v1alpha1.visibility.fleetgate.io"},
            "spec": {
                "group": "visibility.fleetgate.io",
                "version": "v1alpha1",
                "service": {"namespace": "fleetgate-system", "name": "fleetgate-visibility"},
                "groupPriorityMinimum": 100,
                "versionPriority": 100,
            },
        },
    )


def _manager(client, tmp_path: Path, clock: Clock, *targets: Target) -> CertManager:
    return CertManager(
        client,
        ("fleetgate-system", "fleetgate-webhook-tls"),
        NAMES,
        tmp_path / f"tls-{id(clock)}",
        inject=targets,
        clock=clock,
    )


def _bundles(sandbox: Sandbox) -> tuple[str, list[str], str]:
    mutating = sandbox.store.get(
        "mutatingwebhookconfigurations.admissionregistration.k8s.io", "fleetgate"
    )
    service = sandbox.store.get(
        "apiservices.apiregistration.k8s.io", "v1alpha1.visibility.fleetgate.io"
    )
    secret = sandbox.store.get("secrets", "fleetgate-webhook-tls", namespace="fleetgate-system")
    hooks = [w["clientConfig"].get("caBundle", "") for w in mutating["webhooks"]]
    return secret["data"]["ca.crt"], hooks, service["spec"].get("caBundle", "")


def test_the_secret_is_made_the_files_written_and_every_ca_bundle_set(
    sandbox: Sandbox,
    client,
    tmp_path: Path,
) -> None:
    _webhooks(sandbox, "fleetgate")
    _api_service(sandbox)
    clock = Clock(T0)
    targets = (
        Target("mutatingwebhookconfigurations", "fleetgate"),
        Target("apiservices", "v1alpha1.visibility.fleetgate.io"),
    )
    manager = _manager(client, tmp_path, clock, *targets)
    bundle = manager.sync()
    secret = sandbox.store.get("secrets", "fleetgate-webhook-tls", namespace="fleetgate-system")
    assert secret["type"] == "kubernetes.io/tls"
    assert base64.b64decode(secret["data"]["tls.crt"]) == bundle.cert
    assert manager.cert_file.read_bytes() == bundle.cert
    assert manager.key_file.read_bytes() == bundle.key
    assert oct(manager.key_file.stat().st_mode & 0o777) == "0o600"
    ca, hooks, service = _bundles(sandbox)
    assert hooks == [ca, ca] and service == ca
    assert manager.renewals == 1

    # a second replica takes the same certificate, and writes nothing
    other = _manager(client, tmp_path, Clock(T0), *targets)
    before = sandbox.store.resource_version
    assert other.sync() == bundle
    assert sandbox.store.resource_version == before and other.renewals == 0


def test_renewal_keeps_the_ca_bundle_and_a_new_ca_is_added_beside_the_old(
    sandbox: Sandbox,
    client,
    tmp_path: Path,
) -> None:
    _webhooks(sandbox, "fleetgate")
    clock = Clock(T0)
    manager = _manager(
        client, tmp_path, clock, Target("mutatingwebhookconfigurations", "fleetgate")
    )
    first = manager.sync()
    clock.now = T0 + dt.timedelta(days=300)
    assert manager.next_wait() == 0.0  # due now: the background check would run at once
    second = manager.sync()
    assert second.cert != first.cert and second.ca == first.ca
    assert manager.cert_file.read_bytes() == second.cert
    clock.now = T0 + dt.timedelta(days=certificates.CA_DAYS * 0.7)
    third = manager.sync()
    ca, hooks, _ = _bundles_without_service(sandbox)
    assert len(_cas(third.ca)) == 2 and base64.b64decode(ca) == third.ca
    assert hooks == [ca, ca]


def _bundles_without_service(sandbox: Sandbox) -> tuple[str, list[str], None]:
    mutating = sandbox.store.get(
        "mutatingwebhookconfigurations.admissionregistration.k8s.io", "fleetgate"
    )
    secret = sandbox.store.get("secrets", "fleetgate-webhook-tls", namespace="fleetgate-system")
    return (
        secret["data"]["ca.crt"],
        [w["clientConfig"]["caBundle"] for w in mutating["webhooks"]],
        None,
    )


def test_a_target_applied_after_the_start_gets_its_ca_bundle_at_the_next_check(
    sandbox: Sandbox,
    client,
    tmp_path: Path,
) -> None:
    target = Target("mutatingwebhookconfigurations", "fleetgate")
    manager = _manager(client, tmp_path, Clock(T0), target)
    manager.sync()  # not there yet: logged, not fatal
    assert target not in manager.injected
    _webhooks(sandbox, "fleetgate")
    manager.sync()
    ca, hooks, _ = _bundles_without_service(sandbox)
    assert hooks == [ca, ca] and manager.injected[target] == ca


def test_a_secret_someone_broke_is_replaced(sandbox: Sandbox, client, tmp_path: Path) -> None:
    manager = _manager(client, tmp_path, Clock(T0))
    first = manager.sync()
    core = kubernetes.client.CoreV1Api(client)
    core.patch_namespaced_secret(
        "fleetgate-webhook-tls",
        "fleetgate-system",
        {"data": {"tls.key": base64.b64encode(b"garbage").decode()}},
    )
    second = manager.sync()
    assert second.cert != first.cert and manager.renewals == 2
    assert manager.key_file.read_bytes() == second.key


def test_the_served_certificate_verifies_against_the_injected_bundle(
    sandbox: Sandbox,
    client,
    tmp_path: Path,
) -> None:
    """The files serve TLS that a client trusting only the caBundle accepts for the name."""
    from flask import Flask

    from sandbox.dns import route
    from webhook.serve import WebhookServer

    manager = _manager(client, tmp_path, Clock(dt.datetime.now(dt.UTC)))
    bundle = manager.sync()
    app = Flask("probe")
    app.add_url_rule("/ping", "ping", lambda: "pong")
    server = WebhookServer(app, "127.0.0.1", 0, tls=(manager.cert_file, manager.key_file))
    server.start()
    try:
        port = server.address[1]
        context = ssl.create_default_context(cadata=bundle.ca.decode())
        import http.client

        connection = http.client.HTTPSConnection(NAMES[0], port, context=context, timeout=10)
        route(connection, {(NAMES[0], port): ("127.0.0.1", port)})
        connection.request("GET", "/ping")
        assert connection.getresponse().read() == b"pong"
        connection.close()
        with pytest.raises(urllib.error.URLError):  # the name is checked: 127.0.0.1 is not it
            urllib.request.urlopen(f"https://127.0.0.1:{port}/ping", context=context, timeout=10)
    finally:
        server.stop()


def test_the_expiry_of_the_certificate_served_is_a_metric_that_follows_renewals(
    sandbox: Sandbox,
    client,
    tmp_path: Path,
) -> None:
    from flask import Flask
    from prometheus_client import CollectorRegistry, generate_latest

    from webhook.metrics import CertificateCollector
    from webhook.serve import WebhookServer

    clock = Clock(dt.datetime.now(dt.UTC))
    manager = _manager(client, tmp_path, clock)
    first = manager.sync()
    server = WebhookServer(
        Flask("probe"), "127.0.0.1", 0, tls=(manager.cert_file, manager.key_file)
    )
    server.start()
    try:
        collector = CertificateCollector()
        collector.add("webhook", server)
        registry = CollectorRegistry()
        registry.register(collector)

        def exported() -> float:
            text = generate_latest(registry).decode()
            line = next(
                x for x in text.splitlines() if x.startswith("fleetgate_serving_certificate")
            )
            assert 'server="webhook"' in line
            return float(line.rsplit(" ", 1)[1])

        expiry = x509.load_pem_x509_certificate(first.cert).not_valid_after_utc.timestamp()
        assert exported() == expiry
        clock.now += dt.timedelta(days=300)  # renewal due: new files, reloaded by the server
        second = manager.sync()
        assert server.reloader is not None and server.reloader.check()
        renewed = x509.load_pem_x509_certificate(second.cert).not_valid_after_utc.timestamp()
        assert exported() == renewed > expiry
    finally:
        server.stop()
