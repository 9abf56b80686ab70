"""Every job of one reconciler pass, as the read-only API lists them: built once per pass.

A job the pass decided is its decision, exactly as ``fleetgate dry-run -o json`` prints it
(``Decision.to_json``), with its ``state``; a job admitted by an earlier pass (its binding
placed, so this pass made no decision about it) is given the same fields, ``action`` null,
``reason`` ``Admitted`` and its clusters, read from its binding. ``--explain``'s text comes from
``engine.dryrun.explain``, so the CLI and the API never describe a job differently.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from engine import annotations as ann
from engine import dryrun
from engine.cycle import groups, vectors
from engine.cycle.jobcache import JobCache
from engine.cycle.jobs import AdmittedJob, binding_ref, read_job, workload_ref
from engine.cycle.model import ClusterAssignment, CycleResult, Decision, GroupState, QueueReport
from engine.cycle.reasons import Action, Reason
from engine.fleet.model import BindingView, Snapshot
from engine.policy.policyset import PolicySet

STATES = ("pending", "admitted", "rejected", "preempted")
_STATE_OF = {
    Action.PENDING: "pending",
    Action.ADMIT: "admitted",
    Action.REJECT: "rejected",
    Action.PREEMPT: "preempted",
}


@dataclass(frozen=True, slots=True)
class JobEntry:
    ref: str  # the binding's namespace/name (name alone when cluster-scoped)
    workload: str  # Kind/namespace/name of the template
    queue: str
    state: str  # one of STATES
    item: Mapping[str, Any]  # what /api/v1/jobs lists
    decision: Decision  # for a job admitted by an earlier pass, one that says so
    decided: bool = True  # False: admitted by an earlier pass, no decision in this one


@dataclass(frozen=True, slots=True)
class PassView:
    """One pass's result, and the jobs and queues the API serves from it."""

    result: CycleResult
    policies: PolicySet
    jobs: tuple[JobEntry, ...]  # sorted by binding ref
    by_ref: Mapping[str, JobEntry]
    by_template: Mapping[str, JobEntry]  # template namespace/name → its job

    def queue(self, name: str) -> QueueReport | None:
        return next((q for q in self.result.queues if q.name == name), None)

    def subtree(self, name: str) -> frozenset[str]:
        """``name`` and every queue below it (a queue's report counts its whole subtree)."""
        children: dict[str, list[str]] = {}
        for q in self.result.queues:
            children.setdefault(q.parent, []).append(q.name)
        found, todo = set(), [name]
        while todo:
            queue = todo.pop()
            if queue not in found:
                found.add(queue)
                todo.extend(children.get(queue, ()))
        return frozenset(found)

    def find(self, namespace: str, name: str) -> JobEntry | None:
        """A job by its binding's or its template's ``namespace/name``."""
        key = f"{namespace}/{name}"
        return self.by_ref.get(key) or self.by_template.get(key)

    def queue_json(self, report: QueueReport) -> dict[str, Any]:
        spec = self.policies.queue(report.name)
        return {
            **report.to_json(),
            "weight": float(spec.weight) if spec is not None else None,
            "priority": spec.priority if spec is not None else None,
            "strategy": str(spec.strategy) if spec is not None else None,
        }

    def detail(self, entry: JobEntry) -> dict[str, Any]:
        """The listed fields, plus ``explanation``: the text ``dry-run --explain`` prints."""
        return {**entry.item, "explanation": dryrun.explain(self.result, entry.decision)}


def build_view(
    result: CycleResult, snapshot: Snapshot | None, policies: PolicySet, cache: JobCache
) -> PassView:
    """The view of one pass. ``cache`` (the view's own, never the reconciler's: another thread)
    keeps the queue mapping of admitted jobs between passes."""
    bindings = _bindings(snapshot)
    entries: dict[str, JobEntry] = {}
    for d in result.decisions:
        item = d.to_json()
        item["state"] = _STATE_OF[d.action]
        item.update(_times(bindings.get(d.binding)))
        entries[d.binding] = JobEntry(d.binding, d.workload, d.queue, str(item["state"]), item, d)
    if snapshot is not None:
        admitted = list(_admitted(snapshot, policies, cache, result.now, bindings, entries))
        states = _running_groups(snapshot, admitted)
        for job in admitted:
            entries[job.ref] = _admitted_entry(snapshot, job, states.get(job.ref))
    jobs = tuple(entries[ref] for ref in sorted(entries))
    by_template = {_kind_free(e.workload): e for e in jobs}
    return PassView(result, policies, jobs, entries, by_template)


