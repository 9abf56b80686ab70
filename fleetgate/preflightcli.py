"""``fleetgate preflight``: check a Karmada control plane for what an install of fleetgate needs,
and print a table of the checks, with what to fix (docs/preflight.md). Importing this module
costs argparse only; the checks (and the kubernetes client) are imported when it runs.

Exit status: 0 when no check fails (warnings allowed), 1 when one does, 2 on usage errors, a
kubeconfig that cannot be read, or an API server that cannot be reached or refuses it.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from pathlib import Path
from typing import Any

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "preflight",
        help="check a Karmada control plane for what an install of fleetgate needs",
        description="Check the karmada-apiserver of --kubeconfig: Karmada's release (binding "
        "suspension needs v1.13.3 or later), its CRDs and the fields fleetgate writes, the "
        "member clusters serving the job kinds the policies hold, RBAC for everything "
        "`fleetgate serve` does, the namespace of its Lease, fleetgate's webhooks (failure "
        "policy, and a dry-run binding held) and the policies. Nothing is changed. Prints a "
        "table, then what to fix. Exit 0 when nothing fails (warnings allowed), 1 when "
        "something does, 2 on usage errors or an API server that cannot be reached. See "
        "docs/preflight.md.",
    )
    parser.add_argument(
        "--kubeconfig",
        required=True,
        metavar="FILE",
        help="kubeconfig of the karmada-apiserver (not the host cluster)",
    )
    parser.add_argument("--context", help="kubeconfig context (its current-context)")
    parser.add_argument(
        "--policies",
        type=Path,
        metavar="DIR",
        help="the policy files: checked, and their SchedulingPolicy's scope says which job kinds "
        "the members must serve (default: not checked; the built-in scope)",
    )
    parser.add_argument(
        "--namespace",
        default="fleetgate-system",
        help="where fleetgate serve keeps its Lease and last good policy set (its "
        "--lease-namespace)",
    )
    parser.add_argument(
        "--service-account",
        type=_service_account,
        metavar="NAMESPACE/NAME",
        help="check RBAC for this ServiceAccount (SubjectAccessReview; e.g. "
        "fleetgate-system/fleetgate-reconciler) instead of the kubeconfig's own user",
    )
    parser.add_argument(
        "--probe-namespace",
        default="default",
        metavar="NS",
        help="the namespace of the dry-run ResourceBinding that tries the webhook, and where "
        "the scope is evaluated",
    )
    parser.add_argument(
        "-o", "--output", choices=("table", "json"), default="table", help="output format"
    )
    parser.set_defaults(handler=run)


def _service_account(text: str) -> tuple[str, str]:
    namespace, _, name = text.partition("/")
    if not namespace or not name or "/" in name:
        raise argparse.ArgumentTypeError(f"expected NAMESPACE/NAME, got {text!r}")
    return namespace, name


def run(args: argparse.Namespace) -> int:
    from fleetgate.preflight import Options, Refused, exit_code, run_checks
    from fleetgate.preflight.client import Client, Unreachable
    from fleetgate.preflight.report import to_json, write_table

    if args.policies is not None and not args.policies.exists():
        print(f"fleetgate preflight: --policies {args.policies}: no such file or directory",
              file=sys.stderr)  # fmt: skip
        return EXIT_USAGE
    options = Options(args.policies, args.namespace, args.probe_namespace, args.service_account)
    try:
        client = Client(args.kubeconfig, args.context)
    except Unreachable as error:
        print(f"fleetgate preflight: {error}", file=sys.stderr)
        return EXIT_USAGE
    try:
        checks = run_checks(client, options, dt.datetime.now(dt.UTC))
    except (Unreachable, Refused) as error:
        print(f"fleetgate preflight: {error}", file=sys.stderr)
        return EXIT_USAGE
    finally:
        client.close()
    if args.output == "json":
        print(json.dumps(to_json(checks), indent=2))
    else:
        write_table(checks, sys.stdout)
    return EXIT_FAILED if exit_code(checks) else EXIT_OK
