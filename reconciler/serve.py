"""``fleetgate serve``: every part of the reconciler process, started in order and stopped in
reverse order within a bound.

Start: 1. the policies and their hot reload (watchfiles); when the files do not load, the last
good set the leader stored (:mod:`reconciler.lastgood`), else no set: the replica serves, unready,
and decides nothing until the files load (a user's policy content never makes it exit);
2. the kubernetes client of ``--kubeconfig``/``--context``, its User-Agent naming the replica
(``fleetgate-reconciler/<identity>``: the API server's audit log, and the sandbox's record of
writes, tell replicas apart); 3. the reconciler (informers and the pass thread), gated by
4. leader election on a Lease (only the leader runs passes and writes; followers keep their
informers' caches warm and take over within one lease duration); 5. the HTTP API (the read API
of :mod:`reconciler.api`, /metrics, the probes, and ``/leader``); 6. the
admission webhook over HTTPS, when ``--webhook-port`` is given. With estimator options
(:mod:`reconciler.estimatorargs`), the reconciler asks the members' karmada-scheduler-estimators
before each cycle (:mod:`reconciler.estimator`); their channels close when it has stopped.

Stop (SIGTERM, SIGINT): the webhook and the HTTP API stop accepting; the pass thread ends (a
pass in flight finishes its current write); then, and only when no pass runs any more, the
Lease is released so that a follower takes over at once; then the informers and the policy
watcher stop. A stop that overruns ``--shutdown-timeout`` ends the process with exit status 1.

Nothing needed to continue lives here: after a crash, the next leader reads every decision
back from the bindings (annotations, ``spec.clusters``, status), so a job is never admitted
twice nor forgotten (docs/reconciler.md, "Crash safety").
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import functools
import logging
import os
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kubernetes
from flask import Flask, Response

from engine.errors import FleetgateError
from engine.gcpause import FreezeOnce
from engine.policy.reload import PolicyHolder, PolicyWatcher
from reconciler import fence, lastgood
from reconciler.estimator import EstimatorClient
from reconciler.estimatorargs import EstimatorSettingsError, settings_of
from reconciler.informers import namespace_labels
from reconciler.leader import LeaderElector, LeaseConfig
from reconciler.loop import Reconciler
from reconciler.resources import NAMESPACES
from reconciler.settings import ReconcilerSettings
from reconciler.writers import DEFAULT_WRITE_WORKERS
from webhook import certargs
from webhook.certmanager import CertManager
from webhook.stopsignal import StopSignals

log = logging.getLogger("fleetgate.reconciler.serve")
USER_AGENT = "fleetgate-reconciler"
MAX_WRITE_TIMEOUT = 30.0  # seconds
EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2  # as reconciler/cli.py documents them


class ServeError(FleetgateError):
    """A part of ``fleetgate serve`` could not start; the message names it."""


@dataclass
class Serving:
    """The running parts, for :func:`stop_all` (and tests that start them in-process)."""

    holder: PolicyHolder
    api: kubernetes.client.ApiClient
    reconciler: Reconciler
    elector: LeaderElector | None
    watcher: PolicyWatcher | None = None
    estimator: EstimatorClient | None = None
    keeper: lastgood.Keeper | None = None  # stores the last good policy set (the leader)
    api_app: Flask | None = None  # the read API's app (the visibility API shares its view)
    auth: Any = None  # reconciler.apiauth.Delegated when the read API asks who calls
    writers: tuple[str, ...] = ()  # --fleetgate-user: who may change fleetgate's marks
    servers: list[Any] = field(default_factory=list)  # webhook.serve.WebhookServer
    addresses: dict[str, str] = field(default_factory=dict)  # "api"/"webhook" → URL
    certificates: CertManager | None = None  # --tls-secret: the managed serving certificate


def default_identity() -> str:
    return f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"


def api_client(kubeconfig: Path, context: str | None, identity: str) -> kubernetes.client.ApiClient:
    configuration = kubernetes.client.Configuration()
    try:
        kubernetes.config.load_kube_config(
            config_file=str(kubeconfig), context=context, client_configuration=configuration
        )
    except (OSError, ValueError, TypeError, kubernetes.config.ConfigException) as error:
        where = f"{kubeconfig}" + (f" (context {context})" if context else "")
        raise ServeError(f"kubeconfig {where}: {error}") from error
    # no retries inside urllib3 (each a WARNING line of its own): the informers, the lease and
    # the passes retry on their own backoffs, and say a problem once (reconciler.problems)
    configuration.retries = 0
    client = kubernetes.client.ApiClient(configuration)
    client.user_agent = f"{USER_AGENT}/{identity}"
    return client


def write_timeout(args: argparse.Namespace) -> float:
    """Seconds a write may take. With leader election, no more than the margin between the
    renew deadline and the lease duration: a leader that stops at its deadline has then given
    up waiting on its last write before a follower may take over. (The API server may still
    commit a request its client gave up on; Kubernetes has no fencing token, as with client-go.)"""
    if not args.leader_elect:
        return MAX_WRITE_TIMEOUT
    return max(1.0, min(MAX_WRITE_TIMEOUT, args.lease_duration - args.renew_deadline))


def start_all(args: argparse.Namespace, identity: str) -> Serving:
    """Start every part (the module docstring's order); on failure, stop what started."""
    holder = PolicyHolder.for_paths([args.policies])
    settings = settings_of(args)
    estimator = EstimatorClient(settings) if settings is not None else None  # reads TLS files
    api = api_client(args.kubeconfig, args.context, identity)
    name = getattr(args, "last_good_configmap", "")
    store = lastgood.LastGood(api, args.lease_namespace, name) if name else None
    if not holder.reload():  # never an exit for a user's policy content (docs/reconciler.md)
        issues = "\n".join(str(issue) for issue in holder.status.errors)
        log.error("the policies in %s do not load:\n%s", args.policies, issues)
        if store is not None:
            lastgood.fall_back(holder, store, args.policies, dt.datetime.now(dt.UTC))
    elector: LeaderElector | None = None
    if args.leader_elect:
        config = LeaseConfig(
            args.lease_name,
            args.lease_namespace,
            identity,
            args.lease_duration,
            args.renew_deadline,
            args.retry_period,
        )
        elector = LeaderElector(api, config)
    gate = elector.is_leader if elector is not None else None
    fenced = None
    if elector is not None:  # no write leaves after the lease deadline (reconciler.fence)
        fenced = fence.Fence(elector.deadline)
        fence.install(api, fenced)
    settings = ReconcilerSettings(
        mode=args.mode,
        resync=args.resync,
        request_timeout=write_timeout(args),
        write_workers=getattr(args, "write_workers", DEFAULT_WRITE_WORKERS),
    )
    reconciler = Reconciler(api, holder, settings, gate=gate, estimator=estimator)
    reconciler.observers.append(FreezeOnce())  # warm caches out of the collector's scans
    if fenced is not None:
        reconciler.applier.remaining = fenced.remaining
    serving = Serving(holder, api, reconciler, elector, estimator=estimator)
    if store is not None:
        leading = elector.is_leader if elector is not None else (lambda: True)
        serving.keeper = lastgood.Keeper(holder, store, leading)
    try:
        serving.watcher = PolicyWatcher(holder, [args.policies])
        serving.watcher.start()
        reconciler.start()
        if elector is not None:
            elector.on_started = reconciler.wake
            elector.start()
        if serving.keeper is not None:
            serving.keeper.start()
        serving.auth = _api_auth(args, api)
        _serve_api(serving, args.host, args.port)
        tls_host = getattr(args, "tls_host", args.host)
        serving.writers = tuple(getattr(args, "fleetgate_user", None) or ())
        cert, key = args.tls_cert, args.tls_key
        if getattr(args, "tls_secret", None) is not None:
            cert, key = _managed_certificate(serving, args, identity)
        if args.webhook_port is not None:
            _serve_webhook(serving, tls_host, args.webhook_port, cert, key)
        if getattr(args, "visibility_port", None) is not None:
            _serve_visibility(serving, tls_host, args.visibility_port, cert, key)
    except (OSError, FleetgateError) as error:
        stop_all(serving, 10.0)
        raise ServeError(f"cannot start: {error}") from error
    return serving


def _managed_certificate(
    serving: Serving, args: argparse.Namespace, identity: str
) -> tuple[Path, Path]:
    """``--tls-secret``: the managed certificate's files (``webhook.certmanager``), made or
    read before the servers start. Its own client: every replica keeps the Secret and the
    caBundle (conflicts are settled by resourceVersion), so the leader's fence is not in its
    way."""
    from webhook.certmanager import start_managed

    client = api_client(args.kubeconfig, args.context, identity)
    manager = certargs.manager(args, client)
    serving.certificates = manager
    start_managed(manager)
    return manager.cert_file, manager.key_file


def stop_all(serving: Serving, timeout: float) -> bool:
    """Stop in reverse order within ``timeout``; True when the Lease (if held) was released or
    no election ran."""
    deadline = time.monotonic() + timeout

    def left() -> float:
        return max(0.1, deadline - time.monotonic())

    for server in reversed(serving.servers):
        with contextlib.suppress(FleetgateError):
            server.stop(min(5.0, left()))
    if serving.certificates is not None:
        serving.certificates.stop(min(5.0, left()))
    if serving.keeper is not None:
        serving.keeper.stop(min(5.0, left()))
    rec = serving.reconciler
    rec.stop(left())  # the pass thread ends (after its current write), then the informers
    released = True
    if serving.elector is not None:
        quiet = rec.idle(min(5.0, left()))
        serving.elector.stop(release=quiet, timeout=min(5.0, left()))
        if not quiet:
            log.warning("a pass is still running: the lease is left to expire")
            released = False
    if serving.watcher is not None:
        with contextlib.suppress(FleetgateError):
            serving.watcher.stop(min(5.0, left()))
    if serving.estimator is not None:
        serving.estimator.close()
    serving.api.close()
    return released


def _serve_api(serving: Serving, host: str, port: int) -> None:
    from webhook.serve import WebhookServer

    app = api_app(serving)
    serving.api_app = app  # the visibility API serves the same latest pass
    server = WebhookServer(app, host, port, threads=4)
    server.start()
    serving.servers.append(server)
    bound_host, bound_port = server.address
    serving.addresses["api"] = f"http://{bound_host}:{bound_port}"


def _serve_webhook(
    serving: Serving, host: str, port: int, cert: Path | None, key: Path | None
) -> None:
    from webhook.app import create_app
    from webhook.serve import WebhookServer

    if cert is None or key is None:
        raise ServeError("--webhook-port needs --tls-cert and --tls-key")
    watched = serving.reconciler.informers[NAMESPACES.key]  # labels for namespaceSelector
    from webhook.claims import DEFAULT_WRITERS

    writers = frozenset(serving.writers or DEFAULT_WRITERS)
    labels = functools.partial(namespace_labels, watched)
    app = create_app(serving.holder, namespaces=labels, writers=writers)
    server = WebhookServer(app, host, port, tls=(cert, key))
    server.start()
    serving.servers.append(server)
    _count_certificate(serving, "webhook", server)
    bound_host, bound_port = server.address
    serving.addresses["webhook"] = f"https://{bound_host}:{bound_port}"


def _count_certificate(serving: Serving, name: str, server: Any) -> None:
    """``server``'s certificate expiry on the read API's /metrics."""
    if serving.api_app is not None:
        serving.api_app.config["fleetgate.certificates"].add(name, server)


def _api_auth(args: argparse.Namespace, api: kubernetes.client.ApiClient) -> Any:
    """The read API's authentication (``reconciler.apiauth``), or None: anyone who reaches it
    (``--api-auth none``, or ``auto`` on a loopback address)."""
    from reconciler.apiauth import Delegated
    from reconciler.permissions import delegated_auth

    if not delegated_auth(args):
        if getattr(args, "api_auth", "none") == "none" and args.host not in ("127.0.0.1", "::1"):
            log.warning("the read API on %s answers anyone (--api-auth none)", args.host)
        return None
    return Delegated(api)


def _serve_visibility(
    serving: Serving, host: str, port: int, cert: Path | None, key: Path | None
) -> None:
    """The aggregated visibility API (``reconciler.visibility``) over HTTPS, asking for the
    front proxy's client certificate (its CA from ``extension-apiserver-authentication``)."""
    from kubernetes.client.exceptions import ApiException

    from reconciler.api import visibility_app
    from reconciler.permissions import AUTHENTICATION_CONFIGMAP
    from reconciler.visibility import read_request_header
    from webhook.serve import WebhookServer

    if cert is None or key is None:
        raise ServeError("--visibility-port needs --tls-cert and --tls-key")
    where = "/".join(AUTHENTICATION_CONFIGMAP)
    try:
        config = read_request_header(serving.api)
    except ApiException as error:
        why = f"{error.status} {error.reason}"
        raise ServeError(f"cannot read the ConfigMap {where}: {why}") from error
    if config is None:
        raise ServeError(f"the ConfigMap {where} names no requestheader-client-ca-file")
    served = visibility_app(serving.api_app, config)
    server = WebhookServer(served, host, port, tls=(cert, key), client_ca=config.client_ca)
    server.start()
    serving.servers.append(server)
    _count_certificate(serving, "visibility", server)
    bound_host, bound_port = server.address
    serving.addresses["visibility"] = f"https://{bound_host}:{bound_port}"


def api_app(serving: Serving) -> Flask:
    """The read API of :mod:`reconciler.api` (with /metrics and the probes) and the policy
    metrics, plus ``/leader`` and any probe it does not answer itself."""
    from reconciler.api import create_app
    from webhook.metrics import CertificateCollector, PolicyCollector

    app = create_app(serving.reconciler, auth=serving.auth)
    # the policy set's state (fleetgate_policy_*), as the webhook's /metrics has it
    app.config["fleetgate.metrics"].registry.register(PolicyCollector(serving.holder))
    # the serving certificates of the webhook and visibility servers, once they start
    certificates = app.config["fleetgate.certificates"] = CertificateCollector()
    app.config["fleetgate.metrics"].registry.register(certificates)
    taken = {rule.rule for rule in app.url_map.iter_rules()}
    probes: dict[str, Callable[[], Response]] = {
        "/healthz": lambda: _text(200, "ok"),
        "/leader": lambda: _leader(serving),
    }
    for path, view in probes.items():
        if path not in taken:
            app.add_url_rule(path, path.strip("/"), view, methods=["GET"])
    return app


def _text(status: int, text: str) -> Response:
    return Response(text + "\n", status=status, mimetype="text/plain")


def _leader(serving: Serving) -> Response:
    elector = serving.elector
    if elector is None:
        return _text(200, "leader election off: this replica writes")
    leading = elector.is_leader()
    holder = elector.observed_holder or "none"
    return _text(200, f"{'leader' if leading else 'follower'} {elector.config.identity}; "
                 f"lease holder {holder}")  # fmt: skip


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    wrong = certargs.problem(args)
    if wrong is not None:
        print(f"fleetgate serve: {wrong}", file=sys.stderr)
        return EXIT_USAGE
    for flag, port in (
        ("--webhook-port", args.webhook_port),
        ("--visibility-port", args.visibility_port),
    ):
        files = args.tls_cert is not None and args.tls_key is not None
        if port is not None and not files and args.tls_secret is None:
            print(
                f"fleetgate serve: {flag} needs --tls-cert and --tls-key, or --tls-secret",
                file=sys.stderr,
            )
            return EXIT_USAGE
    try:
        settings_of(args)
    except EstimatorSettingsError as error:
        print(f"fleetgate serve: {error}", file=sys.stderr)
        return EXIT_USAGE
    identity = args.identity or default_identity()
    stop = StopSignals()
    try:
        serving = start_all(args, identity)
    except FleetgateError as error:
        print(f"fleetgate serve: {error}", file=sys.stderr)
        return EXIT_FAILED
    lines = [f"fleetgate serve: {identity} watching {serving.api.configuration.host}"]
    lines += [f"  {what}: {url}" for what, url in serving.addresses.items()]
    print("\n".join(lines), flush=True)
    stop.wait()
    stop.close()
    log.info("stopping")
    watchdog = threading.Timer(args.shutdown_timeout, _overran, (args.shutdown_timeout,))
    watchdog.daemon = True
    watchdog.start()
    stop_all(serving, args.shutdown_timeout)
    watchdog.cancel()
    log.info("stopped")
    return EXIT_OK


def _overran(seconds: float) -> None:
    log.error("the stop took more than %gs; exiting", seconds)
    logging.shutdown()
    os._exit(EXIT_FAILED)
