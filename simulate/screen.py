"""The one-screen summary ``fleetgate simulate`` prints at the end (rich tables)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

from simulate.results import RunResult


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
    row("completion p50 / p95", lambda s: " / ".join(
        _time(s["jobs"]["completion_s"][k]) for k in ("p50", "p95")))  # fmt: skip
    row("GPU utilisation (mean)", lambda s: _num(s["gpu_utilisation_mean"], 3))
    row("fragmented GPUs (mean)", lambda s: _num(s["fragmentation_gpu_mean"], 2))
    row("Jain mean / min", lambda s: f"{_num(s['fairness']['jain_mean'], 3)} / "
        f"{_num(s['fairness']['jain_min'], 3)}")  # fmt: skip
    row("preemptions · GPU-h lost", lambda s: f"{s['jobs']['preemptions']} · "
        f"{s['jobs']['gpu_hours_lost']:.1f}")  # fmt: skip
    row("failures · rescheduled", lambda s: f"{s['jobs']['failures']} · "
        f"{s['jobs']['rescheduled']}")  # fmt: skip
    row("simulated · wall · cycles", lambda s: f"{_time(s['until_s'])} · {s['wall_s']:.1f}s · "
        f"{s['cycles']}")  # fmt: skip
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
