"""What one cycle keeps for the next: per-job results, bounded (see ``JobCache``).

``jobs.read_job`` reads bindings through it; placement keeps its memo in it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Collection, Mapping
from typing import Any, Generic, TypeVar

from engine.cycle.jobs.model import AdmittedJob, Mapped, MappingEvaluators, PendingJob
from engine.cycle.quota.held import HeldSums
from engine.fleet.frozen import FrozenDict
from engine.fleet.model import BindingView, ObjectKey, PriorityClassView, Snapshot
from engine.policy.policyset import PolicySet
from engine.workloads.model import Workload

T = TypeVar("T")


class JobCache:
    """Per-job results kept between cycles, bounded.

    Mapping results are keyed by binding uid, generation and policy version. Pending jobs are
    kept per binding and PriorityClass value, and used while the binding and workload are the
    very (immutable) objects they were built from. Pending jobs, evaluators and placement
    state are kept for the latest policy version only.

    Admitted jobs are kept the same way, with the ``now`` they were read at (``admitted``).

    A warm cycle reads most pending jobs through ``kept``: while the job's own template in the
    snapshot's workloads, and the snapshot's PriorityClasses, are the very objects it was last
    read from, nothing it depends on changed (unless its binding has a backoff time, which is
    compared with ``now``).

    Between cycles it also keeps what the cycle derives from unchanged inputs: each cluster's
    state while its view is the very object (``placement.states.cluster_states``), the
    admitted jobs' demand summed per queue (``quota.held``) and what preemption knows of each
    admitted job (``preemption.candidates``). Each gives what building it anew gives.
    """

    def __init__(self, max_entries: int = 500_000) -> None:
        self._entries: dict[tuple[Any, ...], Mapped] = {}
        self.max_entries = max_entries
        self._evaluators: dict[str, MappingEvaluators] = {}
        # id(binding) → the job and its PriorityClass value, for policy ``_pending_version``;
        # the job holds its binding (so the id is not reused) and workload, which must be the
        # very objects of the cycle
        self._pending: dict[int, PendingJob] = {}
        self._values: dict[int, int] = {}
        # the jobs ``kept`` returns: read from the templates and PriorityClasses they are
        # filed under, no backoff
        self._quick: _KeptByTemplate[PendingJob] = _KeptByTemplate()
        self._pending_version: str | None = None
        self._priorities: tuple[tuple[PriorityClassView, ...], dict[str | None, int | None]] = (
            (),
            {},
        )
        self._placement: dict[str, Any] = {}
        # id(binding) → (admitted job, its workload, policy version, PriorityClass value, now)
        self._admitted: dict[int, tuple[AdmittedJob, Workload, str, int, dt.datetime]] = {}
        self._admitted_version: str | None = None
        # the admitted jobs ``quick_admitted`` returns: no cluster in flight, read from the
        # templates and PriorityClasses they are filed under, at a ``now`` no later than
        # ``_held_at``
        self._held: _KeptByTemplate[AdmittedJob] = _KeptByTemplate()
        self._held_at: dt.datetime | None = None
        self._first_seen: dict[str, dt.datetime] = {}  # binding uid (or ref) → first cycle time
        # cluster → its view, estimates and state (``placement.states.cluster_states``)
        self.cluster_states: dict[str, Any] = {}
        self.held = HeldSums()  # what the admitted jobs hold, per queue
        # ``preemption.candidates.Candidates``, made by the first cycle that preempts
        self.candidates: Any = None

    def evaluators(self, policies: PolicySet) -> MappingEvaluators:
        """The mapping's evaluators for ``policies``, kept for the latest version (their memos
        are kept with them)."""
        found = self._evaluators.get(policies.version)
        if found is None:
            found = MappingEvaluators.of(policies.scheduling)
            self._evaluators = {policies.version: found}
        return found

    def get(self, key: tuple[Any, ...]) -> Mapped | None:
        return self._entries.get(key)

    def put(self, key: tuple[Any, ...], value: Mapped) -> None:
        if len(self._entries) >= self.max_entries:
            self._entries.clear()
        self._entries[key] = value

    def pending(
        self, binding: BindingView, workload: Workload, version: str, priority_value: int
    ) -> PendingJob | None:
        """The pending job kept for exactly these objects and values, if any."""
        if version != self._pending_version:
            return None
        job = self._pending.get(id(binding))
        if job is None or job.binding is not binding or job.workload is not workload:
            return None
        return job if self._values[id(binding)] == priority_value else None

    def kept(self, snapshot: Snapshot, version: str, binding: BindingView) -> PendingJob | None:
        """What ``read_job`` returns for ``binding``, if it is a job kept from the very
        template ``snapshot`` has for it and ``snapshot``'s PriorityClasses, without a backoff
        time."""
        job = self.quick(snapshot, version).get(id(binding))
        return job if job is not None and job.binding is binding else None

    def quick(self, snapshot: Snapshot, version: str) -> Mapping[int, PendingJob]:
        """id(binding) → the jobs ``kept`` may return for ``snapshot`` (check the binding)."""
        if version != self._pending_version:
            return {}
        return self._quick.of(snapshot)

    def keep_pending(
        self, job: PendingJob, version: str, priority_value: int, snapshot: Snapshot | None = None
    ) -> None:
        """Keep ``job``, read from ``snapshot``: pass it only when the job depends on nothing
        but the binding, the policies, the workloads and the PriorityClasses (not ``now``)."""
        if version != self._pending_version or len(self._pending) >= self.max_entries:
            self._pending, self._values, self._quick = {}, {}, _KeptByTemplate()
            self._pending_version = version
        key = id(job.binding)
        self._pending[key] = job
        self._values[key] = priority_value
        if snapshot is None:
            self._quick.drop(job)
            return
        self._quick.put(job, snapshot)

    def admitted(
        self,
        binding: BindingView,
        workload: Workload,
        version: str,
        priority_value: int,
        now: dt.datetime,
    ) -> AdmittedJob | None:
        """The admitted job kept for exactly these objects and values, if ``now`` cannot have
        changed it: the same ``now``, or a later one when no cluster was still in flight (a
        reservation only ends, by the job showing up or by its TTL)."""
        kept = self._admitted.get(id(binding))
        if kept is None:
            return None
        job, kept_workload, kept_version, kept_value, kept_now = kept
        if (
            job.binding is not binding
            or kept_workload is not workload
            or (kept_version, kept_value) != (version, priority_value)
        ):
            return None
        return job if now == kept_now or (not job.in_flight and now > kept_now) else None

    def keep_admitted(
        self,
        job: AdmittedJob,
        workload: Workload,
        version: str,
        priority_value: int,
        now: dt.datetime,
        snapshot: Snapshot | None = None,
    ) -> None:
        """Keep ``job``; with the ``snapshot`` it was read from, ``quick_admitted`` returns it
        too while no cluster of it is in flight."""
        if len(self._admitted) >= self.max_entries or version != self._admitted_version:
            self._admitted = {}  # bounded, and for the latest policy version only
            self._admitted_version = version
            self._held = _KeptByTemplate()
        self._admitted[id(job.binding)] = (job, workload, version, priority_value, now)
        if snapshot is None or job.in_flight:
            self._held.drop(job)
            return
        self._held.put(job, snapshot)
        self._held_at = now if self._held_at is None else max(self._held_at, now)

    def quick_admitted(
        self, snapshot: Snapshot, version: str, now: dt.datetime
    ) -> Mapping[int, AdmittedJob]:
        """id(binding) → the admitted job ``admitted`` returns for it (check the binding): kept
        from the very template ``snapshot`` has for it and ``snapshot``'s PriorityClasses (so
        the same workload and PriorityClass value), for this policy version, with no cluster
        in flight, and ``now`` no earlier than when any of them was kept."""
        if version != self._admitted_version or self._held_at is None or now < self._held_at:
            return {}
        return self._held.of(snapshot)

    def first_seen(self, binding: BindingView, now: dt.datetime) -> dt.datetime:
        """The ``now`` of the first cycle that read ``binding`` placed without saying when
        (no admission annotation, no Scheduled condition, no lastScheduledTime): an adopted
        binding's in-flight time counts from then. Bounded: when full, it starts again."""
        key = binding.uid or binding.ref
        found = self._first_seen.get(key)
        if found is None:
            if len(self._first_seen) >= self.max_entries:
                self._first_seen = {}
            found = self._first_seen[key] = now
        return found

    def priority_value(self, snapshot: Snapshot, name: str | None) -> int | None:
        """``snapshot.priority_value(name)``, remembered while the snapshot's tuple of
        PriorityClasses is the same object (the entry holds it, so its id is not reused)."""
        classes, values = self._priorities
        if classes is not snapshot.priority_classes:
            classes, values = snapshot.priority_classes, {}
            self._priorities = (classes, values)
        if name in values:
            return values[name]
        value = values[name] = snapshot.priority_value(name)
        return value

    def placement(self, version: str, build: Callable[[], T]) -> T:
        """What placement keeps between cycles, for policy ``version`` (only the latest)."""
        found = self._placement.get(version)
        if found is None:
            found = build()
            self._placement = {version: found}
        return found


