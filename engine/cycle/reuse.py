"""A cycle that reuses the last one's decisions when only a few waiting jobs changed: ``rerun``.

A reconciler pass that events alone asked for (no resync, no deadline) may decide as of the
last cycle's time: what time alone changes is what the resync and deadline passes are for.
Then most of a cycle is known already. When the last cycle was **still** (it admitted,
preempted and held nothing, so every job was decided against the state the cycle began
with) and **plain** (no pending job declares dependencies or may be in a group), and the new
snapshot holds the same admitted jobs, clusters, PriorityClasses, Namespaces, policies and
estimates, then in a full cycle on it at that time:

- every job that did not change sees that same state at its turn, as long as no changed job
  before it changes the state, and so gets its last decision again (a job's message names no
  other job here but a StrictFIFO head);
- a changed or new job, decided against that state, is the only one that might change it.

A victim search is the one exception to "a job sees only the state": it runs once per queue per
cycle, for the first job that reaches a target cluster, and a job of a shape whose search found
nobody does not search again. So a job that had its search (``Ran.searchers``) must not change
or leave: another would search in its place. Each changed job searches on its own here, as if
first: if none finds victims, none does in the full cycle, whichever comes first there.

So ``rerun`` reads the jobs, decides only those that changed (new job objects: the JobCache
keeps a job's object while nothing it was read from changed), and keeps every other decision.
It gives up (None: run the full cycle) when one of them could change more than its own
decision:

- it is admitted, preempts or holds room (the state changes for the jobs after it);
- it becomes a StrictFIFO queue's head, or was its head (the jobs behind a head name it; a
  job behind the head stays behind it, and one before it that is rejected changes nothing);
- it had a victim search in the last cycle (above), it is nominated by its preemption (it is
  tried before any head blocks its queue), or it is old enough for a reservation's turn
  (``reservations.after``: it goes first, and may hold room);
- more than ``LIMIT`` jobs changed.

The result's decisions are those of ``run_cycle`` on the same snapshot and time, binding for
binding, with positions and queue reports recomputed; their order differs (the jobs decided
again come last). tests/cycle/test_reuse.py checks it against full cycles.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from engine import annotations as ann
from engine.cycle import explain, reservations
from engine.cycle.cycle import FullCycle
from engine.cycle.jobs.cache import JobCache
from engine.cycle.jobs.model import PendingJob
from engine.cycle.model import CycleResult
from engine.cycle.reasons import NEVER
from engine.fleet.model import Snapshot
from engine.policy.policyset import PolicySet

LIMIT = 16
"""Changed jobs a rerun decides again; beyond, a full cycle costs about as much."""

_FIXED = ("clusters", "policies", "priority_classes", "hyperjobs", "estimates", "namespaces")
"""The parts of the snapshot that must be those of the last cycle (kept as the same objects
while nothing in them changed: ``engine.fleet.live``)."""


@dataclass(frozen=True, slots=True)
class Ran:
    """A cycle that ran, and what a rerun needs of it."""

    cycle: FullCycle
    result: CycleResult
    still: bool  # it admitted, preempted and held nothing
    plain: bool  # no pending job declares dependencies or may be in a group
    searchers: frozenset[str]  # the jobs (refs) that had their queue's victim search


def run_kept(
    snapshot: Snapshot, policies: PolicySet, now: dt.datetime, cache: JobCache | None = None
) -> Ran:
    """``run_cycle``, keeping what a later ``rerun`` needs."""
    cycle = FullCycle(snapshot, policies, now, cache)
    start = cycle.quota.version
    result = cycle.run()
    still = cycle.quota.version == start and not cycle.holds
    plain = not (cycle.units or cycle.group_states) and _plain(cycle.pending)
    return Ran(cycle, result, still, plain, _searchers(cycle))


def rerun(last: Ran, snapshot: Snapshot, policies: PolicySet, cache: JobCache) -> Ran | None:
    """The cycle on ``snapshot`` at ``last``'s time, deciding only the jobs that changed since
    ``last`` (see the module doc); None when a full cycle is needed."""
    before = last.cycle
    if not (last.still and last.plain) or policies is not before.policies:
        return None
    if not all(_alike(getattr(snapshot, p), getattr(before.snapshot, p)) for p in _FIXED):
        return None
    cycle = FullCycle(snapshot, policies, before.now, cache)
    if not _same(cycle.admitted, before.admitted):
        return None
    changed, dropped = _changes(before.pending, cycle.pending)
    if changed is None or not _plain(changed):
        return None
    olds = [before_job for before_job in before.pending if before_job.ref in dropped]
    heads = (head.ref for head in before.blocked.values())
    if not _quiet(cycle, [*changed, *olds], last.searchers, heads):
        return None
    start = cycle.quota.version
    cycle.blocked = dict(before.blocked)
    cycle.order = cycle._queue_order({})  # its keys; for the queue reports: nobody takes a turn
    searchers = set(last.searchers)
    for job in changed:  # as the full cycle's turn: screened, then quota, placement, preemption
        # each searches on its own, as if first in its queue: if none finds victims, none
        # does in the full cycle either, whichever of them comes first there
        cycle.searched, cycle.no_victims = {}, {}
        cycle.missed.reset(start)
        if not _decide(cycle, job):
            return None
        searchers |= _searchers(cycle)
    if cycle.quota.version != start or cycle.holds:
        return None
    kept = last.result.decisions[len(before.backoff) :]  # with their positions
    cycle.decisions = [d for d in kept if d.binding not in dropped] + cycle.decisions
    cycle.waiting = _waiting(before, cycle, dropped, {job.mapped.queue for job in olds})
    moved = {job.mapped.queue for job in [*changed, *olds]}
    moved |= {b.mapped.queue for b in [*before.backoff, *cycle.backoff] if b.mapped is not None}
    places = cycle.places()  # positions change only in the queues where a job changed
    decisions = [explain.for_backoff(b) for b in cycle.backoff] + cycle.decisions
    decisions = explain.with_positions(
        decisions, {q: places[q] for q in moved if q in places}, every_queue=True
    )
    return Ran(cycle, cycle.explained(decisions), True, True, frozenset(searchers))


def _decide(cycle: FullCycle, job: PendingJob) -> bool:
    """``job``'s decision as in the full cycle, given the state never changes before its turn;
    False when it would be a StrictFIFO queue's new head (the jobs behind it would wait for
    it instead), or its queue's head may have taken a reservation's turn."""
    problem = cycle._screen(job)
    if problem is not None:
        cycle._decide(job, *problem)
        return True
    queue, order = job.mapped.queue, cycle.order
    head = cycle.blocked.get(queue)
    if head is not None and cycle.policies.scheduling.reservations:
        return False  # a head that took a reservation's turn blocks the jobs before it too
    if head is not None and order is not None and order.job_key(head) < order.job_key(job):
        cycle._block((job,), head)  # behind the head: never considered
        return True
    cycle._consider(job, cycle.quota.nodes[queue])
    return not cycle._strict(queue) or cycle.decisions[-1].reason in NEVER


def _searchers(cycle: FullCycle) -> frozenset[str]:
    """The jobs whose victim search ran (it found nobody in a still cycle): later jobs of
    their queue, or of their shape, skipped theirs."""
    return frozenset(cycle.searched.values()) | frozenset(cycle.no_victims.values())


def _plain(jobs: Iterable[PendingJob]) -> bool:
    return not any(job.depends or job.grouped for job in jobs)


def _alike(this: object, that: object) -> bool:
    return this is that or this == that


def _same(these: Sequence[object], those: Sequence[object]) -> bool:
    """Whether two lists hold the very same objects, in order."""
    return len(these) == len(those) and all(a is b for a, b in zip(these, those, strict=True))


def _changes(
    before: Sequence[PendingJob], now: Sequence[PendingJob]
) -> tuple[list[PendingJob] | None, set[str]]:
    """The pending jobs that are new objects in ``now`` (both sorted by ref), and the refs of
    the jobs of ``before`` they replace or that are gone; None beyond ``LIMIT``."""
    changed: list[PendingJob] = []
    dropped: set[str] = set()
    i = j = 0
    while i < len(before) or j < len(now):
        old = before[i] if i < len(before) else None
        new = now[j] if j < len(now) else None
        if old is not None and new is not None and old is new:
            i, j = i + 1, j + 1
            continue
        if new is None or (old is not None and old.ref < new.ref):
            dropped.add(old.ref)  # type: ignore[union-attr]
            i += 1
        elif old is None or new.ref < old.ref:
            changed.append(new)
            j += 1
        else:  # the same binding, read anew
            dropped.add(old.ref)
            changed.append(new)
            i, j = i + 1, j + 1
        if len(changed) + len(dropped) > 2 * LIMIT:
            return None, dropped
    if len(changed) > LIMIT:
        return None, dropped
    return changed, dropped


def _quiet(
    cycle: FullCycle, jobs: Iterable[PendingJob], searchers: frozenset[str], heads: Iterable[str]
) -> bool:
    """Whether none of ``jobs`` (the changed ones, as now and as before) was a StrictFIFO
    queue's blocked head (one of ``heads``), had a victim search (one of ``searchers``), is
    nominated by its preemption (it is tried before any head blocks its queue) or is old enough
    for a reservation's turn."""
    policy = cycle.policies.scheduling.reservations
    skip = {*heads, *searchers}
    for job in jobs:
        if job.ref in skip or job.binding.annotations.get(ann.NOMINATED_CLUSTER):
            return False
        if policy and reservations.starving([job], policy, cycle.now):
            return False
    return True


def _waiting(
    before: FullCycle, cycle: FullCycle, dropped: set[str], queues: set[str]
) -> defaultdict[str, list[tuple[str, tuple]]]:
    """The last cycle's waiting jobs by queue without ``dropped`` (in ``queues``), with the
    jobs decided now: lists of the last cycle are copied before any change."""
    waiting: defaultdict[str, list[tuple[str, tuple]]] = defaultdict(list, before.waiting)
    for queue in queues & waiting.keys():
        waiting[queue] = [entry for entry in waiting[queue] if entry[0] not in dropped]
    for queue, entries in cycle.waiting.items():
        waiting[queue] = [*waiting.get(queue, ()), *entries]
    return waiting
