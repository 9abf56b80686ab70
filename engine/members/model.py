"""One simulated member cluster: nodes, pods bound to the fullest node that fits them (as
kube-scheduler's ``MostAllocated`` scoring packs), jobs that run for a duration.

Live, mutable state with a small API (see ``engine.members``); no I/O, no clock: every call that
moves time takes ``now``. Everything is ordered (nodes in fleet-file order, jobs by submission,
pods by group and index), so the same calls give the same bindings.

Amounts are kept exact, as plain ints where whole (``Fraction(3) == 3``, with the same hash, and
int arithmetic is many times faster), Fractions otherwise. What the status controller reads is
kept up to date as pods bind and free: the free and unbound totals, each node's view and grade.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

from engine.fleet.frozen import FrozenDict
from engine.fleet.model import ResourceModel
from engine.members.grades import node_grade
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
from engine.resources import PODS, Resources

FAILED_REASON = "FaultInjected"
SUCCEEDED_REASON = "Completed"

Amount = int | Fraction
Needs = tuple[tuple[str, Amount], ...]  # a pod's requests, as ``_exact`` amounts


def _exact(value: Amount) -> Amount:
    """``value`` as an int when whole, else the Fraction (equal either way)."""
    return value.numerator if value.denominator == 1 else value


def _needs(requests: Mapping[str, Fraction]) -> Needs:
    return tuple((k, _exact(v)) for k, v in requests.items())


def _add(total: dict[str, Amount], needs: Needs, sign: int) -> None:
    for k, v in needs:
        left = total.get(k, 0) + v if sign > 0 else total.get(k, 0) - v
        total[k] = left if type(left) is int else _exact(left)


@dataclass(frozen=True, slots=True)
class NodeView:
    """One node as the status controller sees it: allocatable, and free after bound pods."""

    name: str
    allocatable: Resources
    free: Resources
    labels: FrozenDict[str, str]


class _Node:
    __slots__ = ("allocatable", "free", "grade", "labels", "name", "scale", "view")

    def __init__(self, name: str, allocatable: Resources, labels: FrozenDict[str, str]) -> None:
        self.name, self.allocatable, self.labels = name, allocatable, labels
        self.free: dict[str, Amount] = {k: _exact(v) for k, v in allocatable.items()}
        # 1 / allocatable per resource, for the MostAllocated score
        self.scale = {k: 1 / float(v) for k, v in allocatable.items() if v > 0}
        self.view: NodeView | None = None  # kept until ``free`` changes
        self.grade: tuple[Sequence[ResourceModel], int] | None = None  # (models, grade), idem

    def fits(self, needs: Needs) -> bool:
        free = self.free
        for k, v in needs:  # noqa: SIM110 (a loop: twice as fast as all() of a generator)
            if free.get(k, 0) < v:
                return False
        return True

    def take(self, needs: Needs, sign: int = 1) -> None:
        _add(self.free, needs, -sign)
        self.view = self.grade = None

    def node_view(self) -> NodeView:
        if self.view is None:
            self.view = NodeView(self.name, self.allocatable, Resources(self.free), self.labels)
        return self.view


class _Job:
    __slots__ = (
        "_pods",
        "binding",
        "count",
        "ends_at",
        "finished_at",
        "message",
        "needs",
        "phase",
        "reason",
        "seq",
        "spec",
        "started_at",
        "submitted_at",
        "tried",
    )

    def __init__(self, spec: JobSpec, seq: int, now: dt.datetime) -> None:
        self.spec, self.seq, self.submitted_at = spec, seq, now
        self._pods: tuple[Pod, ...] | None = None
        needs: list[Needs] = []  # per pod, in ``pods_of`` order; one value per group
        for group in spec.groups:
            requests = {k: _exact(v) for k, v in group.requests.items() if v}
            requests[PODS] = requests.get(PODS, 0) + 1  # as ``pods_of``: ``pods: 1`` more
            needs.extend([tuple(requests.items())] * group.replicas)
        self.needs: tuple[Needs, ...] = tuple(needs)
        self.count = len(needs)
        self.binding: dict[int, _Node] = {}  # pod index → node
        self.phase = Phase.PENDING
        self.started_at: dt.datetime | None = None
        self.finished_at: dt.datetime | None = None
        self.reason = self.message = ""
        self.tried = -1  # the capacity generation of the last binding attempt that fell short
        # when a started job ends (``submitted_at`` stands in before it starts)
        self.ends_at: dt.datetime = now + spec.duration

    @property
    def pods(self) -> tuple[Pod, ...]:
        if self._pods is None:
            self._pods = pods_of(self.spec)
        return self._pods

    @property
    def active(self) -> bool:
        return self.phase in (Phase.PENDING, Phase.RUNNING)

    def start(self, now: dt.datetime) -> None:
        self.phase, self.started_at, self.ends_at = Phase.RUNNING, now, now + self.spec.duration

    def state(self) -> JobState:
        return JobState(
            key=self.spec.key,
            phase=self.phase,
            pods_bound=len(self.binding),
            pods_total=self.count,
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
        # by submission too: the jobs ``step`` may bind or start (pending, or pods unbound)…
        self._waiting: dict[str, _Job] = {}
        self._running: dict[str, _Job] = {}  # … and those it may finish
        self._seq = 0
        self._generation = 0  # bumped whenever capacity is freed
        self._free_total: dict[str, Amount] = {}  # the nodes' free amounts, summed
        self._allocatable = Resources.sum(n.allocatable for n in self._nodes)
        for node in self._nodes:
            _add(self._free_total, _needs(node.allocatable), 1)
        self._unbound: dict[str, Amount] = {}  # requests of the active jobs' unbound pods
        self.changes = 0  # bumped whenever what ``allocated``/``allocating``/``nodes`` say moves
        # models → grade by a node's free amounts (``allocatable_modelings``)
        self._graded: tuple[Sequence[ResourceModel], dict[tuple[tuple[str, Amount], ...], int]]
        self._graded = ((), {})

    # -- jobs ------------------------------------------------------------------------------

    def submit(self, job: JobSpec, now: dt.datetime) -> JobState:
        """Accept a job (its pods Pending until ``step`` binds them)."""
        if job.key in self._jobs:
            raise MemberError(f"job {job.key!r} is already on cluster {self.name}")
        self._seq += 1
        entry = _Job(job, self._seq, now)
        self._jobs[job.key] = entry
        self._waiting[job.key] = entry
        for needs in entry.needs:
            _add(self._unbound, needs, 1)
        self.changes += 1
        return entry.state()

    def job_state(self, key: str) -> JobState | None:
        job = self._jobs.get(key)
        return job.state() if job else None

    def job_keys(self) -> tuple[str, ...]:
        """Every job on the member, in submission order (finished ones until removed)."""
        return tuple(self._jobs)

    def running_at(self, now: dt.datetime) -> tuple[str, ...]:
        """The jobs running at ``now``: started and not yet at their end (a job whose end has
        come is over, though no ``step`` has said so yet)."""
        return tuple(key for key, job in self._running.items() if job.ends_at > now)

    def fail(self, key: str, now: dt.datetime, message: str = "") -> MemberEvent | None:
        """Fault injection: the job fails now and its pods are freed. None if already finished;
        MemberError if the member has no such job."""
        job = self._job(key)
        if not job.active:
            return None
        self._retire(job)
        job.phase, job.finished_at = Phase.FAILED, now
        job.reason, job.message = FAILED_REASON, message or "failure injected"
        return MemberEvent(EventType.FAILED, self.name, key, now, job.reason, job.message)

    def remove(self, key: str) -> bool:
        """The job's Work is gone: its pods are freed and the job forgotten. False if absent."""
        job = self._jobs.pop(key, None)
        if job is None:
            return False
        self._retire(job)
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
        done = [j for j in self._running.values() if j.ends_at <= now]
        for job in sorted(done, key=lambda j: (j.ends_at, j.seq)):
            self._retire(job)
            job.phase, job.finished_at, job.reason = Phase.SUCCEEDED, job.ends_at, SUCCEEDED_REASON
            job.message = f"ran for {job.spec.duration}"
            events.append(
                MemberEvent(EventType.SUCCEEDED, self.name, job.spec.key, job.ends_at, job.reason)
            )
        # 2. bind what fits, oldest job first; 3. start the jobs with enough pods bound
        for job in list(self._waiting.values()):
            if len(job.binding) < job.count and job.tried != self._generation:
                self._bind(job)
            if job.phase is Phase.PENDING and len(job.binding) >= job.spec.needed:
                job.start(now)
                self._running[job.spec.key] = job
                events.append(MemberEvent(EventType.STARTED, self.name, job.spec.key, now))
            if job.phase is not Phase.PENDING and len(job.binding) >= job.count:
                del self._waiting[job.spec.key]
        return events

    def next_finish(self) -> dt.datetime | None:
        """When the next running job ends (for a discrete-event simulator), or None."""
        ends = [j.ends_at for j in self._running.values()]
        return min(ends) if ends else None

    # -- what the status controller reads ---------------------------------------------------

    def nodes(self) -> tuple[NodeView, ...]:
        return tuple(n.node_view() for n in self._nodes)

    def allocatable(self) -> Resources:
        return self._allocatable

    def allocated(self) -> Resources:
        """Requests of the bound pods (``pods`` counts them)."""
        free = self._free_total
        return Resources({k: v - free.get(k, 0) for k, v in self._allocatable.items()})

    def allocating(self) -> Resources:
        """Requests of the pods not bound to a node yet (Karmada: pods without nodeName)."""
        return Resources(self._unbound)

    def allocatable_modelings(self, models: Sequence[ResourceModel]) -> tuple[tuple[int, int], ...]:
        """``engine.members.grades.allocatable_modelings`` of the nodes' free amounts, for
        ``models`` sorted by grade; each node's grade is kept until its free amounts change
        (or another ``models`` object is asked for), and the grade of each set of free amounts
        met before remembered: nodes go back to the same few states."""
        counts = dict.fromkeys((m.grade for m in models), 0)
        if not models:
            return ()
        if self._graded[0] is not models or len(self._graded[1]) > 10_000:
            self._graded = (models, {})
        graded = self._graded[1]
        for node in self._nodes:
            kept = node.grade
            if kept is None or kept[0] is not models:
                free = tuple(node.free.items())
                grade = graded.get(free)
                if grade is None:
                    grade = graded[free] = node_grade(models, node.free)
                kept = node.grade = (models, grade)
            counts[kept[1]] += 1
        return tuple(counts.items())

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

    def _unbound_pods(self, job: _Job) -> Iterator[int]:
        return (i for i in range(job.count) if i not in job.binding)

    def _take(self, node: _Node, needs: Needs, sign: int) -> None:
        node.take(needs, sign)
        self.changes += 1
        _add(self._free_total, needs, -sign)
        _add(self._unbound, needs, -sign)

    def _bind(self, job: _Job) -> None:
        placed: list[tuple[int, _Node]] = []
        for i in self._unbound_pods(job):
            needs = job.needs[i]
            node = self._most_allocated(needs)
            if node is not None:
                self._take(node, needs, 1)
                placed.append((i, node))
        gang_short = (
            job.spec.gang
            and job.phase is Phase.PENDING
            and len(job.binding) + len(placed) < job.spec.needed
        )
        if gang_short:  # all-or-nothing: give every trial placement back
            for i, node in placed:
                self._take(node, job.needs[i], -1)
            placed = []
        job.binding.update(placed)
        if len(job.binding) < job.count:
            job.tried = self._generation

    def _most_allocated(self, needs: Needs) -> _Node | None:
        """The node a pod binds to, as kube-scheduler's NodeResourcesFit with the
        ``MostAllocated`` scoring strategy (what GPU clusters set to pack): of the nodes it
        fits, the one left with the least free of what it asks, each resource counted as a
        fraction of the node's allocatable; the first such node in order on a tie."""
        best: _Node | None = None
        best_left = 0.0
        asked = [(k, float(v)) for k, v in needs if v and k != PODS]
        for node in self._nodes:
            if not node.fits(needs):
                continue
            if not asked:
                return node
            free, scale = node.free, node.scale
            left = 0.0
            for k, v in asked:
                left += (float(free.get(k, 0)) - v) * scale.get(k, 0.0)
            if best is None or left < best_left:
                best, best_left = node, left
        return best

    def _retire(self, job: _Job) -> None:
        """The job stops holding anything: its unbound pods no longer wait (if it was
        active), its bound pods are freed."""
        self._waiting.pop(job.spec.key, None)
        self._running.pop(job.spec.key, None)
        self.changes += 1
        if job.active:
            for i in self._unbound_pods(job):
                _add(self._unbound, job.needs[i], -1)
        for i, node in job.binding.items():
            node.take(job.needs[i], -1)
            _add(self._free_total, job.needs[i], 1)
        if job.binding:
            self._generation += 1
        job.binding = {}
