"""What a cycle read: one ``JobRecord`` per managed job, ``CycleResult.jobs`` (the types are in
``engine.cycle.model``).

The cycle reads every managed binding once (``engine.cycle.jobs.reading``: its queue, tenant and
priority by the SchedulingPolicy, its demand, where it runs). Callers that need those values
for jobs the cycle made no decision about (a job admitted by an earlier pass, one in backoff,
one that finished) read them here rather than reading the binding again with their own cache,
which could disagree with the cycle's.

The table is built on first use, from the cycle's own values: a cycle whose caller never looks
pays nothing for it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence

from engine import annotations as ann
from engine.cycle import dependencies
from engine.cycle.groups import formation as groups
from engine.cycle.jobs.model import AdmittedJob, Backoff, Finished, Mapped, PendingJob
from engine.cycle.jobs.reading import binding_ref, workload_ref
from engine.cycle.model import ClusterAssignment, GroupState, JobRecord, JobState, JobTable
from engine.fleet.model import BindingView, Snapshot


def table(
    snapshot: Snapshot,
    pending: Sequence[PendingJob],
    admitted: Sequence[AdmittedJob],
    backoff: Sequence[Backoff],
    finished: Sequence[Finished],
    states: Mapping[str, GroupState],
) -> JobTable:
    """The records of a cycle's jobs (``states``: the group state the cycle left each pending
    member in). The sequences are copied: the cycle may go on (``Cycle.arrive``)."""
    jobs = (tuple(pending), tuple(admitted), tuple(backoff), tuple(finished))
    return JobTable(lambda: _records(snapshot, *jobs, states))


def _records(
    snapshot: Snapshot,
    pending: Sequence[PendingJob],
    admitted: Sequence[AdmittedJob],
    backoff: Sequence[Backoff],
    finished: Sequence[Finished],
    states: Mapping[str, GroupState],
) -> dict[str, JobRecord]:
    found: dict[str, JobRecord] = {}
    for job in pending:
        found[job.ref] = JobRecord(
            binding=job.ref,
            workload=job.workload_ref,
            state=JobState.PENDING,
            **_mapped(job.mapped),
            group=_group(job.workload and groups.key_of(job.workload, job.mapped)),
            group_state=states.get(job.ref),
            demand=job.demand,
            queued_at=queued_at(job.binding),
            pods=sum(g.count for g in job.pods),
            after=dependencies.written(job),
        )
    running = _running_groups(snapshot, admitted)
    for held in admitted:
        binding = held.binding
        placed = tuple(
            ClusterAssignment(name, sum(g.count for g in held.pods.get(name, ())) or replicas)
            for name, replicas in binding.clusters
        )
        found[held.ref] = JobRecord(
            binding=held.ref,
            workload=workload_ref(binding, snapshot.workload_for(binding)),
            state=JobState.ADMITTED,
            **_mapped(held.mapped),
            group=running[held.ref].name if held.ref in running else None,
            group_state=running.get(held.ref),
            clusters=placed,
            demand=held.demand,
            queued_at=queued_at(binding),
            admitted_at=held.admitted_at,
            in_flight=held.in_flight,
            running_since=ann.parse_time(binding.annotations.get(ann.RUNNING_SINCE, "")),
            pods=sum(c.replicas for c in placed),
        )
    for item in (*backoff, *finished):
        binding = item.binding
        workload = snapshot.workload_for(binding)
        ref = binding_ref(binding)
        found[ref] = JobRecord(
            binding=ref,
            workload=workload_ref(binding, workload),
            state=JobState.BACKOFF if isinstance(item, Backoff) else JobState.FINISHED,
            **_mapped(item.mapped),
            group=_group(groups.key_of(workload, item.mapped)),
            clusters=tuple(ClusterAssignment(name, n) for name, n in binding.clusters),
            queued_at=queued_at(binding),
        )
    return found


def queued_at(binding: BindingView) -> dt.datetime | None:
    """When the job entered its queue, as users are shown it: ``fleetgate.io/queued-at``, else
    the binding's creation (the cycle orders a job with neither by its template's)."""
    return ann.parse_time(binding.annotations.get(ann.QUEUED_AT, "")) or binding.created_at


def _mapped(mapped: Mapped | None) -> dict[str, object]:
    if mapped is None:
        return {"queue": "", "tenant": "", "priority": 0}
    return {"queue": mapped.queue, "tenant": mapped.tenant, "priority": mapped.priority}


def _group(key: groups.Key | None) -> str | None:
    return groups.label(key) if key is not None else None


def _running_groups(snapshot: Snapshot, admitted: Sequence[AdmittedJob]) -> dict[str, GroupState]:
    """The group of each admitted job that is in one, ``Running``: its size and minimum as the
    cycle reads them, ``present`` its members' bindings."""
    mapped = {job.ref: job.mapped for job in admitted}
    keys = {
        job.ref: key
        for job in admitted
        if (key := groups.key_of(snapshot.workload_for(job.binding), job.mapped)) is not None
    }
    if not keys:
        return {}
    members = groups.members_of(snapshot, set(keys.values()), mapped, set())
    by_key: dict[groups.Key, GroupState] = {}
    for key, found in members.items():
        spec = groups.spec_of(key, found, snapshot)
        present = len(found.bindings)
        by_key[key] = GroupState(groups.label(key), spec.size, spec.min, present, groups.RUNNING)
    return {ref: by_key[key] for ref, key in keys.items()}
