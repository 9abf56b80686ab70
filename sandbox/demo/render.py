"""How the demo looks: the live view (``rich``), the plain progress lines, the final tables."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Group, RenderableType
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from engine import vectors
from engine.cycle import QueueReport
from sandbox.demo.observe import FINISHED, Tracker

GPU = "nvidia.com/gpu"
SHORT = {GPU: "GPU", "kubernetes.io/batch-cpu": "batch-cpu"}


def clock_text(seconds: float) -> str:
    """``T+1:05:30`` / ``T+05:30``: simulated time since the start."""
    whole = max(0, int(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"T+{hours}:{minutes:02d}:{secs:02d}" if hours else f"T+{minutes:02d}:{secs:02d}"


def duration_text(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    whole = round(seconds)
    if whole < 60:
        return f"{whole}s"
    minutes, secs = divmod(whole, 60)
    return f"{minutes}m{secs:02d}s" if minutes < 60 else f"{minutes // 60}h{minutes % 60:02d}m"


def headline(queue: QueueReport) -> str:
    """The resource a queue is shown by: GPUs when it may have any, else its first guarantee."""
    if queue.max.get(GPU, 0) > 0 or queue.guarantee.get(GPU, 0) > 0:
        return GPU
    return next(iter(sorted(queue.guarantee)), next(iter(sorted(queue.usage)), GPU))


def number(value: float) -> str:
    """``24``, ``2.5``, ``640k`` (batch CPU is counted in thousandths of a core)."""
    return f"{value / 1000:g}k" if value >= 10_000 else f"{value:g}"


def _amount(vec: Mapping[str, int], resource: str, unlimited: str = "-") -> str:
    if resource not in vec:
        return unlimited
    if "memory" in resource:
        return vectors.describe(resource, vec[resource])
    return number(vec[resource] / 1000)


class View:
    def __init__(self, tracker: Tracker, speed: float) -> None:
        self.tracker = tracker
        self.speed = speed
        self.events: list[str] = []

    def event(self, elapsed: float, text: str) -> str:
        line = f"{clock_text(elapsed)}  {text}"
        self.events.append(line)
        return line

    # -- live --------------------------------------------------------------------------------

    def live(self, elapsed: float) -> RenderableType:
        t = self.tracker
        finished = t.finished()
        bar = Table.grid(padding=(0, 1))
        bar.add_row(
            Text("jobs finished"),
            ProgressBar(total=len(t.jobs), completed=finished, width=40),
            Text(f"{finished}/{len(t.jobs)}  (submitted {len(t.submitted)})"),
        )
        title = Text.assemble(
            ("fleetgate demo", "bold"),
            f"  {clock_text(elapsed)} simulated ({self.speed:g}× real time)",
        )
        return Group(
            title,
            self.queue_table(),
            self.cluster_table(),
            bar,
            Text("\n".join(self.events[-6:]) or "no events yet", style="dim"),
        )

    def queue_table(self) -> Table:
        t = self.tracker
        table = Table(title="queues", title_justify="left", expand=False)
        for column in ("queue", "used / guarantee / max", "running", "pending", "top reasons"):
            right = column in ("running", "pending")
            table.add_column(column, justify="right" if right else "left")
        reports = {q.name: q for q in t.queues}
        for name, depth in _queue_rows({j.queue for j in t.jobs}, reports):
            mine = [j for j in t.jobs if j.queue == name or _parent(j.queue, reports) == name]
            states = [t.state(j) for j in mine]
            reasons: dict[str, int] = {}
            for state in states:
                if state.state == "pending" and state.reason:
                    reasons[state.reason] = reasons.get(state.reason, 0) + 1
            top = ", ".join(
                f"{reason} {n}" for reason, n in sorted(reasons.items(), key=lambda kv: -kv[1])[:2]
            )
            report = reports.get(name)
            if report is not None:
                resource = headline(report)
                used = (
                    f"{_amount(report.usage, resource, '0')} / "
                    f"{_amount(report.guarantee, resource, '0')} / "
                    f"{_amount(report.max, resource)} {SHORT.get(resource, resource)}"
                )
            else:
                used = "-"
            table.add_row(
                "  " * depth + name,
                used,
                str(sum(1 for s in states if s.state == "running")),
                str(sum(1 for s in states if s.state == "pending")),
                top or "",
            )
        return table

    def cluster_table(self) -> Table:
        table = Table(title="clusters", title_justify="left")
        for column in ("cluster", "ready", "allocated", "now"):
            table.add_column(column)
        for name, sample in sorted(self.tracker.clusters.items()):
            resource = SHORT.get(sample["resource"], sample["resource"])
            ready = sample["ready"]
            table.add_row(
                name,
                Text(ready, style="green" if ready == "True" else "bold red"),
                f"{number(float(sample['used']))} / {number(float(sample['total']))} {resource}",
                ProgressBar(total=1.0, completed=sample["utilisation"], width=20),
            )
        return table

    # -- plain -------------------------------------------------------------------------------

    def progress_line(self, elapsed: float) -> str:
        t = self.tracker
        counts = t.counts()
        reasons: dict[str, int] = {}
        for job in t.jobs:
            state = t.state(job)
            if state.state == "pending" and state.reason:
                reasons[state.reason] = reasons.get(state.reason, 0) + 1
        why = ", ".join(f"{r} {n}" for r, n in sorted(reasons.items(), key=lambda kv: -kv[1]))
        gpus = " ".join(
            f"{name} {number(float(s['used']))}/{number(float(s['total']))}"
            + ("" if s["ready"] == "True" else f" ({s['ready']})")
            for name, s in sorted(t.clusters.items())
        )
        pending = counts.get("pending", 0)
        return (
            f"{clock_text(elapsed)}  submitted {len(t.submitted):>3}/{len(t.jobs)}  "
            f"running {counts.get('running', 0):>2}  pending {pending:>2}"
            + (f" ({why})" if why else "")
            + f"  finished {t.finished():>3}/{len(t.jobs)}  |  {gpus}"
        )


def _parent(queue: str, reports: Mapping[str, QueueReport]) -> str:
    report = reports.get(queue)
    return report.parent if report is not None else ""


def _queue_rows(leaves: set[str], reports: Mapping[str, QueueReport]) -> list[tuple[str, int]]:
    """The jobs' queues under their parents (one level, as in policies/), by name."""
    parents = {_parent(name, reports) for name in leaves} - {""}
    rows = []
    for name in sorted((leaves | parents) - {q for q in leaves if _parent(q, reports)}):
        rows.append((name, 0))
        rows.extend((child, 1) for child in sorted(leaves) if _parent(child, reports) == name)
    return rows


