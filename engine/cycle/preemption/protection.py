"""Who may be preempted under ``spec.preemption``'s limits, and how much work a victim loses.

A job admitted less than ``minRuntime`` ago is not a victim (it has barely started: taking it
again and again wastes every start), nor one preempted ``maxPerJob`` times already (the count
is the binding's ``fleetgate.io/preemptions``). Among the victims a search may take, lower
priority goes first, then the job that loses the least work: its dominant share of the fleet
(its largest fraction of any resource the queues count) times how long it has been admitted.
Of two equal jobs the more recently admitted loses less, as before.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping

from engine import annotations as ann
from engine.cycle.jobs.model import AdmittedJob
from engine.policy.model import PreemptionLimits


def preemptions(job: AdmittedJob) -> int:
    """How many times the job was preempted (0 when not said or unreadable)."""
    raw = job.binding.annotations.get(ann.PREEMPTIONS, "")
    return int(raw) if raw.isdigit() else 0


def preemptible(
    jobs: Iterable[AdmittedJob], limits: PreemptionLimits, now: dt.datetime
) -> list[AdmittedJob]:
    """``jobs`` less those the limits protect."""
    most, runtime = limits.max_per_job, limits.min_runtime
    if most is None and runtime is None:
        return list(jobs)
    kept = []
    for job in jobs:
        if most is not None and preemptions(job) >= most:
            continue
        if runtime is not None and (now - job.admitted_at).total_seconds() < runtime:
            continue
        kept.append(job)
    return kept


def work_lost(job: AdmittedJob, now: dt.datetime, capacity: Mapping[str, int]) -> float:
    """The job's dominant share of ``capacity`` times the seconds since it was admitted."""
    return dominant_share(job, capacity) * max((now - job.admitted_at).total_seconds(), 0.0)


def dominant_share(job: AdmittedJob, capacity: Mapping[str, int]) -> float:
    """The job's largest fraction of any resource of ``capacity`` (pods aside)."""
    return max(
        (v / capacity[r] for r, v in job.demand.items() if capacity.get(r, 0) > 0 and r != "pods"),
        default=0.0,
    )
