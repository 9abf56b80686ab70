"""Which job the cycle considers next: queue priority tiers, then progressive filling by
weighted dominant share, then FIFO within a queue.

At every level of the queue tree the children are compared by
``(-priority, borrowed share after the head job, usage share after the head job, name)``:
the share is Kueue's dominant resource share over what the queue uses above its guarantee,
divided by its weight, and the job counted is the one the child would admit next (Armada's
progressive filling). The usage share (same formula without subtracting the guarantee) breaks
ties between queues that are all within their guarantees. With fair sharing disabled, children
are compared by ``(-priority, head job's order key)``: one FIFO across queues of a tier.

Each inner node keeps a heap of its children keyed that way; admitting or skipping a job only
re-keys the nodes on its path to the root, so a pick costs O(depth × log(children)).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping, Sequence
from typing import Any

from engine.cycle.jobs import PendingJob
from engine.cycle.quota import ROOT, QuotaNode, QuotaTree


class _Slot:
    __slots__ = ("best", "blocked", "heap", "index", "jobs", "key", "node", "version")

    def __init__(self, node: QuotaNode) -> None:
        self.node = node
        self.jobs: list[PendingJob] = []
        self.index = 0
        self.blocked = False
        self.heap: list[tuple[Any, int, str]] = []
        self.version = 0
        self.key: Any = None
        self.best: _Slot | None = None  # inner node: the child whose head is next


class QueueOrder:
    def __init__(
        self,
        quota: QuotaTree,
        jobs_by_leaf: Mapping[str, Sequence[PendingJob]],
        *,
        fair_sharing: bool,
        resources: Sequence[str],
    ) -> None:
        self.quota = quota
        self.fair = fair_sharing
        self.resources = tuple(r for r in resources if quota.capacity_of(r) > 0)
        self.slots = {name: _Slot(node) for name, node in quota.nodes.items()}
        for name, jobs in jobs_by_leaf.items():
            self.slots[name].jobs = sorted(jobs, key=lambda j: j.order_key)
        self._build(self.slots[ROOT])

    def _build(self, slot: _Slot) -> None:
        for child in slot.node.children:
            c = self.slots[child.name]
            self._build(c)
            if c.key is not None:
                slot.heap.append((c.key, c.version, c.node.name))
        heapq.heapify(slot.heap)
        self._refresh_best(slot)
        self._rekey(slot, push=False)

    # --- picking -------------------------------------------------------------------------------
    def head(self, slot: _Slot) -> PendingJob | None:
        if slot.node.children:
            return self.head(slot.best) if slot.best is not None else None
        if slot.blocked or slot.index >= len(slot.jobs):
            return None
        return slot.jobs[slot.index]

    def next(self) -> tuple[str, PendingJob] | None:
        slot = self.slots[ROOT]
        while slot.node.children:
            if slot.best is None:
                return None
            slot = slot.best
        job = self.head(slot)
        return (slot.node.name, job) if job is not None else None

    # --- changes -------------------------------------------------------------------------------
    def advance(self, leaf: str) -> None:
        """The leaf's head was decided (admitted or passed over): move to the next job."""
        self.slots[leaf].index += 1
        self._update_path(leaf)

    def block(self, leaf: str) -> list[PendingJob]:
        """StrictFIFO: the head stays; every job behind it waits. Returns those jobs."""
        slot = self.slots[leaf]
        slot.blocked = True
        behind = slot.jobs[slot.index + 1 :]
        self._update_path(leaf)
        return behind

    def usage_changed(self, leaf: str) -> None:
        self._update_path(leaf)

    def remaining(self, leaf: str) -> list[PendingJob]:
        slot = self.slots[leaf]
        return [] if slot.blocked else slot.jobs[slot.index :]

    def _update_path(self, name: str) -> None:
        slot = self.slots[name]
        while True:
            self._rekey(slot)
            parent = slot.node.parent
            if parent is None:
                return
            slot = self.slots[parent.name]
            self._refresh_best(slot)

    def _rekey(self, slot: _Slot, push: bool = True) -> None:
        job = self.head(slot)
        slot.version += 1
        slot.key = None if job is None else self._key(slot.node, job)
        parent = slot.node.parent
        if push and parent is not None and slot.key is not None:
            heapq.heappush(self.slots[parent.name].heap, (slot.key, slot.version, slot.node.name))

    def _refresh_best(self, slot: _Slot) -> None:
        heap = slot.heap
        while heap:
            _, version, name = heap[0]
            child = self.slots[name]
            if child.version == version and child.key is not None:
                slot.best = child
                return
            heapq.heappop(heap)
        slot.best = None

    # --- keys ----------------------------------------------------------------------------------
    def _key(self, node: QuotaNode, job: PendingJob) -> tuple[Any, ...]:
        if not self.fair:
            return (-node.priority, job.order_key, node.name)
        borrowed, used = self.shares(node, job.demand)
        return (-node.priority, borrowed, used, node.name)

    def shares(self, node: QuotaNode, extra: Mapping[str, int]) -> tuple[float, float]:
        """(borrowed share, usage share) of ``node`` with ``extra`` added, divided by weight."""
        borrowed = used = 0.0
        total, guarantee = node.total, node.guarantee
        for r in self.resources:
            amount = total.get(r, 0) + extra.get(r, 0)
            if amount <= 0:
                continue
            capacity = self.quota.capacity_of(r)
            used = max(used, amount / capacity)
            above = amount - guarantee.get(r, 0)
            if above > 0:
                borrowed = max(borrowed, above / capacity)
        if node.weight <= 0:
            return (math.inf if borrowed else 0.0, math.inf if used else 0.0)
        return borrowed / node.weight, used / node.weight
