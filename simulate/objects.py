"""The in-memory objects a simulated fleet shows the real cycle: templates (``Workload``),
ResourceBindings (``BindingView``), PriorityClasses and Clusters, built directly as the frozen
views ``engine.fleet.snapshot`` would read from Karmada's objects (no dicts, no YAML).

Each write the reconciler would make is planned by the reconciler's own rules
(``engine.enforce``: ``plan``, ``plan_transition``) and applied here: each function returns
the binding as it would read back afterwards. The simulator writes no Pending reason but a
preemptor's (the cycle reads only its nominated cluster).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Sequence
from typing import Any

from engine import annotations as ann
from engine.cycle import Decision
from engine.enforce import Mode, Plan, Reclaim, Started, plan, plan_transition
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
SCHEDULED = "Scheduled"
# Karmada removed the Works of a binding taken off its clusters: nothing applied or finished
_OFF_CLUSTERS: dict[str, Any] = {
    "applied": _EMPTY,
    "health": _EMPTY,
    "finished": frozenset(),
    "failed": frozenset(),
}


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


def as_object(binding: BindingView) -> dict[str, Any]:
    """The binding as the write plans read one (``engine.enforce.plan``): its annotations,
    labels, clusters, suspension, resource and conditions."""
    return {
        "kind": binding.kind,
        "metadata": {
            "name": binding.name,
            "namespace": binding.namespace,
            "annotations": dict(binding.annotations),
            "labels": dict(binding.labels),
            "resourceVersion": "",
            "generation": binding.generation,
        },
        "spec": {
            "clusters": [{"name": n, "replicas": r} for n, r in binding.clusters],
            "suspension": {"scheduling": binding.suspended_scheduling},
            "resource": {
                "apiVersion": binding.resource.api_version,
                "kind": binding.resource.kind,
            },
        },
        "status": {"conditions": [{"type": k, "status": v} for k, v in binding.conditions.items()]},
    }


def written(binding: BindingView, writes: Plan, now: dt.datetime, **karmada: Any) -> BindingView:
    """``binding`` as it reads back after ``writes``: the merge patch (annotations, clusters,
    suspension), then the ``Scheduled`` condition; ``karmada``: the fields Karmada's
    controllers then set (one copy of the view for all)."""
    if writes.patch is None:
        return dataclasses.replace(binding, **karmada) if karmada else binding
    notes = dict(binding.annotations)
    for key, value in ((writes.patch.get("metadata") or {}).get("annotations") or {}).items():
        if value is None:
            notes.pop(key, None)
        else:
            notes[key] = value
    changes: dict[str, Any] = {"annotations": FrozenDict(notes)}
    spec = writes.patch.get("spec") or {}
    if "clusters" in spec:
        targets = spec["clusters"] or ()
        changes["clusters"] = tuple((c["name"], int(c.get("replicas", 0))) for c in targets)
    if "suspension" in spec:
        changes["suspended_scheduling"] = bool(spec["suspension"].get("scheduling"))
    if writes.status is not None:
        changes["conditions"] = FrozenDict({**binding.conditions, SCHEDULED: writes.status.status})
        if writes.status.scheduled:
            changes["scheduler_observed_generation"] = binding.generation
            changes["scheduled_at"] = now
        else:
            changes["scheduled_at"] = None
    return dataclasses.replace(binding, **changes, **karmada)


def admitted(
    binding: BindingView, decision: Decision, resizable: bool, now: dt.datetime, version: str
) -> BindingView:
    """The Admit written in bind mode (``engine.enforce.plan``), then the status as Karmada
    reports it once the member accepted the Work (applied, healthy): the simulator submits it
    to the member at once."""
    writes = plan(decision, as_object(binding), Mode.BIND, now, version, resizable)
    names = [c.name for c in decision.clusters]
    return written(
        binding,
        writes,
        now,
        applied=FrozenDict(dict.fromkeys(names, True)),
        health=FrozenDict(dict.fromkeys(names, "Healthy")),
        finished=frozenset(),
        failed=frozenset(),
    )


def running(binding: BindingView, now: dt.datetime) -> BindingView:
    """The job runs on all its clusters: the lifecycle's ``Started`` written
    (``fleetgate.io/running-since``)."""
    ref = f"{binding.namespace}/{binding.name}"
    started = Started(ref, now, tuple(n for n, _ in binding.clusters))
    return written(binding, plan_transition(started, as_object(binding), Mode.BIND, now), now)


def finished(binding: BindingView, cluster: str, failed: bool) -> BindingView:
    """The job on ``cluster`` reached a terminal state (aggregatedStatus says so)."""
    return dataclasses.replace(
        binding,
        finished=binding.finished | {cluster},
        failed=binding.failed | {cluster} if failed else binding.failed,
    )


def preempted(
    binding: BindingView, decision: Decision, now: dt.datetime, version: str
) -> BindingView:
    """The Preempt written (back in its queue from ``now``, one more preemption, no attempt
    counted), then its Works removed."""
    writes = plan(decision, as_object(binding), Mode.BIND, now, version)
    return written(binding, writes, now, **_OFF_CLUSTERS)


def reclaimed(binding: BindingView, change: Reclaim, now: dt.datetime, version: str) -> BindingView:
    """The lifecycle's requeue (backoff, one more attempt, the failing clusters excluded) or
    give-up written, then its Works removed."""
    writes = plan_transition(change, as_object(binding), Mode.BIND, now, version)
    return written(binding, writes, now, **_OFF_CLUSTERS)


def nominated(binding: BindingView, decision: Decision, version: str) -> BindingView:
    """A preemptor's Pending decision written: the cluster its victims free
    (``fleetgate.io/nominated-cluster``) and its reason."""
    at_once = EPOCH  # a Pending write uses no time
    return written(
        binding, plan(decision, as_object(binding), Mode.BIND, at_once, version), at_once
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
