"""Every job of one reconciler pass, as the read-only API lists them: built once per pass.

A job the pass decided is its decision, exactly as ``fleetgate dry-run -o json`` prints it
(``Decision.to_json``), with its ``state``; a job admitted by an earlier pass (its binding
placed, so this pass made no decision about it) is given the same fields, ``action`` null,
``reason`` ``Admitted`` and its clusters, from the record the cycle kept of it
(``CycleResult.jobs``). ``--explain``'s text comes from
``engine.dryrun.explain``, so the CLI and the API never describe a job differently.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property, partial
from typing import Any

from engine import annotations as ann
from engine import dryrun, vectors
from engine.cycle import Action, CycleResult, Decision, JobRecord, JobState, QueueReport, Reason
from engine.policy.policyset import PolicySet

STATES = ("pending", "admitted", "rejected", "preempted")
_STATE_OF = {
    Action.PENDING: "pending",
    Action.ADMIT: "admitted",
    Action.REJECT: "rejected",
    Action.PREEMPT: "preempted",
}


class JobEntry:
    """One job of the view. Its listed fields (``item``) are built on first use: a list
    serves a page of them, and a view is built for every pass (docs/dashboard.md)."""

    __slots__ = ("_item", "_make", "decided", "decision", "queue", "ref", "state", "workload")

    def __init__(
        self,
        ref: str,  # the binding's namespace/name (name alone when cluster-scoped)
        workload: str,  # Kind/namespace/name of the template
        queue: str,
        state: str,  # one of STATES
        make: Callable[[], dict[str, Any]],  # what /api/v1/jobs lists of it
        decision: Decision,  # for a job admitted by an earlier pass, one that says so
        decided: bool = True,  # False: admitted by an earlier pass, no decision in this one
    ) -> None:
        self.ref, self.workload, self.queue, self.state = ref, workload, queue, state
        self.decision, self.decided = decision, decided
        self._make: Callable[[], dict[str, Any]] | None = make
        self._item: Mapping[str, Any] | None = None

    @property
    def reason(self) -> str:
        return str(self.decision.reason)

    @property
    def item(self) -> Mapping[str, Any]:
        item = self._item
        if item is None:  # two threads may both build it: the same value, one kept
            make = self._make
            item = self._item = make() if make is not None else {}
            self._make = None
        return item


@dataclass(frozen=True)
class PassView:
    """One pass's result, and the jobs and queues the API serves from it."""

    @cached_property
    def namespaces(self) -> frozenset[str]:
        """The namespaces of its jobs (read once: a namespace's every read redacts by them)."""
        return frozenset(e.ref.split("/", 1)[0] for e in self.jobs if "/" in e.ref)

    result: CycleResult
    policies: PolicySet
    jobs: tuple[JobEntry, ...]  # sorted by binding ref
    by_ref: Mapping[str, JobEntry]

    @cached_property
    def by_template(self) -> Mapping[str, JobEntry]:
        """Template namespace/name → its job (made on the first look-up by a template)."""
        return {_kind_free(e.workload): e for e in self.jobs}

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
        """The listed fields, plus ``explanation`` (the text ``dry-run --explain`` prints),
        ``pods`` (its gang's), ``dependencies`` (each with the state of the job it names, when
        that job is in the view) and ``groupMembers`` (its co-admission group's jobs)."""
        found = {**entry.item, "explanation": dryrun.explain(self.result, entry.decision)}
        record = self.result.jobs.get(entry.ref)
        if record is None:
            return found
        found["pods"] = record.pods
        found["dependencies"] = [self._dependency(text) for text in record.after]
        if record.group is not None:
            found["groupMembers"] = [
                {"binding": r.binding, "state": self._state_of(r.binding)}
                for r in self.result.jobs.values()
                if r.group == record.group
            ]
        return found

    def _dependency(self, text: str) -> dict[str, Any]:
        condition, _, target = text.partition(" ")
        parts = target.split("/")
        named = self.find(parts[-2], parts[-1]) if len(parts) >= 2 else None
        if named is not None:
            return {"condition": condition, "job": target, "state": named.state,
                    "binding": named.ref}  # fmt: skip
        key = "/" + "/".join(parts[-2:])  # a job no decision names: finished, or in backoff
        record = next((r for r in self.result.jobs.values() if r.workload.endswith(key)), None)
        return {
            "condition": condition,
            "job": target,
            "state": str(record.state).lower() if record is not None else None,
            "binding": record.binding if record is not None else None,
        }

    def _state_of(self, ref: str) -> str | None:
        entry = self.by_ref.get(ref)
        return entry.state if entry is not None else None


def build_view(result: CycleResult, policies: PolicySet) -> PassView:
    """The view of one pass: its decisions, and the jobs admitted by earlier passes as the
    cycle read them (``CycleResult.jobs``)."""
    entries: dict[str, JobEntry] = {}
    for d in result.decisions:
        state = _STATE_OF[d.action]
        entries[d.binding] = JobEntry(
            d.binding, d.workload, d.queue, state, partial(_decided_item, result, d, state), d
        )
    for record in result.jobs.in_state(JobState.ADMITTED):
        if record.binding not in entries:
            entries[record.binding] = _admitted_entry(record)
    jobs = tuple(entries[ref] for ref in sorted(entries))
    return PassView(result, policies, jobs, entries)


def _decided_item(result: CycleResult, d: Decision, state: str) -> dict[str, Any]:
    item = d.to_json()
    item["state"] = state
    record = result.jobs.get(d.binding)
    item.update(_times(record.queued_at if record is not None else None))
    if record is not None:
        item["demand"] = vectors.to_json(record.demand)
    return item


def _admitted_entry(job: JobRecord) -> JobEntry:
    admitted_at = ann.format_time(job.admitted_at) if job.admitted_at is not None else ""
    names = ", ".join(c.name for c in job.clusters)
    decision = Decision(
        binding=job.binding,
        workload=job.workload,
        queue=job.queue,
        tenant=job.tenant,
        priority=job.priority,
        action=Action.ADMIT,
        reason=Reason.ADMITTED,
        message=f"admitted to {names} at {admitted_at} (by an earlier pass: running or starting)",
        clusters=job.clusters,
        group=job.group_state,
    )
    make = partial(_admitted_item, job, decision, admitted_at)
    return JobEntry(job.binding, job.workload, job.queue, "admitted", make, decision, decided=False)


def _admitted_item(job: JobRecord, decision: Decision, admitted_at: str) -> dict[str, Any]:
    item = decision.to_json()
    item["action"] = None  # this pass decided nothing about it
    item.update(
        state="admitted",
        admittedAt=admitted_at,
        inFlight=sorted(job.in_flight),
        usage=vectors.to_json(job.demand),
        demand=vectors.to_json(job.demand),
    )
    if job.running_since is not None:
        item["runningSince"] = ann.format_time(job.running_since)
    item.update(_times(job.queued_at))
    return item


def _times(queued: dt.datetime | None) -> dict[str, str]:
    return {"queuedAt": ann.format_time(queued)} if queued is not None else {}


def _kind_free(workload: str) -> str:
    return workload.split("/", 1)[1] if "/" in workload else workload
