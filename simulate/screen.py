"""The one-screen summary ``fleetgate simulate`` prints at the end (rich tables)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

from simulate.results import SIZE_CLASSES, RunResult


def _num(value: Any, digits: int = 0, unit: str = "") -> str:
    if value is None:
        return "–"
    if isinstance(value, float) and digits == 0 and abs(value) >= 1:
        return f"{value:,.0f}{unit}"
    return f"{value:,.{digits}f}{unit}" if isinstance(value, float) else f"{value}{unit}"


def _time(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.1f}m"
    return f"{seconds / 3600:.1f}h"


def _times(found: dict[str, Any] | None, *keys: str) -> str:
    return " / ".join(_time((found or {}).get(k)) for k in keys)


def _never(s: dict[str, Any]) -> str:
    jobs = s["jobs"]
    hours = jobs.get("never_admitted_gpu_hours") or 0.0
    return f"{jobs.get('never_admitted', 0)} ({hours:,.0f} GPU-h) · {jobs.get('never_fits', 0)}"


def _reasons(s: dict[str, Any]) -> str:
    found = s["jobs"].get("never_admitted_by_reason") or {}
    return ", ".join(f"{reason} {n}" for reason, n in sorted(found.items())) or "–"


def overview(runs: Sequence[RunResult]) -> Table:
    censored = any(r.summary["jobs"].get("never_admitted") for r in runs)
    table = Table(
        title="fleetgate simulate",
        title_justify="left",
        caption="* jobs never admitted count as waiting until the end (a lower bound)"
        if censored
        else None,
        caption_justify="left",
    )
    table.add_column("")
    for run in runs:
        table.add_column(run.label, justify="right")

    def row(name: str, value: Any) -> None:
        table.add_row(name, *(value(r.summary) for r in runs))

    row("jobs (succeeded / total)", lambda s: f"{s['jobs']['succeeded']} / {s['jobs']['total']}")
    row("pending · running at end", lambda s: f"{s['jobs']['pending']} · {s['jobs']['running']}")
    row("never admitted · NeverFits", _never)
    if censored:
        row("never admitted by reason", _reasons)
    row("rejected · gave up", lambda s: f"{s['jobs']['rejected']} · {s['jobs']['gave_up']}")
    row("wait p50 / p95 / max" + ("*" if censored else ""), lambda s: " / ".join(
        _time(s["jobs"]["wait_s"][k]) for k in ("p50", "p95", "max")))  # fmt: skip
    row("wait to start p50/p95/max" + ("*" if censored else ""),
        lambda s: _times(s["jobs"].get("wait_to_start_s"), "p50", "p95", "max"))  # fmt: skip
    row("completion p50 / p95", lambda s: " / ".join(
        _time(s["jobs"]["completion_s"][k]) for k in ("p50", "p95")))  # fmt: skip
    row("GPU utilisation (mean)", lambda s: _num(s["gpu_utilisation_mean"], 3))
    row("GPU utilisation (arrivals)", lambda s: _num(s.get("gpu_utilisation_arrival_span"), 3))
    row("fragmented GPUs (mean)", lambda s: _num(s["fragmentation_gpu_mean"], 2))
    row("Jain mean / min", lambda s: f"{_num(s['fairness']['jain_mean'], 3)} / "
        f"{_num(s['fairness']['jain_min'], 3)}")  # fmt: skip
    row("attainment mean / min", lambda s: " / ".join(
        _num(s["fairness"].get(k), 3) for k in ("attainment_mean", "attainment_min")))  # fmt: skip
    row("preemptions · GPU-h lost", lambda s: f"{s['jobs']['preemptions']} · "
        f"{s['jobs']['gpu_hours_lost']:.1f}")  # fmt: skip
    row("preempted · >1× · most", lambda s: " · ".join(
        str(s["jobs"].get(k, "–")) for k in BY_JOB))  # fmt: skip
    row(
        "reclaims below a guarantee", lambda s: str(s["jobs"].get("reclaimed_below_guarantee", "–"))
    )
    row("failures · rescheduled", lambda s: f"{s['jobs']['failures']} · "
        f"{s['jobs']['rescheduled']}")  # fmt: skip
    row("simulated · wall · cycles", lambda s: f"{_time(s['until_s'])} · {s['wall_s']:.1f}s · "
        f"{s['cycles']}")  # fmt: skip
    return table


BY_JOB = ("preempted_jobs", "preempted_more_than_once", "max_preemptions_per_job")


def _cells(size: dict[str, Any]) -> list[str]:
    return [
        str(size["jobs"]),
        "/".join(_time(size["wait_s"][k]) for k in ("p50", "p95", "max")),
        _times(size["wait_to_start_s"], "p95"),
        f"{size['preempted_jobs']} · {size['preemptions']}",
        f"{size['gpu_hours_lost_to_preemption']:,.1f}",
    ]


def sizes(runs: Sequence[RunResult]) -> Table | None:
    """Jobs by size (total GPUs): a row per class with jobs (per run, with two), then all."""
    if not any(r.summary.get("by_size") for r in runs):
        return None
    censored = "*" if any(r.summary["jobs"].get("never_admitted") for r in runs) else ""
    table = Table(title="jobs by size (GPUs per job)", title_justify="left")
    table.add_column("GPUs")
    if len(runs) > 1:
        table.add_column("run", no_wrap=True)
    table.add_column("jobs", justify="right")
    table.add_column(f"wait p50/p95/max{censored}", justify="right", no_wrap=True)
    for header in ("start p95", "preempted jobs · times", "GPU-h lost"):
        table.add_column(header, justify="right")
    shown = [c for c in SIZE_CLASSES if any(
        (r.summary.get("by_size") or {}).get(c, {}).get("jobs") for r in runs)]  # fmt: skip
    large = any((r.summary.get("large_jobs") or {}).get("jobs") for r in runs)
    for name in [*shown, *(["≥8"] if large else []), "all"]:
        first = True
        for run in runs:
            jobs = run.summary["jobs"]
            if name == "all":
                entry = {**jobs, "jobs": jobs["total"]}
            elif name == "≥8":  # across the classes: jobs of 8 GPUs or more
                entry = run.summary.get("large_jobs")
            else:
                entry = run.summary.get("by_size", {}).get(name)
            if entry is None:
                continue
            label = [run.label] if len(runs) > 1 else []
            table.add_row(name if first else "", *label, *_cells(entry))
            first = False
    return table


def queues(runs: Sequence[RunResult]) -> Table:
    table = Table(title="queues: wait p50/p95 · GPU share (weight)", title_justify="left")
    table.add_column("queue")
    table.add_column("weight", justify="right")
    for run in runs:
        table.add_column(run.label, justify="right")
    names = sorted({q for r in runs for q in r.summary["queues"]})
    for name in names[:20]:
        cells = []
        weight = None
        for run in runs:
            q = run.summary["queues"].get(name)
            if q is None:
                cells.append("–")
                continue
            weight = q["weight"]
            wait = q["wait_s"]
            cells.append(f"{_time(wait['p50'])}/{_time(wait['p95'])} · {q['share_mean']:.3f}")
        table.add_row(name, _num(weight, 1), *cells)
    return table


def print_summary(runs: Sequence[RunResult], console: Console | None = None) -> None:
    console = console or Console()
    console.print(overview(runs))
    console.print(queues(runs))
    if (by_size := sizes(runs)) is not None:
        console.print(by_size)
    stages = sorted({s for r in runs for s in r.summary.get("stages", {})})
    if stages:
        table = Table(title="pipeline stages: wait p50 / max", title_justify="left")
        table.add_column("stage")
        for run in runs:
            table.add_column(run.label, justify="right")
        for stage in stages:
            table.add_row(stage, *(
                " / ".join(_time(r.summary["stages"][stage]["wait_s"][k]) for k in ("p50", "max"))
                if stage in r.summary["stages"] else "–"
                for r in runs
            ))  # fmt: skip
        console.print(table)
