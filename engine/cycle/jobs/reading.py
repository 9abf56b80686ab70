"""The cycle's view of each managed binding: pending jobs to order and place, admitted jobs that
hold quota and capacity.

A job's queue, tenant, priority and gang settings come from the SchedulingPolicy's CEL, once per
(binding uid, generation, policy version): ``JobCache`` keeps them between cycles. It also keeps
each pending job as built (while its binding and workload are the very same objects, under the
same policy version and PriorityClass value), PriorityClass values per snapshot, and whatever
placement keeps per policy version (see ``placement_memo.PlacementMemo``). The values read are
in ``jobmodel``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import NamedTuple

from engine import annotations as ann
from engine import untrusted, vectors
from engine.cycle.jobs.cache import JobCache
from engine.cycle.jobs.mapping import map_job
from engine.cycle.jobs.model import AdmittedJob, Backoff, Finished, Mapped, PendingJob, PodGroup
from engine.cycle.jobs.values import EPOCH, JobValues
from engine.cycle.reasons import Reason
from engine.fleet.model import BindingView, IssueCode, Snapshot
from engine.policy.model import AdmitOn, SchedulingPolicy
from engine.policy.policyset import PolicySet
from engine.resources import PODS, Resources
from engine.vectors import Vec
from engine.workloads.hyperjob import NAME_LABEL as HJ
from engine.workloads.model import Role, Workload
from engine.workloads.names import qualified_name

POD = {PODS: 1000}


def binding_ref(binding: BindingView) -> str:
    return f"{binding.namespace}/{binding.name}" if binding.namespace else binding.name


def workload_ref(binding: BindingView, workload: Workload | None) -> str:
    if workload is not None:
        return workload.ref
    r = binding.resource
    return qualified_name(r.api_version, r.kind, r.namespace, r.name)


def pod_groups(roles: tuple[Role, ...]) -> tuple[PodGroup, ...]:
    return tuple(PodGroup(_pod_vector(r.requests), r.replicas) for r in roles if r.replicas > 0)


_POD_VECTORS: dict[int, tuple[Resources, Vec]] = {}


def _pod_vector(requests: Resources) -> Vec:
    """Per-pod milli vector, cached by the identity of the (immutable) Resources object; the
    entry keeps that object alive, so its id cannot be reused while cached."""
    found = _POD_VECTORS.get(id(requests))
    if found is None or found[0] is not requests:
        if len(_POD_VECTORS) > 200_000:
            _POD_VECTORS.clear()
        found = (requests, vectors.add(vectors.request_milli(requests), POD))
        _POD_VECTORS[id(requests)] = found
    return found[1]


def gang_pods(
    workload: Workload, policy: SchedulingPolicy, min_member: int
) -> tuple[PodGroup, ...]:
    """The pods admission must find room for: all of them, or (admitOn: MinMember) the gang
    minimum — each role's own minimum first, then the rest taken from roles in order."""
    groups = pod_groups(workload.roles)
    if policy.gang.admit_on == AdmitOn.ALL or min_member >= workload.pods:
        return groups
    counts = [min(r.min_available or 0, r.replicas) for r in workload.roles if r.replicas > 0]
    remaining = max(min_member, 1) - sum(counts)
    for i, group in enumerate(groups):
        extra = min(max(remaining, 0), group.count - counts[i])
        counts[i] += extra
        remaining -= extra
    return tuple(PodGroup(g.requests, c) for g, c in zip(groups, counts, strict=True) if c > 0)


class Classified(NamedTuple):
    """The managed bindings of a snapshot, as the cycle reads them."""

    pending: list[PendingJob]  # to schedule
    admitted: list[AdmittedJob]  # holding quota and capacity
    backoff: list[Backoff]  # waiting out a backoff after a failure
    finished: list[Finished]  # placed, every cluster reports it finished: holding nothing


def classify(
    snapshot: Snapshot,
    policies: PolicySet,
    cache: JobCache,
    now: dt.datetime,
) -> Classified:
    """Split the managed bindings: pending, admitted, backoff, finished. Bindings fleetgate
    does not manage are left out, and placed ones whose template or PriorityClass is unknown."""
    found = Classified([], [], [], [])
    quick = cache.quick(snapshot, policies.version)
    held = cache.quick_admitted(snapshot, policies.version, now)
    for binding in snapshot.bindings:
        job: PendingJob | AdmittedJob | Backoff | Finished | None = quick.get(id(binding))
        if job is None:
            job = held.get(id(binding))
        if job is None or job.binding is not binding:
            job = read_job(snapshot, policies, cache, now, binding)
        if isinstance(job, PendingJob):
            found.pending.append(job)
        elif isinstance(job, AdmittedJob):
            found.admitted.append(job)
        elif isinstance(job, Backoff):
            found.backoff.append(job)
        elif isinstance(job, Finished):
            found.finished.append(job)
    return found


