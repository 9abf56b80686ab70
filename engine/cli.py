"""The ``fleetgate`` command: argument parsing and output formats only."""

from __future__ import annotations

import argparse
import json
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


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    return int(args.handler(args))


if __name__ == "__main__":
    sys.exit(main())
