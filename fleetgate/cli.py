"""The ``fleetgate`` command: argument parsing and output formats only."""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import functools
import json
import os
import sys
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from engine import argtypes
from engine.errors import PolicyLoadError
from engine.policy.policyset import PolicySet, load_policy_set
from fleetgate.snapshotfiles import add_fleet_arguments, fleet_objects

EXIT_OK, EXIT_INVALID, EXIT_USAGE = 0, 1, 2


class _DefaultsHelp(argparse.ArgumentDefaultsHelpFormatter):
    """``(default: …)`` after an option's help, unless it has no default worth showing (None,
    False, empty) or its help already gives it, as ``(default: …)`` or ``(8443; …)``."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        default, help_text = action.default, action.help or ""
        if default in (None, False, []) or "default" in help_text:
            return action.help
        shown = f"{default:g}" if isinstance(default, float) else str(default)
        if f"({shown})" in help_text or f"({shown};" in help_text:
            return action.help
        return super()._get_help_string(action)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fleetgate",
        description="Multi-cluster admission and scheduling of AI jobs on Karmada.",
    )
    parser.add_argument("--version", action="version", version=f"fleetgate {_version()}")
    commands = parser.add_subparsers(
        dest="command",
        required=True,
        metavar="COMMAND",
        parser_class=functools.partial(argparse.ArgumentParser, formatter_class=_DefaultsHelp),
    )

    validate = commands.add_parser(
        "validate",
        help="check policy files and print their version",
        description="Load policy documents (files, or directories searched recursively for "
        ".yaml/.yml), check them completely and print the policy version; with --fleet, "
        "check a fleet file too and warn of node shapes its resource models cannot see whole. "
        "Exit 0 when valid (warnings do not fail), 1 when not, 2 on usage errors.",
    )
    validate.add_argument("paths", nargs="*", type=Path, metavar="PATH")
    validate.add_argument(
        "--fleet",
        type=Path,
        metavar="FILE",
        help="a fleet file (of `fleetgate sandbox` and `simulate`) to check as well",
    )
    validate.add_argument("--revision", help="git revision recorded in the policy version")
    validate.add_argument(
        "-o", "--output", choices=("text", "json"), default="text", help="output format"
    )
    validate.set_defaults(handler=_validate, command_parser=validate)

    inspect = commands.add_parser(
        "inspect",
        help="show the demand of every job in Kubernetes object files",
        description="Read job templates (files as `kubectl get -o yaml` prints them: a List or "
        "multi-document YAML; a directory stands for its .yaml, .yml and .json files, searched "
        "recursively) and print each workload's roles, per-pod requests, total, gang minimum "
        "and queue. An object named by metadata.generateName is shown as its prefix and '*'. "
        "Exit 0 when every object was read, 1 when any object or file had an error (the rest "
        "are still printed), 2 on usage errors.",
    )
    inspect.add_argument("files", nargs="+", type=Path, metavar="PATH")
    inspect.add_argument(
        "-o", "--output", choices=("json", "table"), default="table", help="output format"
    )
    inspect.add_argument(
        "--policies",
        type=Path,
        help="policy directory whose SchedulingPolicy maps jobs to queues "
        "(default: the built-in mapping)",
    )
    inspect.set_defaults(handler=_inspect)

    dry_run = commands.add_parser(
        "dry-run",
        help="run one scheduling cycle on a fleet snapshot and print the decisions",
        description="Run one scheduling cycle of the policies on a snapshot (files as `kubectl "
        "get clusters,resourcebindings,<job kinds>,propagationpolicies,priorityclasses -A -o "
        "yaml` prints them) and print a decision for every pending job and every victim. "
        "A directory stands for its .yaml, .yml and .json files, searched recursively. "
        "Nothing is changed anywhere. Exit 0 after printing the decisions (malformed objects "
        "in the snapshot are reported as warnings), 1 when the policies are invalid, a snapshot "
        "or --job file cannot be read (nothing is decided then), a --job template cannot be "
        "decided (the rest are) or --explain names no job, 2 on usage errors.",
    )
    dry_run.add_argument("--policies", type=Path, required=True, metavar="DIR")
    add_fleet_arguments(dry_run)
    dry_run.add_argument(
        "--job",
        type=Path,
        action="append",
        default=[],
        metavar="FILE",
        help="job templates to submit (repeatable): each is claimed by its PropagationPolicy, "
        "given the ResourceBinding Karmada's detector would create, held as the webhook holds "
        "it, and decided with the rest; one line on stderr says what happened to each",
    )
    dry_run.add_argument(
        "--now",
        type=argtypes.rfc3339,
        help="the cycle's time, RFC 3339 (default: the current time)",
    )
    dry_run.add_argument(
        "-o", "--output", choices=("table", "json"), default="table", help="output format"
    )
    dry_run.add_argument(
        "--explain", metavar="NS/NAME", help="explain one job (binding or template ns/name)"
    )
    dry_run.add_argument("--revision", help="git revision recorded in the policy version")
    dry_run.set_defaults(handler=_dry_run)

    diff = commands.add_parser(
        "diff",
        help="what a policy change does: the decisions and queues that differ",
        description="Run one scheduling cycle under each of two policy sets on the same "
        "snapshot and print every decision that differs (action, reason, clusters, position, "
        "message) and each queue's share, usage and quota change. A side is a policy "
        "directory or REV:PATH, a directory in git at a revision (HEAD~1:policies, "
        "origin/main:policies). Exit 0 when nothing differs, 1 when something does, 2 on "
        "errors (an invalid policy set on either side, an unreadable snapshot).",
    )
    diff.add_argument("--base", required=True, metavar="DIR|REV:PATH", help="the policies now")
    diff.add_argument("--head", required=True, metavar="DIR|REV:PATH", help="the proposed ones")
    add_fleet_arguments(diff)
    diff.add_argument(
        "--now",
        type=argtypes.rfc3339,
        help="the cycles' time, RFC 3339 (default: the current time)",
    )
    diff.add_argument(
        "-o",
        "--output",
        choices=("table", "markdown", "json"),
        default="table",
        help="output format; markdown fits a pull-request comment",
    )
    diff.set_defaults(handler=_diff)

    bench = commands.add_parser(
        "bench",
        help="time scheduling cycles on a seeded synthetic fleet",
        description="Build a synthetic fleet (mixed job kinds and sizes, a queue tree, cluster "
        "shapes) from the seed, time full cycles over all pending jobs and incremental cycles "
        "for jobs that arrive afterwards, and print the numbers.",
    )
    bench.add_argument("--jobs", type=argtypes.positive_int, default=15_000, help="pending jobs")
    bench.add_argument("--clusters", type=argtypes.positive_int, default=10, help="member clusters")
    bench.add_argument(
        "--queues", type=argtypes.positive_int, default=30, help="queues in the tree"
    )
    bench.add_argument("--seed", type=int, default=1, help="seed of the synthetic fleet")
    bench.add_argument(
        "--repeats",
        type=argtypes.positive_int,
        default=5,
        help="cycles of each kind; the full-cycle p50 is over the cycles after the first (cold) "
        "one, so with 1 it is the cold cycle",
    )
    bench.add_argument(
        "-o", "--output", choices=("json", "text"), default="json", help="output format"
    )
    bench.set_defaults(handler=_bench)

    from fleetgate.completion import add_parser as add_completion_parser
    from fleetgate.dashboardcli import add_parser as add_dashboard_parser
    from fleetgate.kubeconfigcli import add_parser as add_kubeconfig_parser
    from fleetgate.livecli import add_parsers as add_live_parsers
    from fleetgate.preflightcli import add_parser as add_preflight_parser

    add_live_parsers(commands)  # jobs, queues, clusters, describe: the live fleet
    add_dashboard_parser(commands)
    add_kubeconfig_parser(commands)
    add_preflight_parser(commands)
    add_completion_parser(commands, parser)
    from webhook.cli import add_parser as add_webhook_parser  # argparse only; serving is lazy

    add_webhook_parser(commands)
    for command in _plugins():  # `fleetgate sandbox`: this package never imports the sandbox
        command.load()(commands)
    return parser


def _plugins() -> list[Any]:
    """Subcommands other packages of the distribution register under the entry-point group
    ``fleetgate.commands`` (a function adding its parser), in name order."""
    from importlib.metadata import entry_points

    return sorted(entry_points(group="fleetgate.commands"), key=lambda e: e.name)


def _version() -> str:
    try:
        return version("fleetgate")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed)"


def _validate(args: argparse.Namespace) -> int:
    from fleetgate.validatecli import run

    if not args.paths and args.fleet is None:
        args.command_parser.error("give a PATH, --fleet FILE, or both")  # exits 2
    return run(args)


def _inspect(args: argparse.Namespace) -> int:
    from engine.fleet.files import read_objects
    from engine.inspect import InspectedError, inspect_objects, table
    from engine.policy.policyset import default_policy_set

    if args.policies is not None:
        try:
            policies = load_policy_set([args.policies])
        except PolicyLoadError as err:
            for issue in err.issues:
                print(issue, file=sys.stderr)
            return EXIT_INVALID
    else:
        policies = default_policy_set()
    objects, problems = read_objects(args.files)
    result = inspect_objects(objects, policies, dt.datetime.now(dt.UTC))
    read_errors = tuple(InspectedError.of(problem) for problem in problems)
    result = dataclasses.replace(result, errors=read_errors + result.errors)
    if args.output == "json":
        print(json.dumps(result.to_json(), indent=2))
    else:
        print(table(result))
    return EXIT_INVALID if result.errors else EXIT_OK


def _dry_run(args: argparse.Namespace) -> int:
    from engine import dryrun
    from engine.cycle import run_cycle
    from engine.fleet.nodeshape import cluster_warnings
    from engine.fleet.snapshot import build_snapshot
    from engine.gcpause import collector_paused

    try:
        policies = load_policy_set([args.policies], revision=args.revision)
    except PolicyLoadError as err:
        for issue in err.issues:
            print(issue, file=sys.stderr)
        return EXIT_INVALID
    objects = fleet_objects(args)
    if objects is None:
        return EXIT_INVALID
    now = args.now or dt.datetime.now(dt.UTC)
    submitted = _submit_jobs(args.job, objects, policies, now)
    if submitted is None:
        return EXIT_INVALID
    objects, unbound, job_errors = submitted
    snapshot = build_snapshot(objects)
    issues = [*snapshot.errors, *unbound]
    with collector_paused():
        result = run_cycle(snapshot, policies, now)
    done = EXIT_INVALID if job_errors else EXIT_OK  # a --job template left undecided
    if args.explain:
        decision = dryrun.find(result, args.explain)
        job = dryrun.find_job(result, args.explain) if decision is None else None
        if decision is None and job is not None and args.output == "table":
            print(dryrun.explain_job(result, job))
            return done
        if decision is None:
            print(f"error: no job named {args.explain!r} in the snapshot", file=sys.stderr)
            return EXIT_INVALID
        if args.output == "json":
            print(json.dumps(decision.to_json(), indent=2))
        else:
            print(dryrun.explain(result, decision, cluster_warnings(snapshot.clusters)))
        return done
    if args.output == "json":
        print(json.dumps(result.to_json(), indent=2))
        for issue in issues:
            print(f"warning: {issue}", file=sys.stderr)
    else:
        print(dryrun.table(result, issues))
    return done


def _submit_jobs(
    files: Sequence[Path], objects: list, policies: PolicySet, now: dt.datetime
) -> tuple[list, list, list[str]] | None:
    """The snapshot's objects with the ``--job`` templates and their held bindings
    (``engine.fleet.submit``), the snapshot's unbound templates as warnings, and the templates
    that cannot be decided (printed, like what happened to the others). None when a job file
    cannot be read."""
    from engine.fleet.files import read_objects
    from engine.fleet.submit import submit, unbound_templates
    from webhook.hold import hold

    errors: list[str] = []
    if files:
        jobs, problems = read_objects(files)
        sources = [source for source, _ in jobs] + [p.source for p in problems]
        empty = [
            f"{f}: no job template in it"
            for f in map(str, files)
            if not any(s == f or s.startswith(f"{f.rstrip(os.sep)}{os.sep}") for s in sources)
        ]
        if problems or empty:
            for line in [*map(str, problems), *empty]:
                print(line, file=sys.stderr)
            print("the --job files cannot be read; no cycle was run", file=sys.stderr)
            return None
        submitted = submit(objects, jobs, lambda binding: hold(binding, policies, now), now)
        for note in submitted.notes:
            print(f"note: {note}", file=sys.stderr)
        for error in submitted.errors:
            print(f"error: {error}", file=sys.stderr)
        objects, errors = submitted.objects, submitted.errors
        return objects, [*submitted.issues, *unbound_templates(objects)], errors
    return objects, unbound_templates(objects), errors


def _diff(args: argparse.Namespace) -> int:
    from fleetgate.diffcli import run

    return run(args)


def _bench(args: argparse.Namespace) -> int:
    from engine.bench.runner import run

    numbers = run(args.jobs, args.clusters, args.queues, args.seed, args.repeats)
    if args.output == "json":
        print(json.dumps(numbers))
    else:
        from engine.bench.report import text

        print(text(numbers))
    return EXIT_OK


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
