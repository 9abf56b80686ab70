"""``fleetgate validate``: policy files, and with ``--fleet`` a fleet file (of ``fleetgate
sandbox`` and ``simulate``) and the node shapes its resource models cannot see whole (warnings,
which do not fail it), and leaf queues open to every namespace (warnings too). Exit 0 valid,
1 invalid, 2 usage."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from engine.errors import PolicyLoadError
from engine.members.fleetfile import FleetFileError, load_fleet
from engine.members.grades import fleet_warnings
from engine.policy import queueaccess
from engine.policy.policyset import PolicySet, load_policy_set

EXIT_OK, EXIT_INVALID = 0, 1


def policy_warnings(policies: PolicySet) -> list[str]:
    """What is valid but probably not meant: leaf queues open to every namespace."""
    found = []
    for name in queueaccess.open_leaves(policies):
        queue = policies.queue(name)
        where = f"{queue.origin.file}:{queue.origin.line}: " if queue and queue.origin else ""
        found.append(
            f"{where}Queue/{name}: open to every namespace (no spec.namespaceSelector on it or "
            "an ancestor): any namespace may label its jobs into it"
        )
    return found


def run(args: argparse.Namespace) -> int:
    """Check the policies (``args.paths``) and the fleet file (``args.fleet``); print the
    policy version, the fleet's clusters and its node-shape warnings, or every error."""
    issues: list[Any] = []
    policies = fleet = None
    if args.paths:
        try:
            policies = load_policy_set(args.paths, revision=args.revision)
        except PolicyLoadError as err:
            issues += err.issues
    if args.fleet is not None:
        try:
            fleet = load_fleet(args.fleet)
        except FleetFileError as err:
            issues += err.issues
    if issues:
        if args.output == "json":
            errors = [
                {
                    "file": i.file,
                    "line": i.line or None,  # null: the problem is the file itself
                    "column": i.column or None,
                    "object": i.obj,
                    "path": i.path,
                    "message": i.message,
                }
                for i in issues
            ]
            print(json.dumps({"valid": False, "errors": errors}, indent=2))
        else:
            for issue in issues:
                print(issue)
            print(f"{len(issues)} error(s); nothing was applied", file=sys.stderr)
        return EXIT_INVALID
    summary = policies.summary() if policies is not None else {}
    warnings = fleet_warnings(fleet) if fleet is not None else ()
    opened = policy_warnings(policies) if policies is not None else []
    if args.output == "json":
        out: dict[str, Any] = {"valid": True, **summary}
        if policies is not None:
            out["warnings"] = opened
        if fleet is not None:
            out["fleet"] = {
                "file": str(args.fleet),
                "clusters": [c.name for c in fleet.clusters],
                "warnings": list(warnings),
            }
        print(json.dumps(out, indent=2))
        return EXIT_OK
    if policies is not None:
        print(f"valid: policy version {policies.version}")
        print(
            f"  {summary['files']} file(s): {summary['queues']} queue(s), "
            f"scheduling policy {summary['schedulingPolicy']!r}"
            f"{'' if policies.scheduling.origin else ' (built-in default)'}, "
            f"{summary['admissionPolicies']} admission polic(ies), "
            f"{summary['celExpressions']} CEL expression(s) compiled"
        )
        for warning in opened:
            print(f"warning: {warning}")
    if fleet is not None:
        print(f"valid: fleet {args.fleet}: {len(fleet.clusters)} cluster(s)")
        for warning in warnings:
            print(f"warning: {warning}")
    return EXIT_OK
