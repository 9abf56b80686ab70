"""``fleetgate dry-run`` output: a table for people, the JSON contract, and one job explained."""

from __future__ import annotations

from collections.abc import Sequence

from engine import vectors
from engine.annotations import format_time
from engine.cycle import CycleResult, Decision, JobRecord, QueueReport, Reason
from engine.fleet.model import SnapshotIssue


def table(result: CycleResult, issues: Sequence[SnapshotIssue] = ()) -> str:
    lines = [f"policy version {result.policy_version}, now {format_time(result.now)}", ""]
    rows = [["ACTION", "JOB", "QUEUE", "POS", "PRIO", "CLUSTERS", "REASON", "MESSAGE"]]
    for d in result.decisions:
        rows.append(
            [
                str(d.action),
                d.workload,
                d.queue or "-",
                str(d.position) if d.position else "-",
                str(d.priority),
                ",".join(f"{c.name}={c.replicas}" for c in d.clusters) or "-",
                str(d.reason),
                d.message,
            ]
        )
    lines += _aligned(rows)
    if never := sum(d.reason == Reason.NEVER_FITS for d in result.decisions):
        lines.append(
            f"never fits: {never} job(s) rejected ({Reason.NEVER_FITS}: a pod is larger than "
            "every node of the clusters it may use), not counted as pending"
        )
    lines.append("")
    queue_rows = [["QUEUE", "PARENT", "ADMITTED", "PENDING", "SHARE", "USED/GUARANTEE/MAX"]]
    for q in result.queues:
        queue_rows.append(
            [q.name, q.parent or "-", str(q.admitted), str(q.pending), f"{q.share:.3f}", _quota(q)]
        )
    lines += _aligned(queue_rows)
    for issue in issues:
        lines.append(f"warning: {issue}")
    return "\n".join(lines)


def explain(result: CycleResult, decision: Decision, warnings: Sequence[str] = ()) -> str:
    """Everything the cycle knows about one job's decision; ``warnings``: a line each after it
    (the node shapes clusters' resource models cannot see whole, ``nodeshape.cluster_warnings``)."""
    lines = [
        f"{decision.workload}  (binding {decision.binding})",
        f"  queue     {decision.queue or '-'}  tenant {decision.tenant or '-'}  "
        f"priority {decision.priority}",
        f"  decision  {decision.action}: {decision.reason}",
        f"  message   {decision.message}",
    ]
    if decision.position:
        lines.append(f"  position  {decision.position} in queue {decision.queue}")
    if decision.clusters:
        where = ", ".join(f"{c.name} ({c.replicas} pods)" for c in decision.clusters)
        lines.append(f"  clusters  {where}")
    if decision.victims:
        lines.append(f"  victims   {', '.join(decision.victims)}")
    if decision.preemptor:
        lines.append(f"  for       {decision.preemptor}")
    if (group := decision.group) is not None:
        lines.append(
            f"  group     {group.name}: {group.state}; {group.present} of {group.size} members "
            f"present, {group.min} needed at once"
        )
    if decision.cluster_reasons:
        # a placed job's cluster reasons are the scores that failed (counted as 0) there
        lines.append("  clusters not chosen:" if not decision.clusters else "  cluster notes:")
        width = max(len(name) for name, _ in decision.cluster_reasons)
        lines += [f"    {name.ljust(width)}  {why}" for name, why in decision.cluster_reasons]
    queue = next((q for q in result.queues if q.name == decision.queue), None)
    if queue is not None:
        lines.append(
            f"  queue now {_quota(queue)}; {queue.admitted} admitted, {queue.pending} pending"
        )
    lines.append(f"  policy    {result.policy_version}")
    lines += [f"warning: {warning}" for warning in warnings]
    return "\n".join(lines)


def find(result: CycleResult, target: str) -> Decision | None:
    """A decision by binding ``ns/name`` or by the job template's ``ns/name``."""
    for d in result.decisions:
        kind_free = d.workload.split("/", 1)[1] if "/" in d.workload else d.workload
        if target in (d.binding, kind_free, d.workload):
            return d
    return None


def find_job(result: CycleResult, target: str) -> JobRecord | None:
    """A job the cycle read but decided nothing about (admitted, finished, in backoff), by
    binding ``ns/name`` or by the job template's ``ns/name``."""
    for record in result.jobs.values():
        kind_free = record.workload.split("/", 1)[1] if "/" in record.workload else ""
        if target in (record.binding, kind_free, record.workload):
            return record
    return None


def explain_job(result: CycleResult, job: JobRecord) -> str:
    """A job this cycle decided nothing about: why it is where it is, since when, what it
    holds, and what could take it off its clusters."""
    lines = [
        f"{job.workload}  (binding {job.binding})",
        f"  queue     {job.queue or '-'}  tenant {job.tenant or '-'}  priority {job.priority}",
        f"  state     {job.state} (no decision this cycle)",
    ]
    if job.clusters:
        where = ", ".join(f"{c.name} ({c.replicas} pods)" for c in job.clusters)
        lines.append(f"  clusters  {where}")
    if job.admitted_at is not None:
        lines.append(f"  admitted  {format_time(job.admitted_at)}")
    if job.running_since is not None:
        lines.append(f"  running   since {format_time(job.running_since)}")
    elif job.in_flight:
        lines.append(
            f"  starting  not running yet on {', '.join(sorted(job.in_flight))}: its room is "
            "held there until it runs or its startup timeout ends"
        )
    held = "; ".join(
        f"{_short(r)} {vectors.describe(r, v)}"
        for r, v in sorted(job.demand.items())
        if r != "pods"
    )
    lines.append(f"  holds     {held or '-'}")
    if job.group_state is not None:
        g = job.group_state
        lines.append(
            f"  group     {g.name}: {g.state}; {g.present} of {g.size} present, min {g.min}"
        )
    queue = next((q for q in result.queues if q.name == job.queue), None)
    if queue is not None and job.state == "Admitted":
        borrows = any(queue.usage.get(r, 0) > queue.guarantee.get(r, 0) for r in queue.guarantee)
        lines.append(f"  quota     {_quota(queue)} (used/guarantee/max)")
        lines.append(
            "  preempted only by a job of higher priority in its own queue, where the queue's "
            "preemption allows it"
            + (
                "; or reclaimed: its queue borrows beyond its guarantee, so a queue below its "
                "own guarantee may take this job back (reclaim)"
                if borrows
                else "; its queue is within its guarantee, so no other queue may reclaim it"
            )
        )
    return "\n".join(lines)


def _quota(q: QueueReport) -> str:
    names = sorted(set(q.guarantee) | set(q.max) | {r for r in q.usage if r != "pods"})
    parts = []
    for r in names:
        cells = [
            vectors.describe(r, q.usage.get(r, 0)),
            vectors.describe(r, q.guarantee.get(r, 0)),
            vectors.describe(r, q.max[r]) if r in q.max else "-",
        ]
        parts.append(f"{_short(r)} {'/'.join(cells)}")
    return "; ".join(parts) or "-"


def _short(resource: str) -> str:
    return {"nvidia.com/gpu": "gpu"}.get(resource, resource.removeprefix("kubernetes.io/"))


def _aligned(rows: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    return [
        "  ".join([*(c.ljust(w) for c, w in zip(row, widths, strict=False)), row[-1]]).rstrip()
        for row in rows
    ]