def read_job(
    snapshot: Snapshot,
    policies: PolicySet,
    cache: JobCache,
    now: dt.datetime,
    binding: BindingView,
) -> PendingJob | AdmittedJob | Backoff | Finished | None:
    """The cycle's reading of ``binding``; None for a binding fleetgate does not manage, and for
    a placed one whose template or PriorityClass is unknown."""
    kept = cache.kept(snapshot, policies.version, binding)
    if kept is not None:
        return kept
    if binding.labels.get(ann.MANAGED) != "true":
        return None
    workload = snapshot.workload_for(binding)
    priority_value = cache.priority_value(
        snapshot, workload.priority_class_name if workload else None
    )
    admitted = _is_admitted(binding)
    if admitted and workload is not None and priority_value is not None:
        held = cache.admitted(binding, workload, policies.version, priority_value, now)
        if held is not None:
            return held
    backoff = None if admitted else binding.annotations.get(ann.BACKOFF_UNTIL)
    until = ann.parse_time(backoff) if backoff else None
    waits = until is not None and until > now
    if not admitted and not waits and workload is not None and priority_value is not None:
        kept = cache.pending(binding, workload, policies.version, priority_value)
        if kept is not None:
            if until is None:  # read from this snapshot now: ``kept`` finds it next time
                cache.keep_pending(kept, policies.version, priority_value, snapshot)
            return kept
    mapped: Mapped | None = None
    values: JobValues | None = None
    if workload is not None and priority_value is not None:
        values = JobValues(workload, priority_value)
        mapped = map_job(policies, cache, binding, values, priority_value, now)
        values.queue, values.tenant, values.priority = mapped.queue, mapped.tenant, mapped.priority
    if admitted:
        if workload is None or mapped is None:
            return None
        if len(binding.finished) >= len(binding.clusters):
            return Finished(binding, mapped)
        ttl = dt.timedelta(seconds=policies.scheduling.requeue.startup_timeout)
        lag = dt.timedelta(seconds=policies.scheduling.requeue.cluster_status_lag)
        since = (
            ann.parse_time(binding.annotations.get(ann.ADMITTED_AT, ""))
            or binding.scheduled_at
            or cache.first_seen(binding, now)
        )
        held = _admitted(binding, workload, mapped, since, now, ttl, lag)
        if priority_value is not None:
            cache.keep_admitted(held, workload, policies.version, priority_value, now, snapshot)
        return held
    if until is not None and waits:
        return Backoff(binding, mapped, until)
    job = _pending(snapshot, policies, binding, workload, mapped, values)
    if job.problem is None and priority_value is not None:
        # built from the binding, the workload, the policies and the mapping (itself evaluated
        # once per binding, generation, policy version and PriorityClass value, ``now`` as it
        # was then): nothing per cycle; without a backoff time, nothing on ``now`` either
        cache.keep_pending(
            job, policies.version, priority_value, snapshot if until is None else None
        )
    return job


def _is_admitted(binding: BindingView) -> bool:
    """A binding with ``spec.clusters`` is placed, whatever its annotations say: admitted by
    fleetgate, placed by Karmada before fleetgate was installed, or stripped of its annotations
    by a ``kubectl apply`` or a restore. It holds what it uses and is never admitted again.
    The one exception: a binding waiting for re-admission after its demand grew."""
    return bool(binding.clusters) and ann.READMIT not in binding.annotations


