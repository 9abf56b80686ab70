"""The values a cycle returns: one Decision per pending job and per victim, a report per queue,
a record per managed job it read."""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, NamedTuple

from engine import vectors
from engine.annotations import format_time
from engine.cycle.reasons import Action, Reason


@dataclass(frozen=True, slots=True)
class ClusterAssignment:
    name: str
    replicas: int  # pods placed on the cluster (the whole gang for a one-cluster job)


class GroupState(NamedTuple):
    """The co-admission group a member belongs to, as the cycle left it (``cycle/groups.py``)."""

    name: str  # HyperJob/namespace/name or group/namespace/name
    size: int  # members it must have
    min: int  # members that must be admitted at once
    present: int  # members whose bindings exist
    state: str  # Waiting, Invalid, Admitted, Running, Pending (considered, did not fit)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "size": self.size,
            "min": self.min,
            "present": self.present,
            "state": self.state,
        }


class Decision(NamedTuple):
    """What the cycle decided for one job, and why. A named tuple: immutable, and built
    several times faster than a frozen dataclass (a cycle makes one per pending job)."""

    binding: str  # namespace/name of the ResourceBinding (name alone when cluster-scoped)
    workload: str  # Kind/namespace/name of the job template
    queue: str
    tenant: str
    priority: int
    action: Action
    reason: Reason
    message: str
    clusters: tuple[ClusterAssignment, ...] = ()
    position: int | None = None  # 1-based place among its queue's pending jobs
    # (cluster, why it was not chosen); for a placed job, a score that failed there (as 0)
    cluster_reasons: tuple[tuple[str, str], ...] = ()
    victims: tuple[str, ...] = ()  # bindings a Preempting job waits for
    preemptor: str = ""  # the binding a Preempt decision makes room for
    group: GroupState | None = None  # for a member of a co-admission group
    # the message without live numbers, where the cycle has one (explain.pending_note)
    note: str = ""

    def with_position(self, position: int) -> Decision:
        """This decision with ``position`` (``_replace``, without its keyword handling)."""
        return Decision(*self[:9], position, *self[10:])

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "binding": self.binding,
            "workload": self.workload,
            "queue": self.queue,
            "tenant": self.tenant,
            "priority": self.priority,
            "action": str(self.action),
            "clusters": [{"name": c.name, "replicas": c.replicas} for c in self.clusters],
            "reason": str(self.reason),
            "message": self.message,
            "position": self.position,
            "clusterReasons": dict(self.cluster_reasons),
        }
        if self.victims:
            out["victims"] = list(self.victims)
        if self.preemptor:
            out["preemptor"] = self.preemptor
        if self.group is not None:
            out["group"] = self.group.to_json()
        return out


@dataclass(frozen=True, slots=True)
class QueueReport:
    name: str
    parent: str
    usage: vectors.Vec  # after this cycle's admissions, the queue's whole subtree
    guarantee: vectors.Vec
    max: vectors.Vec
    share: float  # weighted dominant share of borrowed resources after the cycle
    admitted: int  # jobs running or admitted in the subtree after the cycle
    pending: int  # jobs still waiting in the subtree after the cycle

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "parent": self.parent or None,
            "usage": vectors.to_json(self.usage),
            "guarantee": vectors.to_json(self.guarantee),
            "max": vectors.to_json(self.max),
            "share": round(self.share, 6),
            "admitted": self.admitted,
            "pending": self.pending,
        }


class JobState(StrEnum):
    PENDING = "Pending"
    """Waiting for admission (this cycle decided it)."""
    ADMITTED = "Admitted"
    """Placed: it holds quota and capacity where it runs."""
    BACKOFF = "Backoff"
    """Requeued after a failure, waiting out its backoff."""
    FINISHED = "Finished"
    """Placed, and every cluster reports it finished: it holds nothing."""


@dataclass(frozen=True, slots=True)
class JobRecord:
    """One managed job as the cycle read it."""

    binding: str  # namespace/name of the ResourceBinding
    workload: str  # Kind/namespace/name of the template
    state: JobState
    queue: str  # "" when its mapping failed or its PriorityClass is unknown
    tenant: str
    priority: int
    group: str | None  # the label of its co-admission group, if it is in one
    # an admitted member: its group, Running; a pending one: as the cycle left it
    group_state: GroupState | None = None
    clusters: tuple[ClusterAssignment, ...] = ()  # where it runs (its pods there)
    demand: vectors.Vec = field(default_factory=dict)  # milli-units; admitted: what it holds
    queued_at: dt.datetime | None = None  # fleetgate.io/queued-at, else the binding's creation
    admitted_at: dt.datetime | None = None
    in_flight: frozenset[str] = frozenset()  # clusters whose status does not show it yet
    running_since: dt.datetime | None = None  # fleetgate.io/running-since: it runs everywhere
    pods: int = 0  # its gang's pods: pending, what it asks; admitted, what was placed
    # a pending job's dependencies as read: "condition Kind/namespace/name" (pipelines.md)
    after: tuple[str, ...] = ()


class JobTable(Mapping[str, JobRecord]):
    """binding ref → :class:`JobRecord`, in binding order; built on first use (once, whichever
    thread asks first: the reconciler's result is read by its API's threads too)."""

    def __init__(self, build: Callable[[], dict[str, JobRecord]] | None = None) -> None:
        self._build = build
        self._records: dict[str, JobRecord] | None = None if build is not None else {}
        self._lock = threading.Lock()

    def _all(self) -> dict[str, JobRecord]:
        records = self._records
        if records is None:
            with self._lock:
                if self._records is None and self._build is not None:
                    built = self._build()
                    self._records = {ref: built[ref] for ref in sorted(built)}
                    self._build = None
                records = self._records
        assert records is not None
        return records

    def __getitem__(self, ref: str) -> JobRecord:
        return self._all()[ref]

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())

    def in_state(self, state: JobState) -> list[JobRecord]:
        return [r for r in self._all().values() if r.state == state]


@dataclass(frozen=True, slots=True)
class CycleResult:
    policy_version: str
    now: dt.datetime
    decisions: tuple[Decision, ...]  # in the order the cycle made them
    queues: tuple[QueueReport, ...]  # sorted by name
    stats: dict[str, int] = field(default_factory=dict)
    # every managed job the cycle read, decided or not (``engine.cycle.jobs.records``)
    jobs: JobTable = field(default_factory=JobTable, compare=False, repr=False)

    def decision(self, binding: str) -> Decision | None:
        return next((d for d in self.decisions if d.binding == binding), None)

    def to_json(self) -> dict[str, Any]:
        return {
            "policyVersion": self.policy_version,
            "now": format_time(self.now),
            "decisions": [d.to_json() for d in self.decisions],
            "queues": [q.to_json() for q in self.queues],
        }
