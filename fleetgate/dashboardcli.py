"""``fleetgate dashboard``: the web dashboard on 127.0.0.1, reading the fleet as its user
(``fleetgate.dashboardserver`` says how)."""

from __future__ import annotations

import argparse
import sys
from typing import Any


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "dashboard",
        help="the web dashboard of the live fleet on 127.0.0.1, as your kubeconfig sees it",
        description="Serve the dashboard (fleet, queues, jobs, one job and why) on 127.0.0.1 "
        "and read the visibility API with your kubeconfig, so RBAC decides what you see.",
    )
    parser.add_argument("--kubeconfig", help="the kubeconfig (KUBECONFIG, ~/.kube/config)")
    parser.add_argument("--context", help="the kubeconfig context (its current one)")
    parser.add_argument("--port", type=int, default=8765, help="the port (0: any free one)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from fleetgate.dashboardserver import DashboardServer
    from fleetgate.liveapi import Live, LiveError
    from webhook.stopsignal import StopSignals

    try:
        live = Live(args.kubeconfig, args.context)
    except LiveError as error:
        print(f"fleetgate: {error}", file=sys.stderr)
        return 1
    server = DashboardServer(live, args.port)
    try:
        server.start()
    except OSError as error:
        print(f"fleetgate: cannot listen on 127.0.0.1:{args.port}: {error}", file=sys.stderr)
        live.close()
        return 1
    stopping = StopSignals()  # before the address: who reads it may stop us
    print(f"dashboard: {server.url}", flush=True)
    try:
        stopping.wait()
        stopping.close()
    finally:
        server.stop()
        live.close()
    return 0
