"""``fleetgate webhook``: serve the admission webhook. Registered by ``fleetgate.cli``.

Importing this module is cheap (argparse only): the server, Flask and the policy engine are
imported when the command runs, so registering it slows no other subcommand.

Exit status: 0 after a clean shutdown (SIGTERM or SIGINT), 1 when the server cannot start (port
in use, a certificate, key or --fleet file that cannot be read), 2 on usage errors.
"""

from __future__ import annotations

import argparse
import functools
import gc
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine import argtypes
from webhook import certargs
from webhook.stopsignal import StopSignals

if TYPE_CHECKING:
    from reconciler.informer import Informer
    from webhook.certmanager import CertManager
    from webhook.fit import Fleet

log = logging.getLogger("fleetgate.webhook")

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
NAMESPACE_SYNC = 30.0  # seconds the start waits for the first list of Namespaces


def add_parser(subparsers: Any) -> None:
    """Register ``webhook`` on the ``fleetgate`` command's subparsers."""
    parser = subparsers.add_parser(
        "webhook",
        help="serve the admission webhook (suspend ResourceBindings, validate job templates)",
        description="Serve POST /mutate/resourcebindings and POST /validate/workloads "
        "(AdmissionReview v1) plus /healthz, /readyz and /metrics, over HTTPS. The policies "
        "under --policies and the certificate and key are reloaded when their files change.",
    )
    parser.add_argument("--policies", type=Path, required=True, metavar="DIR")
    parser.add_argument("--tls-cert", type=Path, metavar="FILE", help="PEM certificate (chain)")
    parser.add_argument("--tls-key", type=Path, metavar="FILE", help="PEM private key")
    parser.add_argument("--host", default="0.0.0.0", help="address to listen on (0.0.0.0)")
    parser.add_argument(
        "--port",
        type=argtypes.port,
        default=8443,
        help="port to listen on (8443; 0: any free port)",
    )
    parser.add_argument(
        "--threads",
        type=argtypes.positive_int,
        default=16,
        help="worker threads of the HTTP server (16)",
    )
    parser.add_argument(
        "--request-timeout",
        type=_seconds,
        default=2.0,
        metavar="SECONDS",
        help="time a client has to send a whole request (TLS handshake, headers and body) "
        "from its first byte; slower ones are disconnected. Worker threads only get requests "
        "that have arrived whole, so slow clients cannot hold them (2)",
    )
    parser.add_argument(
        "--max-connections",
        type=argtypes.positive_int,
        default=256,
        help="connections open at once; a new one beyond that replaces the oldest that has "
        "sent nothing yet, or is closed (256)",
    )
    parser.add_argument(
        "--insecure-http",
        action="store_true",
        help="serve plain HTTP without TLS: local tests only (the API server refuses it)",
    )
    parser.add_argument(
        "--fleet",
        nargs="+",
        action="extend",
        type=Path,
        default=[],
        metavar="FILE",
        help="snapshot files or directories (Clusters, PriorityClasses) for the built-in fit "
        "check and PriorityClass values; without them the fit check is skipped and priorities "
        "are 0; a file that cannot be read stops the start (exit 1)",
    )
    parser.add_argument(
        "--kubeconfig",
        type=Path,
        metavar="FILE",
        help="the Karmada API server, to watch Namespaces: a job its namespace may not put in "
        "its queue (Queue.spec.namespaceSelector) is then denied here too; without it the "
        "cycle alone rejects it (QueueNotAllowed)",
    )
    parser.add_argument("--context", help="the kubeconfig context (default: its current one)")
    parser.add_argument(
        "--fleetgate-user",
        action="append",
        metavar="NAME",
        help="a user who may change fleetgate's label and annotations on a binding (repeat it; "
        "system:masters may too); anyone else's changes are written back "
        "(default: system:serviceaccount:fleetgate-system:fleetgate-reconciler)",
    )
    parser.add_argument("--revision", help="git revision recorded in the policy version")
    parser.add_argument(
        "--tls-reload-interval",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="how often to check the certificate files for changes (10)",
    )
    parser.add_argument(
        "--policy-reload-interval",
        type=float,
        default=2.0,
        metavar="SECONDS",
        help="how often to check the policy files for changes (2)",
    )
    parser.add_argument(
        "--policy-settle",
        type=_settle,
        default=0.3,
        metavar="SECONDS",
        help="load a change to the policy files only once they have stayed unchanged this long, "
        "so that a file still being written never goes live (0.3; 0: at once)",
    )
    certargs.add_arguments(parser)
    parser.add_argument(
        "--log-level",
        default="INFO",
        choices=("DEBUG", "INFO", "WARNING", "ERROR"),
        help="log messages of this level and above (INFO)",
    )
    parser.set_defaults(handler=run)


