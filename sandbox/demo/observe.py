"""What the demo sees: each job's state read from its ResourceBinding, cluster usage from the
Cluster objects, queue usage from the reconciler's latest cycle; sampled over simulated time.

A job's state comes from the API only, as ``kubectl get resourcebindings`` shows it: finished
(a terminal status aggregated from its member), running (``spec.clusters`` set), pending (the
reconciler's ``fleetgate.io/pending`` annotation: reason and message), held (the webhook
suspended it and no decision is written yet), or not yet bound (no binding exists).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from engine import annotations as ann
from engine.cycle import CycleResult, QueueReport
from engine.fleet.bindings import FAILED, SUCCEEDED, TERMINAL_CONDITIONS, job_outcome
from engine.quantity import parse_quantity
from sandbox.demo.jobs import PlannedJob

SUCCEEDED_STATE, FAILED_STATE = SUCCEEDED.lower(), FAILED.lower()
FINISHED = frozenset({SUCCEEDED_STATE, FAILED_STATE})
PREEMPTED = "FleetgatePreempted"  # the reason of Scheduled=False the reconciler writes
HEADLINE_RESOURCES = ("nvidia.com/gpu", "kubernetes.io/batch-cpu", "cpu")


@dataclass(frozen=True, slots=True)
class JobState:
    state: str  # unbound | held | pending | running | succeeded | failed | refused
    clusters: tuple[str, ...] = ()
    reason: str = ""
    message: str = ""
    attempts: int = 0
    finished_at: dt.datetime | None = None  # as the member's job status says, when it says
    preempted: bool = False  # taken off its clusters by a preemption (status Scheduled=False)


def job_state(binding: Mapping[str, Any]) -> JobState:
    """The state of a job as its binding shows it."""
    meta = binding.get("metadata") or {}
    notes = meta.get("annotations") or {}
    clusters = tuple(str(c.get("name")) for c in (binding.get("spec") or {}).get("clusters") or [])
    aggregated = (binding.get("status") or {}).get("aggregatedStatus") or []
    outcomes = {
        str(item.get("clusterName")): job_outcome(item.get("status")) for item in aggregated
    }
    attempts = _int(notes.get(ann.ATTEMPTS))
    pending = str(notes.get(ann.PENDING) or "")
    if clusters and all(outcomes.get(c) for c in clusters):
        ended = FAILED if FAILED in (outcomes[c] for c in clusters) else SUCCEEDED
        times = [
            when
            for item in aggregated
            if str(item.get("clusterName")) in clusters
            and (when := end_time(item.get("status"))) is not None
        ]
        return JobState(
            ended.lower(), clusters, attempts=attempts, finished_at=max(times, default=None)
        )
    if clusters:
        return JobState("running", clusters, attempts=attempts)
    if pending:
        reason, _, message = pending.partition(": ")
        preempted = any(
            c.get("type") == "Scheduled" and c.get("reason") == PREEMPTED
            for c in (binding.get("status") or {}).get("conditions") or []
        )
        return JobState("pending", (), reason, message, attempts, preempted=preempted)
    if SUCCEEDED in outcomes.values():
        return JobState(SUCCEEDED_STATE, (), attempts=attempts)
    return JobState("held", attempts=attempts)


def end_time(status: Any) -> dt.datetime | None:
    """When a member's job ended, by its kind's fields (``completionTime``: Kubeflow, batch/v1;
    ``terminationTime``: Spark; ``endTime``: Ray; ``state.lastTransitionTime``: Volcano; else
    the terminal condition's ``lastTransitionTime``)."""
    if not isinstance(status, Mapping):
        return None
    state = status.get("state")
    found = [
        status.get("completionTime"),
        status.get("terminationTime"),
        status.get("endTime"),
        state.get("lastTransitionTime") if isinstance(state, Mapping) else None,
        *(
            c.get("lastTransitionTime")
            for c in status.get("conditions") or []
            if isinstance(c, Mapping) and c.get("type") in TERMINAL_CONDITIONS
        ),
    ]
    times = [when for text in found if text and (when := ann.parse_time(str(text)))]
    return max(times, default=None)


@dataclass(slots=True)
class Tracker:
    """Everything sampled over the run, for the live view and the summary."""

    jobs: Sequence[PlannedJob]
    submitted: dict[str, dt.datetime] = field(default_factory=dict)  # binding → when
    refused: dict[str, str] = field(default_factory=dict)  # binding → the API's answer
    states: dict[str, JobState] = field(default_factory=dict)
    admitted_at: dict[str, dt.datetime] = field(default_factory=dict)  # first admission
    placements: dict[str, list[tuple[dt.datetime, str]]] = field(default_factory=dict)
    reasons_seen: dict[str, int] = field(default_factory=dict)  # reason → jobs that had it
    capacity: dict[str, Fraction] = field(default_factory=dict)  # the fleet's allocatable
    clusters: dict[str, dict[str, Any]] = field(default_factory=dict)  # name → last sample
    busy: dict[str, float] = field(default_factory=dict)  # cluster → ∫ utilisation dt
    share: dict[str, float] = field(default_factory=dict)  # queue → ∫ dominant share dt
    sampled_seconds: float = 0.0
    last_sample: dt.datetime | None = None
    queues: tuple[QueueReport, ...] = ()
    _reasons_by_job: dict[str, set[str]] = field(default_factory=dict)
    preempted: set[str] = field(default_factory=set)  # bindings ever seen preempted
    by_binding: dict[str, PlannedJob] = field(init=False)

    def __post_init__(self) -> None:
        self.by_binding = {job.binding: job for job in self.jobs}

    def observe(
        self,
        now: dt.datetime,
        bindings: Iterable[Mapping[str, Any]],
        clusters: Iterable[Mapping[str, Any]],
        cycle: CycleResult | None,
    ) -> None:
        for binding in bindings:
            meta = binding.get("metadata") or {}
            ref = f"{meta.get('namespace')}/{meta.get('name')}"
            if ref not in self.by_binding:
                continue
            state = job_state(binding)
            self.states[ref] = state
            if state.clusters:
                self._placed(ref, state, binding, now)
            elif self.placements.get(ref, [(now, "")])[-1][1]:
                self.placements[ref].append((now, ""))  # taken off its clusters
            if state.reason:
                self._reasons_by_job.setdefault(ref, set()).add(state.reason)
            if state.preempted:
                self.preempted.add(ref)
        self.reasons_seen = {}
        for reasons in self._reasons_by_job.values():
            for reason in reasons:
                self.reasons_seen[reason] = self.reasons_seen.get(reason, 0) + 1
        elapsed = (now - self.last_sample).total_seconds() if self.last_sample else 0.0
        self.last_sample = now
        self._sample_clusters(clusters, elapsed)
        if cycle is not None:
            self.queues = cycle.queues
            self._sample_queues(cycle.queues, elapsed)
        self.sampled_seconds += elapsed

    def _placed(
        self, ref: str, state: JobState, binding: Mapping[str, Any], now: dt.datetime
    ) -> None:
        notes = (binding.get("metadata") or {}).get("annotations") or {}
        when = ann.parse_time(str(notes.get(ann.ADMITTED_AT) or "")) or now
        self.admitted_at.setdefault(ref, when)
        placed = ",".join(state.clusters)
        history = self.placements.setdefault(ref, [])
        if not history or history[-1][1] != placed:
            history.append((now, placed))  # when the demo saw it: a re-admission may keep
            # the first admission's annotation

    def _sample_clusters(self, clusters: Iterable[Mapping[str, Any]], elapsed: float) -> None:
        capacity: dict[str, Fraction] = {}
        for cluster in clusters:
            name = str((cluster.get("metadata") or {}).get("name"))
            status = cluster.get("status") or {}
            summary = status.get("resourceSummary") or {}
            allocatable = _amounts(summary.get("allocatable"))
            allocated = _amounts(summary.get("allocated"))
            for resource, amount in allocatable.items():
                capacity[resource] = capacity.get(resource, Fraction(0)) + amount
            resource = next((r for r in HEADLINE_RESOURCES if allocatable.get(r)), "")
            used = allocated.get(resource, Fraction(0))
            total = allocatable.get(resource, Fraction(0))
            ready = next(
                (
                    str(c.get("status"))
                    for c in status.get("conditions") or []
                    if c.get("type") == "Ready"
                ),
                "Unknown",
            )
            utilisation = float(used / total) if total else 0.0
            self.clusters[name] = {
                "resource": resource,
                "used": used,
                "total": total,
                "ready": ready,
                "utilisation": utilisation,
            }
            self.busy[name] = self.busy.get(name, 0.0) + utilisation * elapsed
        self.capacity = capacity

    def _sample_queues(self, queues: Sequence[QueueReport], elapsed: float) -> None:
        for queue in queues:
            self.share[queue.name] = self.share.get(queue.name, 0.0) + elapsed * dominant_share(
                queue.usage, self.capacity
            )

    # -- reading ------------------------------------------------------------------------------

    def state(self, job: PlannedJob) -> JobState:
        if job.binding in self.refused:
            return JobState("refused", message=self.refused[job.binding])
        return self.states.get(job.binding, JobState("unbound"))

    def counts(self) -> dict[str, int]:
        found: dict[str, int] = {}
        for job in self.jobs:
            if job.binding in self.submitted or job.binding in self.refused:
                state = self.state(job).state
                found[state] = found.get(state, 0) + 1
        return found

    def finished(self) -> int:
        return sum(1 for job in self.jobs if self.state(job).state in FINISHED)

    def wait_seconds(self, job: PlannedJob) -> float | None:
        admitted, submitted = self.admitted_at.get(job.binding), self.submitted.get(job.binding)
        if admitted is None or submitted is None:
            return None
        return max(0.0, (admitted - submitted).total_seconds())

    def utilisation(self, cluster: str) -> float:
        return self.busy.get(cluster, 0.0) / self.sampled_seconds if self.sampled_seconds else 0.0

    def mean_share(self, queue: str) -> float:
        return self.share.get(queue, 0.0) / self.sampled_seconds if self.sampled_seconds else 0.0


def dominant_share(usage: Mapping[str, int], capacity: Mapping[str, Fraction]) -> float:
    """The largest fraction of the fleet's capacity of any resource that ``usage`` (milli-units)
    holds."""
    shares = [
        float(Fraction(milli, 1000) / capacity[resource])
        for resource, milli in usage.items()
        if capacity.get(resource)
    ]
    return max(shares, default=0.0)


def _amounts(raw: Any) -> dict[str, Fraction]:
    found = {}
    for name, value in (raw or {}).items():
        try:
            found[str(name)] = parse_quantity(value)
        except ValueError:
            continue
    return found


def _int(text: Any) -> int:
    try:
        return int(str(text))
    except ValueError:
        return 0
