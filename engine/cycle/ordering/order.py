"""Which job the cycle considers next: queue priority tiers, then progressive filling by
weighted dominant share, then FIFO within a queue.

At every level of the queue tree the children are compared by
``(-priority, borrowed share after the head job, usage share after the head job, name)``:
the share is Kueue's dominant resource share over what the queue uses above its guarantee,
divided by its weight, and the job counted is the one the child would admit next (Armada's
progressive filling). The usage share (same formula without subtracting the guarantee) breaks
ties between queues that are all within their guarantees. With fair sharing disabled, children
are compared by ``(-priority, head job's order key)``: one FIFO across queues of a tier.

With ``spec.ordering.lateAfter`` a job queued at or before ``late_since`` is late: its order key
becomes ``(-priority, True, enqueue time, uid)`` (``False`` for the others), so within a
priority the jobs that are not late go first, and a fair key gets the head's flag after the
queue priority: a queue whose next job is late goes after every queue whose next job is not.

Each inner node keeps a heap of its children keyed that way; admitting or skipping a job only
re-keys the nodes on its path to the root, so a pick costs O(depth × log(children)). A node
whose key comes out unchanged (same usage, head of the same demand) is not pushed again, and
passing over a head for a next job of the same demand and lateness, with the quota unchanged
since the order last keyed a path, re-keys nothing: every key on the path would come out the
same.
"""

from __future__ import annotations

import datetime as dt
import heapq
import math
import operator
from collections.abc import Mapping, Sequence
from typing import Any

from engine.cycle.jobs.model import PendingJob
from engine.cycle.quota.tree import ROOT, QuotaNode, QuotaTree

_ORDER_KEY = operator.attrgetter("order_key")


def late_key(key: tuple[Any, ...], queued: dt.datetime, late_since: dt.datetime | None) -> Any:
    """An order key ``(-priority, enqueue time, uid)`` with the late flag (see the module
    doc); ``key`` itself when lateness is not used."""
    if late_since is None:
        return key
    return (key[0], queued <= late_since, *key[1:])


class _Slot:
    __slots__ = (
        "best",
        "blocked",
        "heap",
        "index",
        "jobs",
        "key",
        "leaf",
        "memo",
        "memo_base",
        "memo_total",
        "node",
        "parent",
        "version",
    )

    def __init__(self, node: QuotaNode) -> None:
        self.node = node
        self.parent: _Slot | None = None
        self.leaf = not node.children
        self.jobs: list[PendingJob] = []
        self.index = 0
        self.blocked = False
        # (key, version, child): keys end with the child's name, and a child pushes a new entry
        # only under a new version, so entries never compare beyond the version
        self.heap: list[tuple[Any, int, _Slot]] = []
        self.version = 0
        self.key: Any = None
        self.best: _Slot | None = None  # inner node: the child whose head is next
        # fair keys by the head's demand (over the order's resources), valid for `memo_total`
        self.memo: dict[tuple[int, ...], tuple[Any, ...]] = {}
        self.memo_total: dict[str, int] | None = None
        # (memo_total, guarantee) over the order's resources
        self.memo_base: tuple[tuple[int, ...], tuple[int, ...]] = ((), ())


