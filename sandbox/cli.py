"""``fleetgate sandbox``: run the sandbox API server; ``fleetgate sandbox fault …``: inject faults.

Registered by ``fleetgate.cli`` (lazily: importing this module costs argparse only; the server is
imported when the command runs). Exit status: 0 after a clean stop (Ctrl-C or SIGTERM), 1 when
the server cannot start or the fault is refused, 2 on usage errors.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine import argtypes

if TYPE_CHECKING:
    from sandbox.karmada import KarmadaControllers

log = logging.getLogger("fleetgate.sandbox")
EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
DEFAULT_KUBECONFIG = Path("sandbox.kubeconfig")
DEFAULT_FLEET = Path("examples/fleet.yaml")
# the example fleet of the source tree, when run from another directory
_REPO_FLEET = Path(__file__).resolve().parent.parent / DEFAULT_FLEET


def add_parser(subparsers: Any) -> None:
    """Register ``sandbox`` (and ``sandbox fault``) on the ``fleetgate`` command."""
    parser = subparsers.add_parser(
        "sandbox",
        help="run the embedded Karmada-compatible API server for tests and demos",
        description="Serve the Kubernetes/Karmada API on 127.0.0.1 (HTTPS with a CA generated "
        "at start) from memory, write a kubeconfig for kubectl and the kubernetes client, and "
        "run until Ctrl-C. Not for production: nothing is persisted. See docs/sandbox.md.",
    )
    parser.add_argument(
        "--fleet",
        type=Path,
        metavar="FILE",
        help=f"the member clusters, a fleet file ({DEFAULT_FLEET})",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    parser.add_argument(
        "--port", type=argtypes.port, default=6443, help="port (6443; 0: any free port)"
    )
    parser.add_argument(
        "--speed", type=_speed, default=1.0, help="clock speed of the controllers (1: real time)"
    )
    parser.add_argument(
        "--kubeconfig-out",
        type=Path,
        default=DEFAULT_KUBECONFIG,
        metavar="FILE",
        help=f"where to write the kubeconfig ({DEFAULT_KUBECONFIG})",
    )
    parser.add_argument(
        "--insecure-http",
        action="store_true",
        help="serve plain HTTP without a token: local debugging with curl only",
    )
    parser.add_argument(
        "--service-url",
        action="append",
        default=[],
        metavar="NS/NAME:PORT=URL",
        help="where a webhook's or an APIService's service is served (no cluster DNS here)",
    )
    parser.add_argument(
        "--token-auth-file",
        type=Path,
        metavar="FILE",
        help='more bearer tokens, kube-apiserver\'s CSV format: token,user,uid,"group1,group2" '
        "(their users are authorized by the RBAC objects in the sandbox)",
    )
    parser.add_argument(
        "--front-proxy-ca-out",
        type=Path,
        metavar="FILE",
        help="also write the front-proxy CA (PEM) there, for an aggregated API server; it is in "
        "kube-system/extension-apiserver-authentication too",
    )
    parser.add_argument(
        "--concurrent-resource-template-syncs",
        type=argtypes.workers,
        default=5,
        metavar="N",
        help="templates the detector reconciles at once (5, Karmada's default)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the random faults (0)")
    parser.add_argument(
        "--scheduler-estimators",
        action="store_true",
        help="also serve a karmada-scheduler-estimator (gRPC, plain) per member cluster on "
        "--host, ephemeral ports, for fleetgate serve --scheduler-estimator CLUSTER=HOST:PORT",
    )
    parser.add_argument(
        "--log-level", default="INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR")
    )
    parser.set_defaults(handler=run)
    _add_fault_parser(parser.add_subparsers(dest="sandbox_command", metavar="fault"))


def _add_fault_parser(subparsers: Any) -> None:
    fault = subparsers.add_parser(
        "fault",
        help="inject a fault into a running sandbox",
        description="Talk to the /sandbox/faults endpoint of a running sandbox.",
    )
    fault.add_argument(
        "--kubeconfig",
        type=Path,
        default=Path(os.environ.get("KUBECONFIG") or DEFAULT_KUBECONFIG),
        help="the sandbox's kubeconfig ($KUBECONFIG, else sandbox.kubeconfig)",
    )
    kinds = fault.add_subparsers(dest="fault", required=True, metavar="KIND")

    def matching(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--method", default=".*", help="HTTP method (regular expression)")
        parser.add_argument("--path", default="", help="request path (regular expression)")
        parser.add_argument("--count", type=argtypes.port, help="only the next N matching requests")
        parser.add_argument("--probability", type=float, default=1.0, help="chance per request")

    error = kinds.add_parser("error", help="answer matching requests with an error code")
    error.add_argument("code", type=int, help="409, 429, 500, …")
    error.add_argument("--retry-after", type=float, default=0, help="seconds (429, 503)")
    error.add_argument("--message", default="", help="the Status message")
    matching(error)
    latency = kinds.add_parser("latency", help="delay matching requests")
    latency.add_argument("seconds", type=float)
    matching(latency)
    drop = kinds.add_parser("drop-watches", help="disconnect open watches")
    drop.add_argument("--path", default="", help="watch path (regular expression)")
    drop.add_argument("--abrupt", action="store_true", help="cut the connection mid-stream")
    down = kinds.add_parser("cluster-down", help="a member cluster turns NotReady")
    down.add_argument("cluster")
    down.add_argument("--unreachable", action="store_true", help="no status at all (Unknown)")
    kinds.add_parser("cluster-up", help="a member cluster recovers").add_argument("cluster")
    fail = kinds.add_parser("fail-job", help="a job fails on its member cluster")
    fail.add_argument("job", metavar="NAMESPACE/NAME")
    fail.add_argument("--message", default="injected job failure")
    kinds.add_parser("list", help="the faults in force")
    kinds.add_parser("clear", help="remove one rule, or every fault").add_argument(
        "id", nargs="?", default=""
    )
    fault.set_defaults(handler=run_fault)


def _speed(text: str) -> float:
    return argtypes.more_than_zero(text)


def _service_urls(entries: list[str]) -> dict[tuple[str, str, int], str]:
    urls = {}
    for entry in entries:
        reference, _, url = entry.partition("=")
        service, _, port = reference.partition(":")
        namespace, _, name = service.partition("/")
        if not (namespace and name and url):
            raise ValueError(f"--service-url {entry!r}: expected NS/NAME:PORT=URL")
        urls[(namespace, name, int(port or 443))] = url
    return urls


# -- fleetgate sandbox ------------------------------------------------------------------------


def run(args: argparse.Namespace) -> int:
    from engine.members import Fleet, FleetFileError, load_fleet
    from sandbox.authn import TokenFileError, load_token_file
    from sandbox.clock import ScaledClock
    from sandbox.faults import Faults
    from sandbox.karmada import KarmadaControllers
    from sandbox.server import Sandbox
    from sandbox.store import Store
    from sandbox.writelog import WriteLog
    from webhook.stopsignal import StopSignals

    logging.basicConfig(
        level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        service_urls = _service_urls(args.service_url)
    except ValueError as error:
        print(f"fleetgate sandbox: {error}", file=sys.stderr)
        return EXIT_USAGE
    try:
        users = load_token_file(args.token_auth_file) if args.token_auth_file else {}
    except TokenFileError as error:
        print(f"fleetgate sandbox: {error}", file=sys.stderr)
        return EXIT_FAILED
    fleet_file = _fleet_file(args.fleet)
    try:
        spec = load_fleet(fleet_file)
    except FleetFileError as error:
        for issue in error.issues:
            print(issue, file=sys.stderr)
        print(f"{len(error.issues)} error(s) in the fleet file {fleet_file}", file=sys.stderr)
        return EXIT_FAILED
    clock = ScaledClock(args.speed)
    sandbox = Sandbox(
        Store(clock=clock.now),  # the controllers' clock: creationTimestamps agree with status
        tls_enabled=not args.insecure_http,
        token=None if args.insecure_http else "",
        service_urls=service_urls,
        users=users,
    )
    faults = Faults(seed=args.seed).attach(sandbox)
    WriteLog().attach(sandbox)  # GET /sandbox/writes: who wrote what (docs/reconciler.md)
    stop = StopSignals()
    try:
        url = sandbox.start(port=args.port, host=args.host)
        kubeconfig = sandbox.write_kubeconfig(args.kubeconfig_out).resolve()
        if args.front_proxy_ca_out:
            args.front_proxy_ca_out.write_bytes(sandbox.front_proxy.ca_pem)
    except OSError as error:
        print(f"fleetgate sandbox: cannot start: {error}", file=sys.stderr)
        sandbox.stop()
        return EXIT_FAILED
    controllers = KarmadaControllers(
        sandbox.store,
        Fleet(spec, clock.now()),
        clock.now,
        faults=faults,
        template_syncs=args.concurrent_resource_template_syncs,
    )
    controllers.start()
    estimators = None
    if args.scheduler_estimators:
        from sandbox.karmada.estimator import for_controllers

        estimators = for_controllers(controllers)
        try:
            estimators.start(args.host)
        except (OSError, RuntimeError) as error:
            print(f"fleetgate sandbox: cannot start the estimators: {error}", file=sys.stderr)
            controllers.stop()
            sandbox.stop()
            return EXIT_FAILED
    addresses = estimators.addresses if estimators is not None else None
    _announce(url, kubeconfig, fleet_file, controllers, args.speed, addresses)
    stop.wait()
    stop.close()
    log.info("stopping")
    if estimators is not None:
        estimators.stop()
    controllers.stop()
    sandbox.stop()
    return EXIT_OK


def _fleet_file(given: Path | None) -> Path:
    """``--fleet``, else examples/fleet.yaml here, else the source tree's example fleet."""
    if given is not None:
        return given
    return DEFAULT_FLEET if DEFAULT_FLEET.is_file() else _REPO_FLEET