def _pending(
    snapshot: Snapshot,
    policies: PolicySet,
    binding: BindingView,
    workload: Workload | None,
    mapped: Mapped | None,
    values: JobValues | None,
) -> PendingJob:
    enqueued = (
        ann.parse_time(binding.annotations.get(ann.QUEUED_AT, ""))
        or binding.created_at
        or (workload.created_at if workload else None)
        or EPOCH
    )
    problem: tuple[Reason, str] | None = None
    pods: tuple[PodGroup, ...] = ()
    if ann.GAVE_UP in binding.annotations:
        problem = (Reason.GAVE_UP, untrusted.echo(binding.annotations[ann.GAVE_UP], 1024))
    elif workload is None:
        issues = snapshot.issues_for(binding.ref)
        detail = issues[0].message if issues else "the template is not in the snapshot"
        unseen = not issues or issues[0].code is IssueCode.TEMPLATE_NOT_FOUND
        problem = (Reason.WAITING_FOR_TEMPLATE if unseen else Reason.UNKNOWN_DEMAND, detail)
    elif mapped is None:
        problem = (
            Reason.UNKNOWN_PRIORITY_CLASS,
            f"PriorityClass {workload.priority_class_name!r} does not exist",
        )
    elif mapped.error:
        problem = (Reason.POLICY_EVAL_ERROR, mapped.error)
    elif mapped.queue and untrusted.name_problem(mapped.queue, label=True):
        said = mapped.queue  # escaped and capped by map_job
        problem = (Reason.INVALID_QUEUE_NAME, f"the queue name '{said}' is not a DNS-1123 label")
    else:
        pods = gang_pods(workload, policies.scheduling, mapped.min_member)
    mapped = mapped or Mapped("", "", 0, 0, False)
    ref = binding_ref(binding)
    return PendingJob(
        binding=binding,
        workload=workload,
        mapped=mapped,
        enqueued_at=enqueued,
        pods=pods,
        demand=vectors.total((g.requests, g.count) for g in pods),
        problem=problem,
        values=values if values is not None else {},
        ref=ref,
        order_key=(-mapped.priority, enqueued, binding.uid or ref),
        workload_ref=workload_ref(binding, workload),
        pod_key=pod_key(pods),
        depends=_depends(workload, mapped),
        grouped=workload is not None
        and (
            mapped.group is not None or ann.GROUP in workload.annotations or HJ in workload.labels
        ),
    )


def _depends(workload: Workload | None, mapped: Mapped) -> bool:
    if mapped.after or mapped.same_cluster_as:
        return True
    found = workload.annotations if workload is not None else {}
    return ann.AFTER in found or ann.SAME_CLUSTER_AS in found


def pod_key(groups: Sequence[PodGroup]) -> tuple:
    """A hashable key of pod groups: each group's requests (in their own order; the same
    requests in another order only miss a cache) and count, in the groups' order."""
    return tuple([(tuple(g.requests.items()), g.count) for g in groups])


def _admitted(
    binding: BindingView,
    workload: Workload,
    mapped: Mapped,
    admitted_at: dt.datetime,
    now: dt.datetime,
    ttl: dt.timedelta,
    lag: dt.timedelta = dt.timedelta(0),
) -> AdmittedJob:
    """A placed job: it holds its pods on each of its clusters that has not finished, and a
    cluster whose Cluster status may not count its pods yet is in flight (its room reserved)
    until the startup timeout after ``admitted_at``: its binding does not show it applied
    there, or (``_settling``) fleetgate admitted it and it has not been running ``lag``."""
    groups = pod_groups(workload.roles)
    split = workload.resizable and len(groups) == 1 and any(n for _, n in binding.clusters)
    pods: dict[str, tuple[PodGroup, ...]] = {}
    for name, replicas in binding.clusters:
        if name in binding.finished:
            continue
        pods[name] = (PodGroup(groups[0].requests, replicas),) if split else groups
    usage = {name: vectors.total((g.requests, g.count) for g in gs) for name, gs in pods.items()}
    settling = _settling(binding, now, lag)
    in_flight = frozenset(
        name
        for name in pods
        if now < admitted_at + ttl and (settling or not binding.applied.get(name))
    )
    demand = vectors.total((u, 1) for u in usage.values())
    return AdmittedJob(
        binding, mapped, admitted_at, usage, pods, in_flight, binding_ref(binding), demand
    )


def _settling(binding: BindingView, now: dt.datetime, lag: dt.timedelta) -> bool:
    """True while the pods of a job fleetgate admitted may be missing from its Cluster's
    ``resourceSummary.allocated`` although Karmada shows the Work applied: its pods are not
    bound yet (the reconciler has not seen it running: no ``running-since``), or they were
    bound less than ``lag`` ago (the Cluster status is refreshed every status period). A job
    placed by others, with no ``admitted-at``, counts as soon as it is applied."""
    notes = binding.annotations
    if ann.ADMITTED_AT not in notes:
        return False
    since = ann.parse_time(notes.get(ann.RUNNING_SINCE, ""))
    return since is None or now < since + lag
