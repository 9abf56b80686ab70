"""One simulated member cluster: nodes, pods bound first-fit, jobs that run for a duration.

Live, mutable state with a small API (see ``engine.members``); no I/O, no clock: every call that
moves time takes ``now``. Everything is ordered (nodes in fleet-file order, jobs by submission,
pods by group and index), so the same calls give the same bindings.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from fractions import Fraction

from engine.fleet.frozen import FrozenDict
from engine.members.jobs import (
    EventType,
    JobSpec,
    JobState,
    MemberError,
    MemberEvent,
    Phase,
    Pod,
    pods_of,
)
from engine.members.spec import ClusterSpec
from engine.resources import Resources

FAILED_REASON = "FaultInjected"
SUCCEEDED_REASON = "Completed"


@dataclass(frozen=True, slots=True)
class NodeView:
    """One node as the status controller sees it: allocatable, and free after bound pods."""

    name: str
    allocatable: Resources
    free: Resources
    labels: FrozenDict[str, str]


class _Node:
    __slots__ = ("allocatable", "free", "labels", "name")

    def __init__(self, name: str, allocatable: Resources, labels: FrozenDict[str, str]) -> None:
        self.name, self.allocatable, self.labels = name, allocatable, labels
        self.free: dict[str, Fraction] = dict(allocatable)

    def fits(self, requests: Mapping[str, Fraction]) -> bool:
        free = self.free
        return all(free.get(k, 0) >= v for k, v in requests.items())

    def take(self, requests: Mapping[str, Fraction], sign: int = 1) -> None:
        for k, v in requests.items():
            self.free[k] -= sign * v


class _Job:
    __slots__ = (
        "binding",
        "finished_at",
        "message",
        "phase",
        "pods",
        "reason",
        "seq",
        "spec",
        "started_at",
        "submitted_at",
        "tried",
    )

    def __init__(self, spec: JobSpec, seq: int, now: dt.datetime) -> None:
        self.spec, self.seq, self.submitted_at = spec, seq, now
        self.pods: tuple[Pod, ...] = pods_of(spec)
        self.binding: dict[int, _Node] = {}  # pod index → node
        self.phase = Phase.PENDING
        self.started_at: dt.datetime | None = None
        self.finished_at: dt.datetime | None = None
        self.reason = self.message = ""
        self.tried = -1  # the capacity generation of the last binding attempt that fell short

    @property
    def active(self) -> bool:
        return self.phase in (Phase.PENDING, Phase.RUNNING)

    @property
    def ends_at(self) -> dt.datetime:
        """When a started job ends (``submitted_at`` stands in before it starts)."""
        return (self.started_at or self.submitted_at) + self.spec.duration

    def state(self) -> JobState:
        return JobState(
            key=self.spec.key,
            phase=self.phase,
            pods_bound=len(self.binding),
            pods_total=len(self.pods),
            submitted_at=self.submitted_at,
            started_at=self.started_at,
            finished_at=self.finished_at,
            reason=self.reason,
            message=self.message,
        )


class MemberCluster:
    """A member cluster's nodes and jobs (see the ``engine.members`` docstring for the API)."""

    def __init__(self, spec: ClusterSpec, now: dt.datetime | None = None) -> None:
        self.spec = spec
        self.name = spec.name
        self.ready = True
        self.ready_changed_at = now
        self._nodes: list[_Node] = [
            _Node(f"{spec.name}-{g}-{i}", group.allocatable, group.labels)
            for g, group in enumerate(spec.nodes)
            for i in range(group.count)
        ]
        self._jobs: dict[str, _Job] = {}
        self._seq = 0
        self._generation = 0  # bumped whenever capacity is freed

    # -- jobs ------------------------------------------------------------------------------

    def submit(self, job: JobSpec, now: dt.datetime) -> JobState:
        """Accept a job (its pods Pending until ``step`` binds them)."""
        if job.key in self._jobs:
            raise MemberError(f"job {job.key!r} is already on cluster {self.name}")
        self._seq += 1
        entry = _Job(job, self._seq, now)
        self._jobs[job.key] = entry
        return entry.state()

    def job_state(self, key: str) -> JobState | None:
        job = self._jobs.get(key)
        return job.state() if job else None

    def job_keys(self) -> tuple[str, ...]:
        """Every job on the member, in submission order (finished ones until removed)."""
        return tuple(self._jobs)

    def fail(self, key: str, now: dt.datetime, message: str = "") -> MemberEvent | None:
        """Fault injection: the job fails now and its pods are freed. None if already finished;
        MemberError if the member has no such job."""
        job = self._job(key)
        if not job.active:
            return None
        self._free(job)
        job.phase, job.finished_at = Phase.FAILED, now
        job.reason, job.message = FAILED_REASON, message or "failure injected"
        return MemberEvent(EventType.FAILED, self.name, key, now, job.reason, job.message)

    def remove(self, key: str) -> bool:
        """The job's Work is gone: its pods are freed and the job forgotten. False if absent."""
        job = self._jobs.pop(key, None)
        if job is None:
            return False
        self._free(job)
        return True

    def set_ready(self, ready: bool, now: dt.datetime | None = None) -> None:
        """Whether the member answers its API (the ``Ready`` condition). Jobs keep running
        either way, as they do on a real member the control plane cannot reach."""
        if ready != self.ready:
            self.ready, self.ready_changed_at = ready, now

    # -- time ------------------------------------------------------------------------------

    def step(self, now: dt.datetime) -> list[MemberEvent]:
        """Advance to ``now``: finish, bind, start; returns the transitions in order."""
        events: list[MemberEvent] = []
        # 1. finish the running jobs whose duration has passed, freeing their pods
        done = [j for j in self._jobs.values() if j.phase is Phase.RUNNING and j.ends_at <= now]
        for job in sorted(done, key=lambda j: (j.ends_at, j.seq)):
            self._free(job)
            job.phase, job.finished_at, job.reason = Phase.SUCCEEDED, job.ends_at, SUCCEEDED_REASON
            job.message = f"ran for {job.spec.duration}"
            events.append(
                MemberEvent(EventType.SUCCEEDED, self.name, job.spec.key, job.ends_at, job.reason)
            )
        # 2. bind what fits, oldest job first; 3. start the jobs with enough pods bound
        for job in list(self._jobs.values()):
            if job.active and len(job.binding) < len(job.pods) and job.tried != self._generation:
                self._bind(job)
            if job.phase is Phase.PENDING and len(job.binding) >= job.spec.needed:
                job.phase, job.started_at = Phase.RUNNING, now
                events.append(MemberEvent(EventType.STARTED, self.name, job.spec.key, now))
        return events

    def next_finish(self) -> dt.datetime | None:
        """When the next running job ends (for a discrete-event simulator), or None."""
        ends = [j.ends_at for j in self._jobs.values() if j.phase is Phase.RUNNING]
        return min(ends) if ends else None

    # -- what the status controller reads ---------------------------------------------------

    def nodes(self) -> tuple[NodeView, ...]:
        return tuple(
            NodeView(n.name, n.allocatable, Resources(n.free), n.labels) for n in self._nodes
        )

    def allocatable(self) -> Resources:
        return Resources.sum(n.allocatable for n in self._nodes)

    def allocated(self) -> Resources:
        """Requests of the bound pods (``pods`` counts them)."""
        return Resources.sum(
            {k: v - n.free[k] for k, v in n.allocatable.items()} for n in self._nodes
        )

    def allocating(self) -> Resources:
        """Requests of the pods not bound to a node yet (Karmada: pods without nodeName)."""
        return Resources.sum(p.requests for p in self._unbound())

    def bindings(self, key: str) -> dict[str, str]:
        """Pod name → node name of one job's bound pods."""
        job = self._job(key)
        return {job.pods[i].name: node.name for i, node in sorted(job.binding.items())}

    # -- internals ---------------------------------------------------------------------------

    def _job(self, key: str) -> _Job:
        job = self._jobs.get(key)
        if job is None:
            raise MemberError(f"no job {key!r} on cluster {self.name}")
        return job

    def _unbound(self) -> Iterator[Pod]:
        for job in self._jobs.values():
            if job.active:
                yield from (p for i, p in enumerate(job.pods) if i not in job.binding)

    def _bind(self, job: _Job) -> None:
        placed: list[tuple[int, _Node]] = []
        for i, pod in enumerate(job.pods):
            if i in job.binding:
                continue
            node = next((n for n in self._nodes if n.fits(pod.requests)), None)
            if node is not None:
                node.take(pod.requests)
                placed.append((i, node))
        gang_short = (
            job.spec.gang
            and job.phase is Phase.PENDING
            and len(job.binding) + len(placed) < job.spec.needed
        )
        if gang_short:  # all-or-nothing: give every trial placement back
            for i, node in placed:
                node.take(job.pods[i].requests, -1)
            placed = []
        job.binding.update(placed)
        if len(job.binding) < len(job.pods):
            job.tried = self._generation

    def _free(self, job: _Job) -> None:
        for i, node in job.binding.items():
            node.take(job.pods[i].requests, -1)
        if job.binding:
            self._generation += 1
        job.binding = {}
