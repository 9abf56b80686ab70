"""Decisions and queue reports: turning the cycle's outcome into values with reasons."""

from __future__ import annotations

import operator
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from engine import annotations as ann
from engine import untrusted
from engine.cycle.jobs.model import AdmittedJob, Backoff, PendingJob
from engine.cycle.jobs.reading import EPOCH, binding_ref, workload_ref
from engine.cycle.model import ClusterAssignment, Decision, QueueReport
from engine.cycle.ordering.order import QueueOrder
from engine.cycle.placement.placer import Assignment
from engine.cycle.quota.tree import ROOT, QuotaNode, QuotaTree
from engine.cycle.reasons import NEVER, Action, Reason


def _action(reason: Reason) -> Action:
    """Admit for Admitted, Reject for the reasons in NEVER, otherwise Pending: the job waits."""
    if reason == Reason.ADMITTED:
        return Action.ADMIT
    return Action.REJECT if reason in NEVER else Action.PENDING


_ACTIONS = {reason: _action(reason) for reason in Reason}
WAITS = frozenset(reason for reason, action in _ACTIONS.items() if action == Action.PENDING)
"""Reasons of the jobs that keep their place in their queue: they get a position."""


def for_job(
    job: PendingJob,
    reason: Reason,
    message: str,
    *,
    assignments: Sequence[Assignment] = (),
    cluster_reasons: Iterable[tuple[str, str]] = (),
    victims: Sequence[AdmittedJob] = (),
    position: int | None = None,
    note: str = "",
) -> Decision:
    mapped = job.mapped
    clusters = (
        tuple(ClusterAssignment(name, sum(g.count for g in groups)) for name, groups in assignments)
        if assignments
        else ()
    )
    return Decision(
        job.ref,
        job.workload_ref or workload_ref(job.binding, job.workload),
        mapped.queue,
        mapped.tenant,
        mapped.priority,
        _ACTIONS[reason],
        reason,
        message,
        clusters,
        position,
        tuple(cluster_reasons),
        tuple(v.ref for v in victims) if victims else (),
        note=note,
    )


def for_victim(victim: AdmittedJob, preemptor: PendingJob, reclaim: bool) -> Decision:
    why = (
        f"queue {victim.mapped.queue} borrows above its guarantee; queue "
        f"{preemptor.mapped.queue} reclaims it for {preemptor.ref}"
        if reclaim
        else f"priority {victim.mapped.priority} is below {preemptor.ref}'s "
        f"{preemptor.mapped.priority} in queue {victim.mapped.queue}"
    )
    return Decision(
        binding=victim.ref,
        workload=workload_ref(victim.binding, None),
        queue=victim.mapped.queue,
        tenant=victim.mapped.tenant,
        priority=victim.mapped.priority,
        action=Action.PREEMPT,
        reason=Reason.PREEMPTED,
        message=why,
        clusters=tuple(ClusterAssignment(name, 0) for name in sorted(victim.usage)),
        preemptor=preemptor.ref,
    )


def for_backoff(item: Backoff) -> Decision:
    attempts = item.binding.annotations.get(ann.ATTEMPTS, "?")
    mapped = item.mapped
    return Decision(
        binding=binding_ref(item.binding),
        workload=workload_ref(item.binding, None),
        queue=mapped.queue if mapped else "",
        tenant=mapped.tenant if mapped else "",
        priority=mapped.priority if mapped else 0,
        action=Action.PENDING,
        reason=Reason.BACKOFF,
        message=f"requeued after attempt {attempts}; not considered before "
        f"{ann.format_time(item.until)}",
    )


NOTE_LIMIT = 1024
"""The longest ``fleetgate.io/pending`` annotation fleetgate writes (characters)."""


def pending_note(decision: Decision) -> str:
    """What a waiting or rejected job's binding says of it (``fleetgate.io/pending``): the
    reason and a message without live numbers or positions, so the binding is rewritten only
    when why the job waits changes, never because its queue or the fleet moved. The live
    message (usage, room, position) is the decision's own, served by the API and the CLI."""
    reason = decision.reason
    if decision.note:
        said = decision.note
    elif reason == Reason.WAITING_FOR_QUOTA:
        said = (
            f"queue {decision.queue or '?'} (or a queue above it) has too little unused quota "
            "for the job now"
        )
    elif reason == Reason.NO_CLUSTER_FITS:
        said = "no candidate cluster has room for the job now"
    elif reason == Reason.BLOCKED_BY_HEAD:  # the head changes as the queue moves
        said = f"StrictFIFO queue {decision.queue or '?'}: waits behind its head"
    elif reason == Reason.PREEMPTING:
        where = decision.clusters[0].name if decision.clusters else "?"
        said = f"preempting {', '.join(decision.victims) or '?'} for room on {where}"
    else:
        said = decision.message
    return untrusted.echo(f"{reason}: {said}", NOTE_LIMIT)


def backoff_place(item: Backoff) -> tuple[str, tuple[Any, ...]]:
    """A job in backoff keeps its place in its queue, by the same order key as the others."""
    queued = ann.parse_time(item.binding.annotations.get(ann.QUEUED_AT, ""))
    when = queued or item.binding.created_at or EPOCH
    priority = item.mapped.priority if item.mapped else 0
    ref = binding_ref(item.binding)
    return ref, (-priority, when, item.binding.uid or ref)


_first = operator.itemgetter(0)
_second = operator.itemgetter(1)


def with_positions(
    decisions: Sequence[Decision],
    waiting: Mapping[str, Sequence[tuple[str, tuple[Any, ...]]]],
    *,
    every_queue: bool = False,
) -> list[Decision]:
    """Give each waiting job its 1-based place among its queue's jobs still waiting (the
    queue order: priority, enqueue time, uid). A decision that has it already is kept.

    Only the queues that hold one of ``decisions`` are sorted (all of them with
    ``every_queue``): an incremental cycle asks for one decision's position among thousands
    of waiting jobs."""
    if every_queue:
        queues: Iterable[Sequence[tuple[str, tuple[Any, ...]]]] = waiting.values()
    else:
        wanted = {d.binding for d in decisions}
        queues = [jobs for jobs in waiting.values() if not wanted.isdisjoint(map(_first, jobs))]
    position: dict[str, int] = {}
    for jobs in queues:
        for i, ref in enumerate(map(_first, sorted(jobs, key=_second)), start=1):
            position[ref] = i
    get = position.get
    return [
        d if (place := get(d.binding)) is None or place == d.position else d.with_position(place)
        for d in decisions
    ]


def queue_reports(
    quota: QuotaTree,
    order: QueueOrder,
    admitted: Mapping[str, int],
    waiting: Mapping[str, int],
) -> tuple[QueueReport, ...]:
    reports = []
    for name in sorted(quota.nodes):
        if name == ROOT:
            continue
        node = quota.nodes[name]
        subtree = [n.name for n in _descendants(node)]
        borrowed, _ = order.shares(node, {})
        reports.append(
            QueueReport(
                name=name,
                parent=node.parent.name if node.parent else "",
                usage={k: v for k, v in node.total.items() if v},
                guarantee={k: v for k, v in node.guarantee.items() if v},
                max=dict(node.max),
                share=borrowed,
                admitted=sum(admitted.get(n, 0) for n in subtree),
                pending=sum(waiting.get(n, 0) for n in subtree),
            )
        )
    return tuple(reports)


def _descendants(node: QuotaNode) -> Iterator[QuotaNode]:
    yield node
    for child in node.children:
        yield from _descendants(child)