def _announce(
    url: str,
    kubeconfig: Path,
    fleet_file: Path,
    controllers: KarmadaControllers,
    speed: float,
    estimators: dict[str, str] | None = None,
) -> None:
    clusters = [
        f"{member.name} ({len(member.nodes())} nodes)" for member in controllers.fleet.values()
    ]
    lines = [
        f"fleetgate sandbox: serving {url}",
        f"  kubeconfig: {kubeconfig}   (export KUBECONFIG={kubeconfig})",
        f"  fleet:      {fleet_file}",
        "  clusters:   " + (", ".join(clusters) if clusters else "none"),
        f"  clock:      {speed:g}x real time",
        f"  try:        kubectl --kubeconfig {kubeconfig} get namespaces",
        f"              kubectl --kubeconfig {kubeconfig} get clusters",
        f"  faults:     fleetgate sandbox fault --kubeconfig {kubeconfig} error 500 --count 1",
        *(_estimator_lines(estimators, kubeconfig) if estimators is not None else []),
        "  stop:       Ctrl-C (everything lives in memory and is lost)",
    ]
    print("\n".join(lines), flush=True)


def _estimator_lines(addresses: dict[str, str], kubeconfig: Path) -> list[str]:
    pairs = [f"{cluster}={address}" for cluster, address in sorted(addresses.items())]
    flags = " ".join(f"--scheduler-estimator {pair}" for pair in pairs)
    return [
        "  estimators: " + (" ".join(pairs) if pairs else "none"),
        f"              fleetgate serve --kubeconfig {kubeconfig} --policies policies/ {flags}",
    ]


