"""``fleetgate demo``: the whole loop on the sandbox, in one process, on a sped-up clock.

Registered through the entry point group ``fleetgate.commands``; importing this module costs
argparse only (the sandbox, the webhook and the reconciler are imported when the command runs).
Exit status: 0 after a complete run, 1 when something could not start or a job was lost, 2 on
usage errors. See docs/demo.md.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from engine import argtypes

DEFAULT_SPEED = 120.0
DEFAULT_JOBS = 60


def add_parser(subparsers: Any) -> None:
    """Register ``demo`` on the ``fleetgate`` command."""
    parser = subparsers.add_parser(
        "demo",
        help="run the sandbox fleet with the webhook and the reconciler: jobs of three tenants, "
        "a cluster failure, a summary",
        description="Start the sandbox API server (HTTPS, examples/fleet.yaml), fleetgate's "
        "admission webhook and the reconciler on 127.0.0.1; submit the jobs of three tenants "
        "over simulated time through the kubernetes client; take one member cluster down "
        "partway; show queues, pending reasons and progress live; end with a summary per "
        "queue and per cluster. Everything lives in memory and stops at the end. "
        "See docs/demo.md.",
    )
    parser.add_argument(
        "--speed",
        type=argtypes.more_than_zero,
        default=DEFAULT_SPEED,
        help=f"simulated seconds per real second ({DEFAULT_SPEED:g})",
    )
    parser.add_argument(
        "--jobs",
        type=_jobs,
        default=DEFAULT_JOBS,
        help=f"how many jobs the three tenants submit ({DEFAULT_JOBS})",
    )
    parser.add_argument("--seed", type=int, default=1, help="seed of the job mix (1)")
    parser.add_argument(
        "--plain",
        action="store_true",
        help="print progress lines instead of a live display (automatic when stdout is not a "
        "terminal)",
    )
    parser.add_argument(
        "-o",
        "--output",
        choices=("table", "json"),
        default="table",
        help="the final summary as tables (default) or one JSON document on stdout",
    )
    parser.add_argument(
        "--screenshots",
        type=Path,
        metavar="DIR",
        help="write the dashboard's pages as DIR/dashboard-PAGE.png once jobs both run and "
        "wait (needs chromium, chromium-driver and selenium; docs/dashboard.md)",
    )
    parser.add_argument(
        "--timeout",
        type=argtypes.more_than_zero,
        default=120.0,
        help="real seconds after which the run stops and reports what it has (120)",
    )
    parser.set_defaults(handler=run)


def _jobs(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 3 <= value <= 2000:
        raise argparse.ArgumentTypeError(f"must be a whole number from 3 to 2000: {text!r}")
    return value


def run(args: argparse.Namespace) -> int:
    from sandbox.demo.main import main

    return main(args)
