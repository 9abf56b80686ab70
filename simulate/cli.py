"""``fleetgate simulate``: replay a job trace through the real cycle on simulated members.

Registered through the ``fleetgate.commands`` entry point. Exit 0 after a run; 1 when the
policies, fleet, trace or fault script cannot be read (every problem printed, with its place);
2 for a usage error, and for ``--report`` without matplotlib (the ``report`` extra: the plots),
said before anything runs or is written.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from engine.cycle import Baseline
from engine.errors import PolicyLoadError
from engine.members import FleetFileError, load_fleet, parse_duration
from engine.policy.policyset import PolicySet, load_policy_set
from simulate.columns import OptionError, build_mapping
from simulate.live import FaultError, read_faults
from simulate.loop import Options, Simulation
from simulate.results import RunResult
from simulate.trace import TraceError, read_trace

EXIT_OK, EXIT_INVALID, EXIT_USAGE = 0, 1, 2
DEFAULT_FLEET = Path("examples/fleet.yaml")
REPORT_EXTRA = "pip install 'fleetgate[report]'"  # matplotlib and numpy, for the plots
# the distribution's own packages: an ImportError naming one of them is a bug, not a missing extra
OWN_PACKAGES = frozenset({"engine", "fleetgate", "reconciler", "sandbox", "simulate", "webhook"})
ReportWriter = Callable[[Path, list[RunResult]], list[Path]]


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "simulate",
        help="replay a job trace through the scheduling cycle on simulated member clusters",
        description="Discrete-event simulation over simulated time: trace jobs arrive, the real "
        "scheduling cycle (in-process) admits, places and preempts them on simulated member "
        "clusters with node-level placement, and they run for their duration. Prints a "
        "one-screen summary; --report writes summary.json, jobs.csv, plots and report.html. "
        "See docs/simulator.md.",
    )
    p.add_argument("--policies", type=Path, required=True, metavar="DIR")
    p.add_argument("--fleet", type=Path, default=DEFAULT_FLEET, metavar="FILE")
    p.add_argument("--trace", type=Path, required=True, metavar="FILE", help=".csv or .jsonl")
    p.add_argument(
        "--compare", metavar="DIR|baseline", help="a second policy set, or the built-in baseline"
    )
    p.add_argument(
        "--report",
        type=Path,
        metavar="OUT",
        help=f"directory for the report (its plots need matplotlib: {REPORT_EXTRA})",
    )
    p.add_argument("--until", type=_duration, metavar="T", help="stop at T (3600, 12h, 7d)")
    p.add_argument("--seed", type=int, default=1, help="seed of the random job failures")
    p.add_argument(
        "--interval",
        type=_duration,
        default=10.0,
        metavar="T",
        help="least simulated time between two cycles (0: one per distinct event time)",
    )
    p.add_argument("--columns", default="", metavar="FIELD=COLUMN,…", help="column mapping")
    p.add_argument("--units", default="", metavar="FIELD=UNIT,…", help="units of bare numbers")
    p.add_argument("--per-gpu", default="", metavar="cpu=Q,memory=Q", help="pod shape per GPU")
    p.add_argument("--gpus-per-pod", type=int, default=8, metavar="N")
    p.add_argument("--set", default="", metavar="FIELD=VALUE,…", help="values of absent fields")
    p.add_argument("--skip-bad-rows", action="store_true", help="leave out rows that fail")
    p.add_argument("--faults", type=Path, metavar="FILE", help="CSV at,action,target[,message]")
    p.add_argument("--fail-rate", type=float, default=0.0, help="chance a started job fails")
    p.add_argument("--window", type=_duration, default=3600.0, metavar="T", help="fairness")
    p.add_argument("-o", "--output", choices=("table", "json"), default="table")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(handler=run)


def _duration(text: str) -> float:
    """Seconds, or a duration (``90m``, ``12h``, ``1h30m``); ``7d`` for days."""
    text = text.strip()
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if seconds >= 0 and math.isfinite(seconds):
        return seconds
    if text.endswith("d"):
        try:
            return float(text[:-1]) * 86400
        except ValueError:
            pass
    span = parse_duration(text)
    if span is None:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (seconds, 90m, 12h, 7d)")
    return span.total_seconds()


def run(args: argparse.Namespace) -> int:
    write_report = None
    if args.report is not None:
        write_report = report_writer()
        if write_report is None:
            return EXIT_USAGE
    loaded = _load(args)
    if loaded is None:
        return EXIT_INVALID
    head, other, fleet, trace, faults = loaded
    options = Options(
        until=args.until,
        seed=args.seed,
        interval=args.interval,
        fail_rate=args.fail_rate,
        window_s=args.window,
        faults=faults,
    )
    sides: list[tuple[str, PolicySet, Any]] = [("head", head, None)]
    if args.compare == "baseline":
        sides.append(("baseline", head, Baseline()))
    elif other is not None:
        sides.append((Path(args.compare).name or "compare", other, None))
    runs: list[RunResult] = []
    for label, policies, decide in sides:
        opts = Options(**{**_fields(options), "label": label})
        simulation = Simulation(policies, fleet, trace, opts, decide)
        runs.append(_run(simulation, label, args.no_progress or args.output == "json"))
    if args.output == "json":
        print(json.dumps([r.summary for r in runs], indent=2, default=_plain))
    else:
        from simulate.screen import print_summary

        print_summary(runs)
    if write_report is not None:
        for path in write_report(args.report, runs):
            print(f"wrote {path}", file=sys.stderr)
    return EXIT_OK


def report_writer() -> ReportWriter | None:
    """:func:`simulate.report.write_report`, or None when what its plots need (matplotlib, the
    ``report`` extra) is not installed: then one line on stderr says how to get it. Asked
    before the simulation runs, so that a long run never ends in an ImportError, and nothing
    of the report is written."""
    try:
        from simulate.report import write_report
    except ImportError as error:
        missing = (error.name or "").partition(".")[0]
        if not missing or missing in OWN_PACKAGES:
            raise
        print(
            f"fleetgate simulate: --report needs matplotlib for its plots ({error}); "
            f"install the report extra: {REPORT_EXTRA}",
            file=sys.stderr,
        )
        return None
    return write_report


def _fields(options: Options) -> dict[str, Any]:
    return {name: getattr(options, name) for name in options.__slots__}


def _plain(value: Any) -> Any:
    return None if isinstance(value, float) and not math.isfinite(value) else str(value)


def _load(args: argparse.Namespace) -> tuple[Any, ...] | None:
    problems: list[str] = []
    policies = other = fleet = trace = None
    faults: tuple = ()
    try:
        policies = load_policy_set([args.policies])
    except PolicyLoadError as err:
        problems.extend(str(i) for i in err.issues)
    if args.compare and args.compare != "baseline":
        try:
            other = load_policy_set([Path(args.compare)])
        except PolicyLoadError as err:
            problems.extend(str(i) for i in err.issues)
    try:
        fleet = load_fleet(args.fleet)
    except FleetFileError as err:
        problems.extend(str(i) for i in err.issues)
    except OSError as err:
        problems.append(f"{args.fleet}: {err.strerror or err}")
    try:
        mapping = build_mapping(args.columns, args.units, args.per_gpu, args.gpus_per_pod, args.set)
        trace = read_trace(args.trace, mapping, skip_bad_rows=args.skip_bad_rows)
        for skipped in trace.skipped[:5]:
            print(f"warning: skipped {skipped}", file=sys.stderr)
        if len(trace.skipped) > 5:
            print(f"warning: … {len(trace.skipped)} rows skipped in all", file=sys.stderr)
    except (TraceError, OptionError) as err:
        problems.append(str(err))
    if args.faults is not None:
        try:
            faults = read_faults(args.faults)
        except FaultError as err:
            problems.append(str(err))
    if fleet is not None and faults:
        names = {c.name for c in fleet.clusters}
        for f in faults:
            if f.action != "fail-job" and f.target not in names:
                problems.append(f"{args.faults}: {f.action} {f.target}: no such cluster")
    if problems:
        for problem in problems:
            print(problem, file=sys.stderr)
        return None
    return policies, other, fleet, trace, faults


def _run(simulation: Simulation, label: str, quiet: bool) -> RunResult:
    if quiet:
        return simulation.run()
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    total = len(simulation.jobs)
    columns: Sequence[Any] = (
        TextColumn(f"[bold]{label}[/]"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} jobs ended"),
        TextColumn("sim {task.fields[sim]}"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, transient=True) as bar:
        task = bar.add_task(label, total=total, sim="0h")
        step = max(total // 200, 1)
        last = [-step]

        def progress(t: float, ended: int, _total: int) -> None:
            if ended - last[0] >= step:
                last[0] = ended
                bar.update(task, completed=ended, sim=f"{t / 3600:.1f}h")

        return simulation.run(progress)
