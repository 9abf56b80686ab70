"""What a finished run reports: the summary (``simulate.results`` documents its shape), the
jobs never admitted, the per-stage waits of pipeline traces, the jobs by size and queue
(``simulate.breakdown``), and the fragmentation sample."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import TYPE_CHECKING, Protocol, cast

from engine.cycle import NEVER, Reason
from simulate.breakdown import breakdown
from simulate.metrics import fragmentation, percentiles, stages, waits
from simulate.results import GPU, JobRecord

if TYPE_CHECKING:
    from engine.members import Fleet
    from engine.policy.policyset import PolicySet
    from simulate.live import LiveJob, Options
    from simulate.metrics import Metrics
    from simulate.objects import ClusterReader


class Run(Protocol):
    """What the report reads of a run that has ended (``simulate.loop.Simulation``)."""

    options: Options
    policies: PolicySet
    members: Fleet
    readers: dict[str, ClusterReader]
    metrics: Metrics
    jobs: list[LiveJob]
    predecessors: dict[int, list[LiveJob]]
    cycles: int
    peak_pending: int
    preemptions: int
    failures: int
    lost_gpu_s: float


def fragmentation_now(waiting: Iterable[LiveJob], members: Fleet) -> dict[str, float]:
    """Per member, how fragmented its free room is for the shapes of the jobs ``waiting``."""
    shapes = {j.shape for j in waiting if j.gpus > 0}
    chosen = sorted(shapes, key=lambda s: (sum(p * g for p, g, _, _ in s), s))[:32]
    result = {}
    for member in members:
        if not chosen or not member.ready:
            result[member.name] = 0.0
            continue
        nodes = [
            [
                float(n.free.get_amount(GPU)),
                float(n.free.get_amount("cpu")),
                float(n.free.get_amount("memory")),
            ]
            for n in member.nodes()
        ]
        result[member.name] = fragmentation(nodes, chosen)
    return result


UNDECIDED = "Undecided"
"""The reason counted for a job that no cycle decided on (it arrived at the very end)."""


def never_admitted(sim: Run) -> dict[str, object]:
    """The jobs submitted and never admitted, still waiting at the end of the run: how many,
    the GPU-hours they asked for, how many per reason of their last decision, and how many of
    them were rejected ``NeverFits`` (a pod larger than any node; always present, 0 or more)."""
    never = [j for j in sim.jobs if j.state == "pending" and j.admissions == 0]
    reasons = Counter(str(j.reason) or UNDECIDED for j in never)
    return {
        "never_admitted": len(never),
        "never_admitted_gpu_hours": round(sum(j.gpus * j.trace.duration for j in never) / 3600, 3),
        "never_admitted_by_reason": dict(sorted(reasons.items())),
        "never_fits": reasons[Reason.NEVER_FITS.value],
    }


def stage_waits(sim: Run, records: list[JobRecord], end: float) -> dict[str, dict[str, object]]:
    """Per stage: the wait from submission (never admitted: to the end), and from the moment
    the job's dependencies were met (the last predecessor's end) to its admission."""
    found = stages(records, end)
    after: dict[str, list[float]] = {}
    for job in sim.jobs:
        if job.trace.stage and job.admitted_at is not None:
            ends = [p.finished_at or 0.0 for p in sim.predecessors[id(job)]]
            ready = max([job.trace.submit, *ends])
            after.setdefault(job.trace.stage, []).append(max(0.0, job.admitted_at - ready))
    for name, entry in found.items():
        entry["wait_after_dependencies_s"] = percentiles(after.get(name, []))
    return found


BY_JOB = (
    "preempted_jobs",
    "preempted_more_than_once",
    "max_preemptions_per_job",
    "gpu_hours_lost_to_preemption",
)
"""The whole run's preemption counts, beside ``jobs.preemptions`` (decisions applied)."""


def summarize(sim: Run, records: list[JobRecord], end: float, wall: float) -> dict[str, object]:
    groups = breakdown(records, end)
    whole = groups.whole
    count = {s: sum(1 for r in records if r.state == s) for s in
             ("succeeded", "failed", "gave_up", "pending", "running")}  # fmt: skip
    jobs = {
        "total": len(records),
        "finished": count["succeeded"] + count["failed"] + count["gave_up"],
        **count,
        "rejected": sum(1 for j in sim.jobs if j.state == "pending" and j.reason in NEVER),
        "not_submitted": sum(1 for j in sim.jobs if j.state == "future"),
        **never_admitted(sim),
        "peak_pending": sim.peak_pending,
        "rescheduled": sum(1 for j in sim.jobs if j.admissions > 1),
        "preemptions": sim.preemptions,
        "reclaimed_below_guarantee": sum(sim.metrics.below_guarantee.values()),
        "failures": sim.failures,
        "gpu_hours_lost": round(sim.lost_gpu_s / 3600, 3),
        "wait_s": percentiles(waits(records, end)),
        "wait_to_start_s": whole["wait_to_start_s"],
        **{k: whole[k] for k in BY_JOB},
        "completion_s": percentiles(
            [r.finished - r.submitted for r in records if r.state == "succeeded" and r.finished]
        ),
    }
    measured = sim.metrics.summary(records, end)
    for name, entry in cast(dict[str, dict[str, object]], measured["queues"]).items():
        entry.update({k: v for k, v in groups.by_queue[name].items() if k not in entry})
    clusters = measured["clusters"]
    gpus = {m.name: sim.readers[m.name].allocatable.get_amount(GPU) for m in sim.members}
    total = float(sum(gpus.values()))
    return {
        "label": sim.options.label,
        "policy_version": sim.policies.version,
        "seed": sim.options.seed,
        "until_s": end,
        "wall_s": round(wall, 3),
        "cycles": sim.cycles,
        "interval_s": sim.options.interval,
        "jobs": jobs,
        "gpu_utilisation_mean": round(
            sum(float(gpus[n]) * c["utilisation"].get(GPU, 0.0) for n, c in clusters.items())
            / total,
            6,
        )
        if total
        else None,
        "fragmentation_gpu_mean": round(
            sum(c["fragmentation_gpu_mean"] for c in clusters.values()), 3
        ),
        **measured,
        "by_size": groups.by_size,
        "large_jobs": groups.large,
        "stages": stage_waits(sim, records, end),
    }