def _seconds(text: str) -> float:
    return argtypes.more_than_zero(text, " seconds")


def _settle(text: str) -> float:
    value = float(text)
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be 0 seconds or more, got {text}")
    return value


def run(args: argparse.Namespace) -> int:
    from engine.errors import FleetgateError
    from engine.policy.reload import PolicyHolder
    from webhook.app import create_app
    from webhook.poll import policy_poller
    from webhook.serve import WebhookServer

    logging.basicConfig(
        level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    wrong = certargs.problem(args)
    files = args.tls_cert is not None and args.tls_key is not None
    if wrong is None and args.tls_secret is None and not args.insecure_http and not files:
        wrong = (
            "--tls-cert and --tls-key (or --tls-secret) are required (or --insecure-http "
            "for local tests)"
        )
    if wrong is not None:
        print(f"fleetgate webhook: {wrong}", file=sys.stderr)
        return EXIT_USAGE
    try:
        fleet = _fleet(args.fleet)
    except FleetgateError as err:
        print(f"fleetgate webhook: cannot start: {err}", file=sys.stderr)
        return EXIT_FAILED
    directory: Path = args.policies

    holder = PolicyHolder.for_paths([directory], revision=args.revision)
    # Polled with stat, like the certificate pair, rather than watched with
    # engine.policy.reload.PolicyWatcher (which also sees a ConfigMap's ..data swap): one
    # mechanism for both, an interval set by --policy-reload-interval, and no inotify watch
    # limits. A change loads once the files stayed unchanged for --policy-settle seconds.
    poller = policy_poller(holder, args.policy_reload_interval, args.policy_settle)
    if not holder.reload(expected=poller.seen):
        log.error("no valid policy set in %s; serving 503 until one loads", directory)
    try:
        watched = _namespaces(args.kubeconfig, args.context)
    except FleetgateError as err:
        print(f"fleetgate webhook: cannot start: {err}", file=sys.stderr)
        return EXIT_FAILED
    labels = None
    if watched is not None:
        from reconciler.informers import namespace_labels

        labels = functools.partial(namespace_labels, watched)
    from webhook.claims import DEFAULT_WRITERS

    writers = frozenset(args.fleetgate_user or DEFAULT_WRITERS)
    app = create_app(holder, fleet=fleet, namespaces=labels, writers=writers)
    stats = app.extensions["fleetgate.metrics"]
    try:
        managed = _managed_certificate(args)
    except FleetgateError as err:
        print(f"fleetgate webhook: cannot start: {err}", file=sys.stderr)
        return EXIT_FAILED
    tls = None if args.insecure_http else (args.tls_cert, args.tls_key)
    if managed is not None:
        tls = (managed.cert_file, managed.key_file)
    if tls is None:
        for line in _INSECURE:
            log.warning(line)
    try:
        server = WebhookServer(
            app,
            args.host,
            args.port,
            threads=args.threads,
            request_timeout=args.request_timeout,
            max_connections=args.max_connections,
            tls=tls,
            reload_interval=args.tls_reload_interval,
            on_certificate_reload=lambda ok: stats.certificate_reloads.labels(
                "ok" if ok else "failed"
            ).inc(),
        )
        server.start()
        stats.certificates.add("webhook", server)
    except (OSError, FleetgateError) as err:
        if managed is not None:
            managed.stop()
        print(f"fleetgate webhook: cannot start: {err}", file=sys.stderr)
        return EXIT_FAILED
    _tune_for_latency()
    stop = StopSignals()
    host, port = server.address
    log.info("serving %s://%s:%d (policies: %s)", server.scheme, host, port, directory)
    with poller:
        stop.wait()
    stop.close()
    log.info("shutting down")
    server.stop()
    if managed is not None:
        managed.stop()
    if watched is not None:
        watched.stop()
    return EXIT_OK


def _managed_certificate(args: argparse.Namespace) -> CertManager | None:
    """With ``--tls-secret``: the certificate made or read, its files written, its checks
    started (``webhook.certmanager``)."""
    if args.tls_secret is None:
        return None
    from reconciler.serve import api_client
    from webhook.certmanager import start_managed

    client = api_client(args.kubeconfig, args.context, "webhook")
    client.user_agent = "fleetgate-webhook"
    manager = certargs.manager(args, client)
    start_managed(manager)
    log.info("serving certificate from %s (files in %s)", manager.where, manager.directory)
    return manager


def _namespaces(kubeconfig: Path | None, context: str | None) -> Informer | None:
    """A started watch of Namespaces on the API server of ``kubeconfig`` (None without one)."""
    if kubeconfig is None:
        return None
    from reconciler.informer import Informer
    from reconciler.resources import NAMESPACES
    from reconciler.serve import api_client

    client = api_client(kubeconfig, context, "webhook")
    client.user_agent = "fleetgate-webhook"
    informer = Informer(client, NAMESPACES).start()
    if not informer.synced.wait(NAMESPACE_SYNC):
        log.warning("Namespaces not listed within %gs; checked once they are", NAMESPACE_SYNC)
    return informer


def _tune_for_latency() -> None:
    """Shorter GIL hand-offs and cheap full GCs: the tail latency of an admission request.

    A thread woken by a new request waits for the GIL at most the switch interval (5 ms by
    default) while another thread computes. ``gc.freeze`` moves everything loaded so far (modules,
    compiled policies, ~70,000 objects) out of the collector's sight: over 10,000 mutate
    requests the longest full collection then took ~9 ms instead of ~65 ms.
    """
    sys.setswitchinterval(0.001)
    gc.collect()
    gc.freeze()


def _fleet(paths: list[Path]) -> Fleet | None:
    """The fleet of the --fleet files; FleetgateError naming each file that cannot be read.

    A file that cannot be read stops the start: serving with the fit check silently off (or
    PriorityClass values silently 0) would admit what the user asked to refuse. Malformed
    objects in a readable file are left out with a warning, as ``dry-run`` does.
    """
    from engine.errors import FleetgateError
    from engine.fleet.files import read_objects
    from engine.fleet.snapshot import build_snapshot
    from webhook.fit import Fleet

    if not paths:
        return None
    objects, problems = read_objects(paths)
    if problems:
        lines = "\n".join(str(problem) for problem in problems)
        raise FleetgateError(f"the --fleet snapshot cannot be read:\n{lines}")
    snapshot = build_snapshot(objects)
    for issue in snapshot.errors:
        log.warning("fleet snapshot: %s", issue)
    fleet = Fleet.from_snapshot(snapshot)
    if not snapshot.clusters:
        log.warning("fit check off: the --fleet files hold no Cluster")
    log.info(
        "fit check over %d cluster(s)%s",
        len(fleet.clusters),
        f"; off while {', '.join(fleet.unknown)} report no allocatable" if fleet.unknown else "",
    )
    return fleet


_INSECURE = (
    "*" * 78,
    "INSECURE: --insecure-http serves admission reviews over plain HTTP without TLS.",
    "Anyone on the network can read and forge them. The Kubernetes API server only",
    "calls webhooks over HTTPS: use this for local tests only.",
    "*" * 78,
)


def main(argv: list[str] | None = None) -> int:
    """``python -m webhook ARGS``: ``fleetgate webhook ARGS``, usable without fleetgate.cli."""
    parser = argparse.ArgumentParser(prog="fleetgate")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["webhook", *(sys.argv[1:] if argv is None else argv)])
    return int(args.handler(args))
