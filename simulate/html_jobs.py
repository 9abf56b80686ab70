"""The report's tables of what happened to jobs by size and by queue: waits to admission and to
start, jobs never admitted or given up, and preemptions (``simulate.breakdown`` computes them).
A row per size class that has jobs in some run, smallest first; with two runs a Δ column."""

from __future__ import annotations

from collections.abc import Sequence

from simulate.html_tables import Metric, count, decimal, dig, duration, field, keyed_table, whole
from simulate.results import SIZE_CLASSES, RunResult

PREEMPTION = (
    ("preempted_jobs", "preempted jobs", count),
    ("preemptions", "preemptions", count),
    ("preempted_more_than_once", "preempted more than once", count),
    ("max_preemptions_per_job", "most preemptions of one job", count),
    ("gpu_hours_lost_to_preemption", "GPU-hours lost to preemption", decimal),
)
"""Key, header, format of the preemption counts of a group of jobs."""
JOB_KEYS = tuple(key for key, _, _ in PREEMPTION if key != "preemptions")
"""The whole run's preemption counts the Jobs table shows on their own rows."""


def wait_metrics(section: str, *points: str) -> list[Metric]:
    return [
        Metric(f"{what} {p}", field(section, key, p), duration)
        for key, what in (("wait_s", "wait"), ("wait_to_start_s", "wait to start"))
        for p in points
    ]


def job_rows() -> list[Metric]:
    """Rows of the Jobs table: the waits to start over all jobs, and preemption counts."""
    starts = [
        Metric(f"wait to start {p} (all jobs, not started: until the end)",
               whole("jobs", "wait_to_start_s", p), duration)
        for p in ("p50", "p95", "p99", "max")
    ]  # fmt: skip
    counts = [
        Metric(header, whole("jobs", key), show)
        for key, header, show in PREEMPTION
        if key in JOB_KEYS
    ]
    return [*starts, *counts]


def size_tables(runs: Sequence[RunResult]) -> str:
    """Jobs by size class: counts, waits (to admission and to start), preemptions."""
    shown = [
        name
        for name in SIZE_CLASSES
        if any(dig(run.summary, "by_size", name, "jobs") for run in runs)
    ]
    if not shown:
        return ""
    counts = [
        Metric("jobs", field("by_size", "jobs"), count),
        Metric("admitted", field("by_size", "admitted"), count),
        Metric("never admitted", field("by_size", "never_admitted"), count),
        Metric("gave up", field("by_size", "gave_up"), count),
    ]
    waits = wait_metrics("by_size", "p50", "p95", "max")
    lost = [Metric(header, field("by_size", key), show) for key, header, show in PREEMPTION]
    key = "GPUs per job"
    return "".join(
        (
            keyed_table("Jobs by size", key, "by_size", counts, runs, shown),
            keyed_table("Jobs by size: waits", key, "by_size", waits, runs, shown),
            keyed_table("Jobs by size: preemption", key, "by_size", lost, runs, shown),
        )
    )


def queue_tables(runs: Sequence[RunResult]) -> str:
    """Per queue: the waits to start, and jobs never admitted, given up and preempted."""
    if not any(
        dig(queue, "wait_to_start_s") is not None
        for run in runs
        for queue in (dig(run.summary, "queues") or {}).values()
    ):
        return ""
    starts = [
        Metric(f"wait to start {p}", field("queues", "wait_to_start_s", p), duration)
        for p in ("p50", "p95", "p99", "max")
    ]
    fates = [
        Metric("never admitted", field("queues", "never_admitted"), count),
        Metric("gave up", field("queues", "gave_up"), count),
        *(Metric(header, field("queues", key), show) for key, header, show in PREEMPTION),
    ]
    return "".join(
        (
            keyed_table("Queues: wait to start", "queue", "queues", starts, runs),
            keyed_table("Queues: never admitted, given up, preempted", "queue", "queues",
                        fates, runs),
        )
    )  # fmt: skip
