"""``fleetgate serve``: the reconciler, its HTTP API and (optionally) the admission webhook in
one process. Registered through the entry point group ``fleetgate.commands``.

Importing this module costs argparse only; the kubernetes client, Flask and the engine are
imported when the command runs (:mod:`reconciler.serve`). Exit status: 0 after a clean stop
(SIGTERM or SIGINT), 1 when something cannot start (kubeconfig, port, certificate, leader
election settings) or the stop overran ``--shutdown-timeout``, 2 on usage errors.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from engine import argtypes
from reconciler import estimatorargs
from reconciler.writers import DEFAULT_WRITE_WORKERS
from webhook import certargs


def add_parser(subparsers: Any) -> None:
    """Register ``serve`` on the ``fleetgate`` command's subparsers."""
    parser = subparsers.add_parser(
        "serve",
        help="run the reconciler (admits jobs by writing their ResourceBindings), its HTTP API "
        "and optionally the admission webhook",
        description="Watch the Karmada API server of --kubeconfig, run a scheduling cycle over "
        "its bindings, clusters and job templates after each change, and write the decisions "
        "(spec.clusters, annotations, the Scheduled condition, Events) to the bindings it "
        "manages. Replicas elect a leader on a coordination.k8s.io/v1 Lease: only the leader "
        "writes. Policies under --policies are reloaded when their files change. Serves "
        "the read API (/api/v1/...), /metrics, /healthz and /readyz over HTTP on --port, and the "
        "admission webhook over HTTPS on --webhook-port when given. Stops cleanly on SIGTERM. "
        "See docs/reconciler.md.",
    )
    parser.add_argument(
        "--kubeconfig",
        type=Path,
        required=True,
        metavar="FILE",
        help="kubeconfig of the Karmada API server (not the host cluster)",
    )
    parser.add_argument("--context", help="kubeconfig context (its current-context)")
    parser.add_argument("--policies", type=Path, required=True, metavar="DIR")
    parser.add_argument(
        "--mode",
        choices=("bind", "release"),
        default="bind",
        help="bind: fleetgate writes spec.clusters; release: it lifts the scheduling "
        "suspension and Karmada's scheduler places the job (bind)",
    )
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="address of the HTTP API (127.0.0.1: this machine only; any other address turns "
        "on --api-auth delegated unless told otherwise)",
    )
    parser.add_argument(
        "--api-auth",
        choices=("auto", "delegated", "none"),
        default="auto",
        help="who may read /api/v1: delegated: a bearer token the API server knows "
        "(TokenReview) and RBAC's leave (SubjectAccessReview, group visibility.fleetgate.io); "
        "none: anyone who reaches the port; auto: delegated unless --host is a loopback address",
    )
    parser.add_argument(
        "--tls-host",
        default="0.0.0.0",
        help="address of the HTTPS servers (--webhook-port, --visibility-port) (0.0.0.0)",
    )
    parser.add_argument(
        "--port", type=argtypes.port, default=8080, help="HTTP API port (8080; 0: any free port)"
    )
    parser.add_argument(
        "--webhook-port",
        type=argtypes.port,
        metavar="N",
        help="also serve the admission webhook over HTTPS on this port (needs --tls-cert and "
        "--tls-key)",
    )
    parser.add_argument(
        "--visibility-port",
        type=argtypes.port,
        metavar="N",
        help="also serve the visibility API (visibility.fleetgate.io, an aggregated API behind "
        "the API server's APIService) over HTTPS on this port (needs --tls-cert and --tls-key; "
        "the front proxy's CA comes from kube-system/extension-apiserver-authentication)",
    )
    parser.add_argument(
        "--fleetgate-user",
        action="append",
        metavar="NAME",
        help="with --webhook-port: a user who may change fleetgate's marks on a binding (repeat "
        "it); default: system:serviceaccount:fleetgate-system:fleetgate-reconciler",
    )
    parser.add_argument("--tls-cert", type=Path, metavar="FILE", help="webhook certificate (PEM)")
    parser.add_argument("--tls-key", type=Path, metavar="FILE", help="webhook private key (PEM)")
    certargs.add_arguments(parser)
    election = parser.add_argument_group("leader election")
    election.add_argument(
        "--no-leader-elect",
        dest="leader_elect",
        action="store_false",
        help="write without electing a leader: only when exactly one replica runs",
    )
    election.add_argument("--lease-name", default="fleetgate-reconciler", help="(%(default)s)")
    parser.add_argument(
        "--last-good-configmap",
        default="fleetgate-last-good-policies",
        metavar="NAME",
        help="the ConfigMap, in the Lease's namespace, where the leader stores each policy set "
        "that loads; a replica whose policy files do not load at start runs on it "
        "(%(default)s; empty: off)",
    )
    election.add_argument(
        "--lease-namespace",
        default="fleetgate-system",
        help="namespace of the Lease on the Karmada API server (%(default)s)",
    )
    election.add_argument(
        "--identity",
        help="this replica's name in the Lease and its User-Agent (hostname_<random>; in a "
        "Deployment, the pod name)",
    )
    election.add_argument(
        "--lease-duration",
        type=_seconds,
        default=15.0,
        metavar="SECONDS",
        help="how long followers wait after the last renewal they saw before taking over (15)",
    )
    election.add_argument(
        "--renew-deadline",
        type=_seconds,
        default=10.0,
        metavar="SECONDS",
        help="the leader stops writing when it could not renew for this long (10)",
    )
    election.add_argument(
        "--retry-period",
        type=_seconds,
        default=2.0,
        metavar="SECONDS",
        help="how often to renew, or try to acquire (2)",
    )
    parser.add_argument(
        "--resync",
        type=_seconds,
        default=30.0,
        metavar="SECONDS",
        help="a pass at least this often even without events (30)",
    )
    parser.add_argument(
        "--write-workers",
        type=_workers,
        default=DEFAULT_WRITE_WORKERS,
        metavar="N",
        help="bindings a pass writes at once, each on a thread and connection of its own "
        f"({DEFAULT_WRITE_WORKERS}; 1 to 64)",
    )
    parser.add_argument(
        "--shutdown-timeout",
        type=_seconds,
        default=20.0,
        metavar="SECONDS",
        help="a stop that takes longer ends the process with exit status 1 (20)",
    )
    parser.add_argument(
        "--log-level", default="INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR")
    )
    estimatorargs.add_arguments(parser)
    parser.set_defaults(handler=run)


def _seconds(text: str) -> float:
    return argtypes.more_than_zero(text, " seconds")


def _workers(text: str) -> int:
    try:
        count = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if not 1 <= count <= 64:
        raise argparse.ArgumentTypeError(f"expected 1 to 64, got {count}")
    return count


def run(args: argparse.Namespace) -> int:
    from reconciler.serve import run as serve

    return serve(args)


def main(argv: list[str] | None = None) -> int:
    """``python -m reconciler.cli ARGS``: ``fleetgate serve ARGS`` without fleetgate.cli."""
    import sys

    parser = argparse.ArgumentParser(prog="fleetgate")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["serve", *(sys.argv[1:] if argv is None else argv)])
    return int(args.handler(args))


if __name__ == "__main__":
    raise SystemExit(main())