class QueueOrder:
    def __init__(
        self,
        quota: QuotaTree,
        jobs_by_leaf: Mapping[str, Sequence[PendingJob]],
        *,
        fair_sharing: bool,
        resources: Sequence[str],
        late_since: dt.datetime | None = None,
    ) -> None:
        self.quota = quota
        self.late_since = late_since
        self.fair = fair_sharing
        self.resources = tuple(r for r in resources if quota.capacity_of(r) > 0)
        self._capacities = tuple(quota.capacity_of(r) for r in self.resources)
        self._zeros = (0,) * len(self.resources)
        # the last demand turned into a tuple: a job is keyed on every level of its path in turn
        self._last: tuple[Mapping[str, int] | None, tuple[int, ...]] = (None, ())
        self.slots = {name: _Slot(node) for name, node in quota.nodes.items()}
        for slot in self.slots.values():
            if slot.node.parent is not None:
                slot.parent = self.slots[slot.node.parent.name]
        by = _ORDER_KEY if late_since is None else self.job_key
        for name, jobs in jobs_by_leaf.items():
            self.slots[name].jobs = sorted(jobs, key=by)
        self._build(self.slots[ROOT])
        self._keyed_at = quota.version  # the quota's version the last keyed path saw

    def _build(self, slot: _Slot) -> None:
        for child in slot.node.children:
            c = self.slots[child.name]
            self._build(c)
            if c.key is not None:
                slot.heap.append((c.key, c.version, c))
        heapq.heapify(slot.heap)
        self._refresh_best(slot)
        if slot.parent is not None:
            self._rekey(slot, push=False)

    def job_key(self, job: PendingJob) -> Any:
        """Where ``job`` goes among its queue's jobs."""
        if self.late_since is None:
            return job.order_key
        return late_key(job.order_key, job.enqueued_at, self.late_since)

    # --- picking -------------------------------------------------------------------------------
    def head(self, slot: _Slot) -> PendingJob | None:
        while not slot.leaf:
            if slot.best is None:
                return None
            slot = slot.best
        if slot.blocked or slot.index >= len(slot.jobs):
            return None
        return slot.jobs[slot.index]

    def next(self) -> tuple[str, PendingJob] | None:
        slot = self.slots[ROOT]
        while not slot.leaf:
            if slot.best is None:
                return None
            slot = slot.best
        job = self.head(slot)
        return (slot.node.name, job) if job is not None else None

    # --- changes -------------------------------------------------------------------------------
    def advance(self, leaf: str) -> None:
        """The leaf's head was decided (admitted or passed over): move to the next job."""
        slot = self.slots[leaf]
        slot.index = index = slot.index + 1
        if self.quota.version == self._keyed_at and self.fair and index < len(slot.jobs):
            # Keyed alike: a fair key reads only the node's usage, the head's demand and its
            # lateness. The cycle changes usage only on the path of the job it decides, and
            # that path is keyed again (``usage_changed``, ``advance``, ``block``) before any
            # other, so while the quota's version is the one the last keying saw, every key
            # is current.
            passed, job = slot.jobs[index - 1], slot.jobs[index]
            late = self.late_since
            if job.demand == passed.demand and (
                late is None or (job.enqueued_at <= late) == (passed.enqueued_at <= late)
            ):
                return
        self._update_path(slot)

    def block(self, leaf: str) -> list[PendingJob]:
        """StrictFIFO: the head stays; every job behind it waits. Returns those jobs."""
        slot = self.slots[leaf]
        slot.blocked = True
        behind = slot.jobs[slot.index + 1 :]
        self._update_path(slot)
        return behind

    def usage_changed(self, leaf: str) -> None:
        self._update_path(self.slots[leaf])

    def remaining(self, leaf: str) -> list[PendingJob]:
        slot = self.slots[leaf]
        return [] if slot.blocked else slot.jobs[slot.index :]

    def _update_path(self, slot: _Slot) -> None:
        """Re-key ``slot`` and its ancestors below the root (whose own key nothing compares)."""
        while (parent := slot.parent) is not None:
            self._rekey(slot)
            self._refresh_best(parent)
            slot = parent
        self._keyed_at = self.quota.version

    def _rekey(self, slot: _Slot, push: bool = True) -> None:
        job = self.head(slot)
        key = None if job is None else self._key(slot, job)
        if key == slot.key:
            # Same key: the parent's heap already holds it under the current version (an entry
            # is dropped only once stale), and keys end with the name, so the order is as if
            # it had been pushed again.
            return
        slot.version += 1
        slot.key = key
        if push and slot.parent is not None and key is not None:
            heapq.heappush(slot.parent.heap, (key, slot.version, slot))

    def _refresh_best(self, slot: _Slot) -> None:
        heap = slot.heap
        while heap:
            _, version, child = heap[0]
            if child.version == version and child.key is not None:
                slot.best = child
                return
            heapq.heappop(heap)
        slot.best = None

    # --- keys ----------------------------------------------------------------------------------
    def _key(self, slot: _Slot, job: PendingJob) -> tuple[Any, ...]:
        """The node's key with ``job`` as its head. A fair key is remembered per demand while
        the node's usage is the same: nothing else it depends on changes during a cycle."""
        node = slot.node
        if not self.fair:
            return (-node.priority, self.job_key(job), node.name)
        if node.total != slot.memo_total:
            slot.memo.clear()
            slot.memo_total = dict(node.total)
            slot.memo_base = (self._demand(node.total), self._demand(node.guarantee))
        last_amounts, demand = self._last
        if job.demand is not last_amounts:
            demand = self._demand(job.demand)
            self._last = (job.demand, demand)
        key = slot.memo.get(demand)
        if key is None:
            borrowed, used = self._shares(*slot.memo_base, node.weight, demand)
            key = slot.memo[demand] = (-node.priority, borrowed, used, node.name)
        if self.late_since is not None:
            return (key[0], job.enqueued_at <= self.late_since, *key[1:])
        return key

    def _demand(self, amounts: Mapping[str, int]) -> tuple[int, ...]:
        """``amounts`` over the order's resources."""
        return tuple(map(amounts.get, self.resources, self._zeros))

    def shares(self, node: QuotaNode, extra: Mapping[str, int]) -> tuple[float, float]:
        """(borrowed share, usage share) of ``node`` with ``extra`` added, divided by weight."""
        total, guarantee = self._demand(node.total), self._demand(node.guarantee)
        return self._shares(total, guarantee, node.weight, self._demand(extra))

    def _shares(
        self,
        total: tuple[int, ...],
        guarantee: tuple[int, ...],
        weight: float,
        extra: tuple[int, ...],
    ) -> tuple[float, float]:
        """``shares`` with the node's total and guarantee over the order's resources."""
        borrowed = used = 0.0
        for used_now, guaranteed, capacity, more in zip(
            total, guarantee, self._capacities, extra, strict=True
        ):
            amount = used_now + more
            if amount <= 0:
                continue
            share = amount / capacity
            if share > used:
                used = share
            above = amount - guaranteed
            if above > 0:
                share = above / capacity
                if share > borrowed:
                    borrowed = share
        if weight <= 0:
            return (math.inf if borrowed else 0.0, math.inf if used else 0.0)
        return borrowed / weight, used / weight
