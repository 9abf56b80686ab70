"""The in-memory objects a simulated fleet shows the real cycle: templates (``Workload``),
ResourceBindings (``BindingView``), PriorityClasses and Clusters, built directly as the frozen
views ``engine.fleet.snapshot`` would read from Karmada's objects (no dicts, no YAML).

Each write the reconciler would make (``engine/enforce/plan.py``: admit, preempt; the requeue of a
failed job) is a function here that returns the binding as it would read back afterwards.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping, Sequence

from engine import annotations as ann
from engine.cycle import ClusterAssignment
from engine.fleet.clusters import read_cluster
from engine.fleet.frozen import FrozenDict
from engine.fleet.model import (
    BindingView,
    ClusterAffinity,
    ClusterView,
    ObjectRef,
    PlacementView,
    PriorityClassView,
)
from engine.members import MemberCluster, cluster_object
from engine.members.status import resource_models
from engine.resources import Resources
from engine.workloads.model import Role, Workload
from simulate.trace import RESIZABLE, TraceJob

EPOCH = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)
"""Simulated time 0 (the trace's first submit)."""
QUEUE_LABEL = "fleetgate.io/queue"
STAGE_LABEL = "fleetgate.io/stage"
_EMPTY: FrozenDict[str, object] = FrozenDict()
_MANAGED = FrozenDict({ann.MANAGED: "true"})
_DROPPED_ON_ADMIT = (
    ann.PENDING,
    ann.QUEUE_POSITION,
    ann.READMIT,
    ann.NOMINATED_CLUSTER,
    ann.RUNNING_SINCE,
)


def at(seconds: float) -> dt.datetime:
    return EPOCH + dt.timedelta(seconds=seconds)


def priority_class_name(value: int) -> str | None:
    if value == 0:
        return None  # no class: the default, 0
    return f"trace-priority-{value}" if value > 0 else f"trace-priority-minus-{-value}"


def priority_classes(jobs: Sequence[TraceJob]) -> tuple[PriorityClassView, ...]:
    values = sorted({j.priority for j in jobs if j.priority != 0})
    views = [PriorityClassView(priority_class_name(v) or "", v, False) for v in values]
    return tuple(sorted(views, key=lambda p: p.name))


def workload(job: TraceJob) -> Workload:
    labels = {QUEUE_LABEL: job.queue}
    if job.stage:
        labels[STAGE_LABEL] = job.stage
    notes = {ann.AFTER: ",".join(job.after)} if job.after else {}
    pods = sum(r.replicas for r in job.roles)
    return Workload(
        api_version=job.api_version,
        kind=job.kind,
        namespace=job.namespace,
        name=job.name,
        uid=f"tpl-{job.index:08d}",
        roles=tuple(Role(r.name, r.replicas, r.requests) for r in job.roles),
        min_member=pods,
        resizable=(job.api_version, job.kind) in RESIZABLE,
        priority_class_name=priority_class_name(job.priority),
        labels=labels,
        annotations=notes,
        created_at=at(job.submit),
    )


def pending_binding(job: TraceJob, work: Workload) -> BindingView:
    """The binding Karmada's detector creates and fleetgate's webhook suspends."""
    placement = (
        PlacementView(affinity=ClusterAffinity(cluster_names=(job.cluster,)))
        if job.cluster
        else None
    )
    created = at(job.submit)
    return BindingView(
        namespace=work.namespace,
        name=f"{work.name}-{work.kind.lower()}",
        uid=f"rb-{job.index:08d}",
        kind="ResourceBinding",
        resource=ObjectRef(work.api_version, work.kind, work.namespace, work.name, work.uid),
        policy_kind="",
        policy_permanent_id="",
        suspended_scheduling=True,
        clusters=(),
        replicas=0,
        replica_requirements=None,
        priority_class_name="",
        components=(),
        placement=placement,
        applied=_EMPTY,  # type: ignore[arg-type]
        health=_EMPTY,  # type: ignore[arg-type]
        finished=frozenset(),
        conditions=_EMPTY,  # type: ignore[arg-type]
        generation=1,
        scheduler_observed_generation=0,
        labels=_MANAGED,
        annotations=FrozenDict({ann.QUEUED_AT: ann.format_time(created)}),
        created_at=created,
    )


def admitted(
    binding: BindingView,
    clusters: Sequence[ClusterAssignment],
    resizable: bool,
    now: dt.datetime,
) -> BindingView:
    """``plan._admit`` in bind mode, then the status as Karmada reports it once the member
    accepted the Work (applied, healthy): the simulator submits it to the member at once."""
    names = [c.name for c in clusters]
    split = len(clusters) > 1 or resizable
    notes = {k: v for k, v in binding.annotations.items() if k not in _DROPPED_ON_ADMIT}
    notes[ann.ADMITTED_AT] = ann.format_time(now)
    notes[ann.ADMITTED_TO] = ",".join(names)
    return dataclasses.replace(
        binding,
        clusters=tuple((c.name, c.replicas if split else 0) for c in clusters),
        annotations=FrozenDict(notes),
        applied=FrozenDict(dict.fromkeys(names, True)),
        health=FrozenDict(dict.fromkeys(names, "Healthy")),
        finished=frozenset(),
        failed=frozenset(),
        conditions=FrozenDict({"Scheduled": "True"}),
        scheduler_observed_generation=binding.generation,
        scheduled_at=now,
    )


def running(binding: BindingView, now: dt.datetime) -> BindingView:
    """The job runs on all its clusters: ``fleetgate.io/running-since``, as the reconciler's
    lifecycle records it (``engine.enforce.lifecycle.Started``)."""
    notes = dict(binding.annotations)
    notes[ann.RUNNING_SINCE] = ann.format_time(now)
    return dataclasses.replace(binding, annotations=FrozenDict(notes))


def finished(binding: BindingView, cluster: str, failed: bool) -> BindingView:
    """The job on ``cluster`` reached a terminal state (aggregatedStatus says so)."""
    return dataclasses.replace(
        binding,
        finished=binding.finished | {cluster},
        failed=binding.failed | {cluster} if failed else binding.failed,
    )


def requeued(
    binding: BindingView,
    now: dt.datetime,
    reason: str,
    *,
    backoff_until: dt.datetime | None = None,
    attempts: int | None = None,
    exclusions: Mapping[str, dt.datetime] | None = None,
    preempted: bool = False,
) -> BindingView:
    """Back in its queue from ``now``: ``plan._preempt`` (no backoff, attempts unchanged, one
    more preemption), or a requeue after a failure (backoff, one more attempt, the failed
    clusters excluded)."""
    notes = {
        k: v
        for k, v in binding.annotations.items()
        if k
        not in (
            ann.ADMITTED_AT,
            ann.ADMITTED_TO,
            ann.QUEUE_POSITION,
            ann.RUNNING_SINCE,
            ann.NOMINATED_CLUSTER,
        )
    }
    notes[ann.QUEUED_AT] = ann.format_time(now)
    notes[ann.PENDING] = reason
    if backoff_until is not None:
        notes[ann.BACKOFF_UNTIL] = ann.format_time(backoff_until)
    if attempts is not None:
        notes[ann.ATTEMPTS] = str(attempts)
    if preempted:
        notes[ann.PREEMPTIONS] = str(preemption_count(binding.annotations) + 1)
    if exclusions:
        notes[ann.EXCLUDED_CLUSTERS] = ",".join(
            f"{name}={ann.format_time(until)}" for name, until in sorted(exclusions.items())
        )
    return dataclasses.replace(
        binding,
        clusters=(),
        annotations=FrozenDict(notes),
        applied=_EMPTY,
        health=_EMPTY,
        finished=frozenset(),
        failed=frozenset(),
        conditions=FrozenDict({"Scheduled": "False"}),
        scheduled_at=None,
    )


def nominated(binding: BindingView, cluster: str) -> BindingView:
    """A preemptor's binding as ``plan._pending`` writes it: the cluster its victims free."""
    notes = {**binding.annotations, ann.NOMINATED_CLUSTER: cluster}
    return dataclasses.replace(binding, annotations=FrozenDict(notes))


def gave_up(binding: BindingView, cluster: str, message: str) -> BindingView:
    """Given up after its last attempt: it stays Failed where it last ran, so dependencies on
    it read Failed."""
    notes = dict(binding.annotations)
    notes[ann.PENDING] = message
    return dataclasses.replace(
        binding,
        clusters=((cluster, 0),),
        annotations=FrozenDict(notes),
        finished=frozenset({cluster}),
        failed=frozenset({cluster}),
    )


class ClusterReader:
    """A member's Cluster as the reconciler's snapshot reads it: ``read_cluster`` of
    ``engine.members.cluster_object`` (Karmada's status controller), that full path taken once
    for what does not change (spec, labels, apiEnablements, allocatable, resource models, the
    node shapes of ``fleetgate.io/node-shapes``); each ``view`` then reads only the status that
    moves, from the totals the member keeps up to date (``allocated``, ``allocating``,
    ``allocatable_modelings``, ``Ready``).
    tests/simulate/test_sim_objects.py checks it against the full path."""

    def __init__(self, member: MemberCluster, now: dt.datetime) -> None:
        self.member = member
        self.last = read_cluster(cluster_object(member, now))
        self.models = resource_models(member)
        self.ordered = tuple(sorted(self.models, key=lambda m: m.grade))
        self.allocatable = member.allocatable()
        self.read: tuple[object, ...] = ()  # what ``last`` was read from, to skip a re-read

    def view(self, unbound: bool = True) -> ClusterView:
        """The Cluster now; ``unbound`` False: the caller knows no pod waits for a node on the
        member (``allocating`` is then empty without looking)."""
        member = self.member
        changed = member.ready_changed_at
        changed = changed.replace(microsecond=0) if changed is not None else None
        if not member.ready:  # unreachable: only the condition changes
            self.last = dataclasses.replace(self.last, ready=False, ready_changed_at=changed)
            self.read = ()
            return self.last
        read = (member.changes, changed, unbound)
        if read == self.read:  # nothing the status shows moved since
            return self.last
        self.read = read
        self.last = dataclasses.replace(
            self.last,
            ready=True,
            ready_changed_at=changed,
            allocated=member.allocated(),
            allocating=member.allocating() if unbound else Resources(),
            allocatable_modelings=member.allocatable_modelings(self.ordered),
        )
        return self.last


def preemption_count(annotations: Mapping[str, str]) -> int:
    """``fleetgate.io/preemptions`` (0 when absent or unreadable)."""
    raw = annotations.get(ann.PREEMPTIONS, "")
    return int(raw) if raw.isdigit() else 0