J = TypeVar("J", PendingJob, AdmittedJob)


class _KeptByTemplate(Generic[J]):
    """id(binding) → a job read from ``source``'s workloads and PriorityClasses (the very
    objects), each filed under its template's key and its binding's uid.

    A job depends on the snapshot's workloads through its own template alone (``read_job``),
    so a snapshot whose workloads map is a new object (a template came, went or changed)
    drops only the jobs of the keys that differ, found by identity, and keeps the rest: one
    job arriving in a pass over 20,000 objects read every waiting job again before (30 ms of
    the cycle's reading, ``make bench-pass --change arrival``). New PriorityClasses drop them
    all. A binding read again (a new object) replaces its entry, so entries do not pile up.
    """

    __slots__ = ("_by_template", "_jobs", "_source")

    def __init__(self) -> None:
        self._jobs: dict[int, J] = {}
        self._by_template: dict[ObjectKey, dict[str, int]] = {}  # key → binding uid → id
        self._source: tuple[Mapping[Any, Workload] | None, object] = (None, None)

    def of(self, snapshot: Snapshot) -> Mapping[int, J]:
        """The jobs that hold for ``snapshot`` (check each one's binding)."""
        workloads, classes = self._source
        if workloads is None or classes is not snapshot.priority_classes:
            return {}
        if workloads is not snapshot.workloads:
            for key in _changed(workloads, snapshot.workloads):
                for found in self._by_template.pop(key, {}).values():
                    self._jobs.pop(found, None)
            self._source = (snapshot.workloads, classes)
        return self._jobs

    def put(self, job: J, snapshot: Snapshot) -> None:
        """Keep ``job``, read from ``snapshot`` (the jobs of other sources are dropped)."""
        workloads, classes = self._source
        if workloads is not snapshot.workloads or classes is not snapshot.priority_classes:
            self._jobs, self._by_template = {}, {}
            self._source = (snapshot.workloads, snapshot.priority_classes)
        binding = job.binding
        filed = self._by_template.setdefault(binding.resource.key, {})
        before = filed.get(who := binding.uid or binding.ref)
        if before is not None:
            self._jobs.pop(before, None)
        filed[who] = id(binding)
        self._jobs[id(binding)] = job

    def drop(self, job: J) -> None:
        binding = job.binding
        if self._jobs.pop(id(binding), None) is None:
            return
        filed = self._by_template.get(binding.resource.key)
        if filed is not None and filed.get(who := binding.uid or binding.ref) == id(binding):
            del filed[who]
            if not filed:
                del self._by_template[binding.resource.key]


def _changed(old: Mapping[Any, Workload], new: Mapping[Any, Workload]) -> Collection[Any]:
    """The keys whose values are not the very same object in ``old`` and ``new`` (perhaps a few
    more: what a ``LiveSnapshot``'s map says changed since ``old``, when it was made from it)."""
    if isinstance(new, FrozenDict) and (said := new.changed_since(old)) is not None:
        return said
    found = [key for key, value in new.items() if old.get(key) is not value]
    added = sum(1 for key in found if key not in old)
    if len(new) - added != len(old):  # some keys of ``old`` are gone
        found += [key for key in old if key not in new]
    return found