def _admitted(
    snapshot: Snapshot,
    policies: PolicySet,
    cache: JobCache,
    now: dt.datetime,
    bindings: Mapping[str, BindingView],
    decided: Mapping[str, JobEntry],
) -> Iterable[AdmittedJob]:
    for ref, binding in bindings.items():
        if ref in decided or not binding.clusters or ann.READMIT in binding.annotations:
            continue
        job = read_job(snapshot, policies, cache, now, binding)
        if isinstance(job, AdmittedJob):
            yield job


def _running_groups(snapshot: Snapshot, admitted: list[AdmittedJob]) -> dict[str, GroupState]:
    """The group of each job admitted by an earlier pass that is in one, ``Running``: its size
    and minimum as the cycle reads them (``engine.cycle.groups``), ``present`` its members'
    bindings."""
    mapped = {job.ref: job.mapped for job in admitted}
    keys = {
        job.ref: key
        for job in admitted
        if (key := groups.key_of(snapshot.workload_for(job.binding), job.mapped)) is not None
    }
    if not keys:
        return {}
    # the cycle's own reading of a group's members and size (engine-private helpers: one
    # reading for the cycle and the API, rather than a second copy of the rules here)
    members = groups.members_of(snapshot, set(keys.values()), mapped, set())
    by_key: dict[groups.Key, GroupState] = {}
    for key, found in members.items():
        spec = groups.spec_of(key, found, snapshot)
        present = len(found.bindings)
        by_key[key] = GroupState(groups.label(key), spec.size, spec.min, present, groups.RUNNING)
    return {ref: by_key[key] for ref, key in keys.items()}


def _admitted_entry(snapshot: Snapshot, job: AdmittedJob, group: GroupState | None) -> JobEntry:
    binding = job.binding
    ref = binding_ref(binding)
    workload = workload_ref(binding, snapshot.workload_for(binding))
    admitted_at = ann.format_time(job.admitted_at)
    names = ", ".join(name for name, _ in binding.clusters)
    decision = Decision(
        binding=ref,
        workload=workload,
        queue=job.mapped.queue,
        tenant=job.mapped.tenant,
        priority=job.mapped.priority,
        action=Action.ADMIT,
        reason=Reason.ADMITTED,
        message=f"admitted to {names} at {admitted_at} (by an earlier pass: running or starting)",
        clusters=tuple(
            ClusterAssignment(name, sum(g.count for g in job.pods.get(name, ())) or replicas)
            for name, replicas in binding.clusters
        ),
        group=group,
    )
    item = decision.to_json()
    item["action"] = None  # this pass decided nothing about it
    item.update(
        state="admitted",
        admittedAt=admitted_at,
        inFlight=sorted(job.in_flight),
        usage=vectors.to_json(job.demand),
    )
    item.update(_times(binding))
    return JobEntry(ref, workload, job.mapped.queue, "admitted", item, decision, decided=False)


def _times(binding: BindingView | None) -> dict[str, str]:
    if binding is None:
        return {}
    queued = ann.parse_time(binding.annotations.get(ann.QUEUED_AT, "")) or binding.created_at
    return {"queuedAt": ann.format_time(queued)} if queued is not None else {}


def _bindings(snapshot: Snapshot | None) -> dict[str, BindingView]:
    if snapshot is None:
        return {}
    return {binding_ref(b): b for b in snapshot.bindings if b.labels.get(ann.MANAGED) == "true"}


def _kind_free(workload: str) -> str:
    return workload.split("/", 1)[1] if "/" in workload else workload
