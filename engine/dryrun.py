"""``fleetgate dry-run`` output: a table for people, the JSON contract, and one job explained."""

from __future__ import annotations

from collections.abc import Sequence

from engine import vectors
from engine.annotations import format_time
from engine.cycle import CycleResult, Decision, QueueReport, Reason
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