# -- fleetgate sandbox fault ------------------------------------------------------------------


def run_fault(args: argparse.Namespace) -> int:
    from sandbox.faultclient import FaultClient, FaultClientError

    try:
        client = FaultClient.from_kubeconfig(args.kubeconfig)
        answer = client.call(*_fault_request(args))
    except (FaultClientError, ValueError) as error:
        print(f"fleetgate sandbox fault: {error}", file=sys.stderr)
        return EXIT_FAILED
    print(json.dumps(answer, indent=2, sort_keys=True))
    return EXIT_OK


def _fault_request(args: argparse.Namespace) -> tuple[str, Any, str]:
    """(method, body, query) for the faults endpoint."""
    match args.fault:
        case "list":
            return "GET", None, ""
        case "clear":
            return "DELETE", None, f"?id={args.id}" if args.id else ""
        case "error" | "latency":
            body: dict[str, Any] = {
                "type": args.fault,
                "method": args.method,
                "path": args.path,
                "count": args.count,
                "probability": args.probability,
            }
            if args.fault == "error":
                body |= {"code": args.code, "retryAfter": args.retry_after}
                body["message"] = args.message
            else:
                body["seconds"] = args.seconds
            return "POST", body, ""
        case "drop-watches":
            return "POST", {"type": "dropWatches", "path": args.path, "abrupt": args.abrupt}, ""
        case "cluster-down":
            body = {"type": "clusterDown", "cluster": args.cluster}
            return "POST", body | {"unreachable": args.unreachable}, ""
        case "cluster-up":
            return "POST", {"type": "clusterUp", "cluster": args.cluster}, ""
        case "fail-job":
            namespace, _, name = args.job.partition("/")
            if not (namespace and name):
                raise ValueError(f"fail-job {args.job!r}: expected NAMESPACE/NAME")
            body = {"type": "failJob", "namespace": namespace, "name": name}
            return "POST", body | {"message": args.message}, ""
    raise ValueError(f"unknown fault {args.fault!r}")
