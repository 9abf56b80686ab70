"""What happened to the jobs of each size class and of each queue: waits to admission and to
start, jobs never admitted or given up, and what preemption cost them. One pass over the jobs.

A group's entry (``summary.json``: ``by_size.<class>``, added to ``queues.<queue>``, and the
whole run's under ``jobs``)::

    {"jobs": n, "admitted": n, "never_admitted": n, "gave_up": n,
     "wait_s": {…},             # submit → last admission; never admitted: until the end
     "wait_to_start_s": {…},    # submit → every pod of the last admission running
     "preempted_jobs": n,       # jobs preempted at least once
     "preemptions": n,          # times its jobs were preempted
     "preempted_more_than_once": n,
     "max_preemptions_per_job": n,
     "gpu_hours_lost_to_preemption": x}   # GPUs × time run, of the runs preemptions ended

Size classes (:data:`simulate.results.SIZE_CLASSES`) are by the job's total GPUs: ``0``
(CPU-only), ``1``, ``2``, ``3-4``, ``5-8``, ``>8``; every class is present, a class without
jobs has zeros and ``null`` percentiles. ``large_jobs`` is the same entry for the jobs of 8
GPUs or more (whole-node jobs and gangs), which span the two largest classes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from simulate.metrics import percentiles
from simulate.results import SIZE_CLASSES, JobRecord

LARGE_GPUS = 8  # ``large_jobs``: a whole node of 8 GPUs and more, the jobs issue 28 measures


@dataclass(slots=True)
class Group:
    """The jobs of one size class or queue, added one at a time."""

    jobs: int = 0
    admitted: int = 0
    never_admitted: int = 0
    gave_up: int = 0
    waits: list[float] = field(default_factory=list)
    start_waits: list[float] = field(default_factory=list)
    preempted_jobs: int = 0
    preemptions: int = 0
    preempted_more_than_once: int = 0
    max_preemptions: int = 0
    lost_gpu_s: float = 0.0

    def add(self, job: JobRecord, end: float) -> None:
        self.jobs += 1
        if job.admitted is not None:
            self.admitted += 1
        elif job.state == "pending" and job.submitted <= end:
            self.never_admitted += 1
        if job.state == "gave_up":
            self.gave_up += 1
        if (wait := job.censored_wait(end)) is not None:
            self.waits.append(wait)
        if (start := job.censored_start_wait(end)) is not None:
            self.start_waits.append(start)
        if job.preemptions:
            self.preempted_jobs += 1
            self.preemptions += job.preemptions
            self.preempted_more_than_once += int(job.preemptions > 1)
            self.max_preemptions = max(self.max_preemptions, job.preemptions)
            self.lost_gpu_s += job.preempted_gpu_s

    def entry(self) -> dict[str, object]:
        return {
            "jobs": self.jobs,
            "admitted": self.admitted,
            "never_admitted": self.never_admitted,
            "gave_up": self.gave_up,
            "wait_s": percentiles(self.waits),
            "wait_to_start_s": percentiles(self.start_waits),
            "preempted_jobs": self.preempted_jobs,
            "preemptions": self.preemptions,
            "preempted_more_than_once": self.preempted_more_than_once,
            "max_preemptions_per_job": self.max_preemptions,
            "gpu_hours_lost_to_preemption": round(self.lost_gpu_s / 3600, 3),
        }


@dataclass(frozen=True, slots=True)
class Breakdown:
    by_size: dict[str, dict[str, object]]
    by_queue: dict[str, dict[str, object]]
    whole: dict[str, object]
    large: dict[str, object]  # jobs of LARGE_GPUS or more, across the classes


def breakdown(records: Iterable[JobRecord], end: float) -> Breakdown:
    """Every job once: into its size class, its queue and the whole run."""
    sizes = {name: Group() for name in SIZE_CLASSES}
    queues: dict[str, Group] = {}
    whole, large = Group(), Group()
    for job in records:
        sizes[job.size].add(job, end)
        queues.setdefault(job.queue, Group()).add(job, end)
        whole.add(job, end)
        if job.gpus >= LARGE_GPUS:
            large.add(job, end)
    return Breakdown(
        by_size={name: group.entry() for name, group in sizes.items()},
        by_queue={name: queues[name].entry() for name in sorted(queues)},
        whole=whole.entry(),
        large=large.entry(),
    )
