"""The ``fleetgate`` command: argument parsing and output formats only."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from engine.errors import PolicyLoadError
from engine.policy.policyset import load_policy_set

EXIT_OK, EXIT_INVALID, EXIT_USAGE = 0, 1, 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fleetgate",
        description="Multi-cluster admission and scheduling of AI jobs on Karmada.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    validate = commands.add_parser(
        "validate",
        help="check policy files and print their version",
        description="Load policy documents (files, or directories searched recursively for "
        ".yaml/.yml), check them completely and print the policy version. "
        "Exit 0 when valid, 1 when not, 2 on usage errors.",
    )
    validate.add_argument("paths", nargs="+", type=Path, metavar="PATH")
    validate.add_argument("--revision", help="git revision recorded in the policy version")
    validate.add_argument("-o", "--output", choices=("text", "json"), default="text")
    validate.set_defaults(handler=_validate)

    inspect = commands.add_parser(
        "inspect",
        help="show the demand of every job in Kubernetes object files",
        description="Read job templates (files as `kubectl get -o yaml` prints them: a List or "
        "multi-document YAML) and print each workload's roles, per-pod requests, total, gang "
        "minimum and queue. Exit 0 when every object was read, 1 when any had an error (the rest "
        "are still printed), 2 on usage errors.",
    )
    inspect.add_argument("files", nargs="+", type=Path, metavar="FILE")
    inspect.add_argument("-o", "--output", choices=("json", "table"), default="table")
    inspect.add_argument(
        "--policies",
        type=Path,
        help="policy directory whose SchedulingPolicy maps jobs to queues "
        "(default: the built-in mapping)",
    )
    inspect.set_defaults(handler=_inspect)
    return parser


def _validate(args: argparse.Namespace) -> int:
    try:
        policies = load_policy_set(args.paths, revision=args.revision)
    except PolicyLoadError as err:
        if args.output == "json":
            errors = [
                {
                    "file": i.file,
                    "line": i.line,
                    "column": i.column,
                    "object": i.obj,
                    "path": i.path,
                    "message": i.message,
                }
                for i in err.issues
            ]
            print(json.dumps({"valid": False, "errors": errors}, indent=2))
        else:
            for issue in err.issues:
                print(issue)
            print(f"{len(err.issues)} error(s); nothing was applied", file=sys.stderr)
        return EXIT_INVALID
    summary = policies.summary()
    if args.output == "json":
        print(json.dumps({"valid": True, **summary}, indent=2))
        return EXIT_OK
    print(f"valid: policy version {policies.version}")
    print(
        f"  {summary['files']} file(s): {summary['queues']} queue(s), "
        f"scheduling policy {summary['schedulingPolicy']!r}"
        f"{'' if policies.scheduling.origin else ' (built-in default)'}, "
        f"{summary['admissionPolicies']} admission polic(ies), "
        f"{summary['celExpressions']} CEL expression(s) compiled"
    )
    return EXIT_OK


def _inspect(args: argparse.Namespace) -> int:
    from engine.fleet.files import read_objects
    from engine.inspect import InspectedError, inspect_objects, table
    from engine.policy.policyset import default_scheduling_policy

    if args.policies is not None:
        try:
            policy = load_policy_set([args.policies]).scheduling
        except PolicyLoadError as err:
            for issue in err.issues:
                print(issue, file=sys.stderr)
            return EXIT_INVALID
    else:
        policy = default_scheduling_policy()
    objects, problems = read_objects(args.files)
    result = inspect_objects(objects, policy, dt.datetime.now(dt.UTC))
    read_errors = tuple(InspectedError(p.source, p.object, p.path, p.message) for p in problems)
    result = type(result)(result.workloads, read_errors + result.errors)
    if args.output == "json":
        print(json.dumps(result.to_json(), indent=2))
    else:
        print(table(result))
    return EXIT_INVALID if result.errors else EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.handler(args))
    except BrokenPipeError:  # the reader (`| head`) went away: stop quietly, like other tools
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_INVALID


if __name__ == "__main__":
    sys.exit(main())
