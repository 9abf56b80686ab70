"""What one simulated run produces: the contract between the simulation and the report.

A run (one policy set, or the built-in baseline) gives a :class:`RunResult`; ``--compare`` gives
two. :mod:`simulate.report` writes them out (``summary.json``, ``jobs.csv``, PNG plots,
``report.html``); nothing here does I/O.

Times are seconds since the start of the simulation (the first submit time of the trace).
Resources are named as in Kubernetes (``cpu`` in cores, ``memory`` in bytes, ``nvidia.com/gpu``
in devices); ``GPU`` below means the fleet's accelerator resource, :data:`GPU`.

``summary`` (JSON-ready, written as ``summary.json``; one object per run)::

    {
      "label": "head",                      # "head", the --compare side's name, or "baseline"
      "policy_version": "…", "seed": 1, "until_s": 604800.0, "wall_s": 12.3,
      "jobs": {"total": N, "finished": n, "succeeded": n, "failed": n, "gave_up": n,
               "pending": n, "running": n, "rescheduled": n, "preemptions": n,
               "gpu_hours_lost": x,
               "never_admitted": n,            # submitted, never admitted, waiting at the end
               "never_admitted_gpu_hours": x,  # GPUs × duration those jobs asked for
               "never_admitted_by_reason": {"NeverFits": n, …},  # their last decision's reason
               "never_fits": n,                # of those, rejected NeverFits
               "wait_s": {…}, "completion_s": {…},
               "wait_to_start_s": {…},         # submit → every pod of the last admission runs
               "preempted_jobs": n, "preempted_more_than_once": n,
               "max_preemptions_per_job": n, "gpu_hours_lost_to_preemption": x},
      "queues": {"q": {"tenant": "t", "weight": 1.0, "guarantee": {"nvidia.com/gpu": 8.0},
                       "jobs": n, "admitted": n,
                       "wait_s": {"p50": x, "p95": x, "p99": x, "max": x},
                       "completion_s": {"p50": x, "p95": x, "p99": x, "max": x},
                       "share_mean": x,                # mean share of the fleet's GPU while busy
                       "attainment_mean": x,           # mean fair-share attainment (windows)
                       "never_admitted": n, "gave_up": n, "wait_to_start_s": {…},
                       "preempted_jobs": n, "preemptions": n, "preempted_more_than_once": n,
                       "max_preemptions_per_job": n, "gpu_hours_lost_to_preemption": x}},
      "by_size": {"0" | "1" | "2" | "3-4" | "5-8" | ">8": {"jobs": n, "admitted": n,
                  "never_admitted": n, "gave_up": n, "wait_s": {…}, "wait_to_start_s": {…},
                  "preempted_jobs": n, …}},          # as a queue's (simulate.breakdown)
      "tenants": {"t": {"jobs": n, "admitted": n, "wait_s": {…}, "share_mean": x}},
      "clusters": {"c": {"utilisation": {"nvidia.com/gpu": x, "cpu": x},   # time-weighted mean
                         "fragmentation_gpu_mean": x}},
      "fairness": {"window_s": 3600.0, "jain_mean": x, "jain_min": x,
                   "attainment_mean": x, "attainment_min": x},   # simulate.fairshare
      "gpu_utilisation_arrival_span": x, "arrival_span_s": x,   # first to last submit
      "stages": {"stage": {"jobs": n, "wait_s": {…}}}  # pipeline stages (label or annotation)
    }

Percentiles of an empty set are ``null``. Every ``wait_s`` (jobs, queues, tenants, stages) counts
a job never admitted by the end of the run as waiting ``until_s − submit`` (censored: a lower
bound of its wait), so jobs that never start cannot drop out of the percentiles; every
``wait_to_start_s`` counts a job not running at the end until ``until_s`` the same way.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

GPU = "nvidia.com/gpu"
SIZE_CLASSES = ("0", "1", "2", "3-4", "5-8", ">8")
"""Job size classes by the job's total GPUs, smallest first: CPU-only, 1, 2, 3–4, 5–8, more."""


def size_class(gpus: float) -> str:
    """The class of :data:`SIZE_CLASSES` that holds a job of ``gpus`` GPUs in total."""
    if gpus <= 0:
        return "0"
    for bound, name in ((1, "1"), (2, "2"), (4, "3-4"), (8, "5-8")):
        if gpus <= bound:
            return name
    return ">8"


@dataclass(slots=True)
class Series:
    """Values sampled over simulated time; every list is as long as ``times``."""

    times: list[float] = field(default_factory=list)
    cluster_utilisation: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    """cluster → resource → fraction of allocatable in use, 0..1."""
    cluster_fragmentation: dict[str, list[float]] = field(default_factory=dict)
    """cluster → GPUs free but unusable by any waiting job (node shape, gang)."""
    queue_usage: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    """queue → resource → amount admitted and not finished (devices, cores, bytes)."""
    queue_guarantee: dict[str, dict[str, float]] = field(default_factory=dict)
    """queue → resource → its guarantee (constant over a run)."""
    fairness: list[float | None] = field(default_factory=list)
    """Jain's index of the busy queues' weighted GPU shares over the window ending at each
    time; None when fewer than two queues wanted GPUs in that window."""


@dataclass(slots=True)
class JobRecord:
    """One job of the trace, as the run ended it (a row of ``jobs.csv``)."""

    name: str
    queue: str
    tenant: str
    kind: str
    submitted: float
    admitted: float | None  # the last admission (after requeues)
    finished: float | None
    state: str  # "succeeded" | "failed" | "gave_up" | "pending" | "running"
    cluster: str | None
    gpus: float
    attempts: int = 0  # admissions that ended in a requeue (failure, preemption)
    preemptions: int = 0
    stage: str | None = None
    reason: str | None = None  # of the last decision, for a job waiting at the end
    started: float | None = None
    """When every pod of its last admission ran (the member started it on every cluster);
    None when that admission has not started, or when the job waits again after a requeue."""
    preempted_gpu_s: float = 0.0  # GPU-seconds its pods had run when preemptions evicted them
    held: float = 0.0
    """Seconds its earlier admissions ran (from every pod running until a preemption or a
    failure requeued it): not counted as waiting."""

    @property
    def wait(self) -> float | None:
        return None if self.admitted is None else self.admitted - self.submitted - self.held

    @property
    def size(self) -> str:
        """The job's size class by its total GPUs: :data:`SIZE_CLASSES`."""
        return size_class(self.gpus)

    def censored_start_wait(self, end: float) -> float | None:
        """Submit to start; a job not running at ``end`` (never admitted, waiting again after a
        requeue, admitted but its pods not all running) counts until ``end``, and one given up
        before its last admission started, until it was given up. Never less than
        :meth:`censored_wait`. None for a job not submitted by ``end``."""
        if self.started is not None:
            return self.started - self.submitted - self.held
        if self.state == "gave_up" and self.finished is not None:
            return self.finished - self.submitted - self.held
        return end - self.submitted - self.held if self.submitted <= end else None

    def censored_wait(self, end: float) -> float | None:
        """The wait, or ``end − submit`` for a job submitted by ``end`` and never admitted
        (a lower bound of its wait); None for a job not submitted by ``end``."""
        if self.admitted is not None:
            return self.admitted - self.submitted - self.held
        return end - self.submitted - self.held if self.submitted <= end else None


@dataclass(slots=True)
class RunResult:
    label: str
    summary: dict[str, Any]
    series: Series
    jobs: list[JobRecord]