# -- the summary ------------------------------------------------------------------------------


def summary_tables(summary: Mapping[str, Any]) -> list[RenderableType]:
    jobs = summary["jobs"]
    states = ", ".join(f"{k} {v}" for k, v in jobs["states"].items())
    head = Text(
        f"fleetgate demo: {jobs['submitted']} jobs of {len(summary['tenants'])} tenants over "
        f"{duration_text(summary['simulatedSeconds'])} simulated in {summary['wallSeconds']} s "
        f"(seed {summary['seed']}, {summary['speed']:g}×, stopped: {summary['stopped']}); "
        f"{states}; lost: {len(jobs['lost'])}"
    )
    return [
        head,
        _queue_summary(summary["queues"]),
        _cluster_summary(summary["clusters"]),
        *_failure_summary(summary["failure"]),
    ]


def _queue_summary(rows: Sequence[Mapping[str, Any]]) -> Table:
    table = Table(title="per queue", title_justify="left")
    for column in ("queue", "jobs", "admitted", "wait p50", "wait p95", "fleet share"):
        table.add_column(column, justify="left" if column == "queue" else "right")
    table.add_column("share", justify="right")
    table.add_column("weight", justify="right")
    for row in rows:
        depth = "  " if row["parent"] else ""
        table.add_row(
            depth + row["name"],
            str(row["submitted"]),
            str(row["admitted"]),
            duration_text(row["waitP50Seconds"]),
            duration_text(row["waitP95Seconds"]),
            f"{row['fleetShare']:.0%}",
            _fraction(row["siblingShare"]),
            _fraction(row["siblingWeight"]),
        )
    table.caption = "share, weight: of the sibling queues' (share: time-averaged dominant share)"
    table.caption_justify = "left"
    return table


def _fraction(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def _cluster_summary(rows: Sequence[Mapping[str, Any]]) -> Table:
    table = Table(title="per cluster", title_justify="left")
    for column in ("cluster", "resource", "capacity", "mean utilisation", "ready at the end"):
        table.add_column(column)
    for row in rows:
        table.add_row(
            row["name"],
            SHORT.get(row["resource"], row["resource"]),
            number(row["capacity"]),
            f"{row['utilisation']:.0%}",
            row["ready"],
        )
    return table


def _failure_summary(failure: Mapping[str, Any]) -> list[RenderableType]:
    if not failure["cluster"]:
        return [Text("no cluster failure was injected (the run ended first)")]
    lines = [
        f"cluster failure: {failure['cluster']} unreachable at "
        f"{clock_text(failure['downAtSeconds'] or 0)}"
        + (
            f", back at {clock_text(failure['upAtSeconds'])}"
            if failure["upAtSeconds"] is not None
            else ", still down at the end"
        )
        + f"; {len(failure['affected'])} jobs were running there: "
        + (", ".join(f"{n} {k}" for k, n in sorted(failure["outcomes"].items())) or "none")
    ]
    if failure["endedBeforeFailure"]:
        lines.append(
            f"  ({len(failure['endedBeforeFailure'])} more seen running there had ended just "
            "before it, by their members' status)"
        )
    if not failure["reschedulingAvailable"]:
        lines.append(
            "  this reconciler has no failure requeue (engine/enforce/lifecycle.py): the jobs stay "
            "placed on the failed cluster"
        )
    table = Table(title="jobs on the failed cluster", title_justify="left")
    for column in ("job", "queue", "outcome", "now", "why"):
        table.add_column(column)
    for row in failure["affected"]:
        where = ",".join(row.get("to") or row["was"])
        now = row["state"] if row["state"] in FINISHED | {"pending"} else f"{row['state']} {where}"
        if row["outcome"] == "rescheduled":
            now = f"{row['state']} on {','.join(row['to'])}"
        why = [f"requeued {row['attempts']}×"] if row["attempts"] else []
        why += ["preempted"] if row["preempted"] else []
        why += [row["reason"]] if row.get("reason") else []
        table.add_row(row["binding"], row["queue"], row["outcome"], now, ", ".join(why))
    return [Text("\n".join(lines)), table]
