"""Checks that rule preemption searches out or narrow them, without changing any state: the
fewest victims whose amounts could cover what is missing (by totals, by the room each pod
group lacks on the nodes, by quota), the victims that could make room alone, whether a search
trying candidates in order could clear a quota shortfall, which queues' usage could shrink a
shortfall (``Helping``), and the totals half of a fit check."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping, Sequence

from engine.cycle.jobs.model import AdmittedJob, PendingJob
from engine.cycle.placement.capacity import ClusterState
from engine.cycle.preemption.victims import VictimIndex
from engine.cycle.quota.tree import QuotaNode, QuotaTree

_UNLIMITED = 1 << 96  # more usage than any fleet has, in milli-units


def fewest_for_nodes(
    cluster: ClusterState,
    job: PendingJob,
    index: VictimIndex,
    eligible: Callable[[AdmittedJob], bool],
) -> int | None:
    """The fewest eligible victims whose pods, released, could give ``cluster``'s nodes room
    for every pod group of the job (a lower bound: each group is counted alone); None when
    all of them could not."""
    most = 0
    for shape, short in cluster.node_deficits(job.pods):
        got = count = 0
        for freed, victims in index.room_freers(cluster, shape):
            for victim in victims:
                if eligible(victim):
                    got += freed
                    count += 1
                    if got >= short:
                        break
            if got >= short:
                break
        else:
            return None
        most = max(most, count)
    return most


def alone(
    cluster: ClusterState,
    near: Sequence[AdmittedJob],
    job: PendingJob,
    index: VictimIndex,
    eligible: Callable[[AdmittedJob], bool],
) -> list[AdmittedJob]:
    """The victims of ``near`` (eligible ones on ``cluster``) that could make room for the job
    there alone: by totals, and for every pod group the nodes lack room for."""
    free, name = cluster.free, cluster.name
    missing = [(r, m) for r, v in job.demand.items() if (m := v - free.get(r, 0)) > 0]
    deficits = cluster.node_deficits(job.pods)
    pool: Sequence[AdmittedJob] = near
    if deficits:  # fewer to look at: those that alone make room for the first group short
        shape, short = deficits[0]
        pool = [
            v
            for freed, victims in index.room_freers(cluster, shape)
            if freed >= short
            for v in victims
            if eligible(v)
        ]
    return [
        v
        for v in pool
        if all(v.usage[name].get(r, 0) >= m for r, m in missing)
        and all(cluster.room_freed(v.pods[name], s) >= n for s, n in deficits[1:])
    ]


def could_clear(
    short: Mapping[str, int],
    candidates: Sequence[AdmittedJob],
    tried: int,
    most: Mapping[str, Mapping[str, int]] | None = None,
) -> bool:
    """Whether, for each resource of ``short``, the first ``tried`` candidates holding it hold
    that much of it, counting no more from a queue than ``most`` (queue → resource → the most
    taking its jobs may free) allows: taking a victim lowers a shortfall by at most its
    demand, so a search that tries candidates in this order, each while it holds something
    still short, cannot clear it otherwise."""
    for r, need in short.items():
        got = count = 0
        taken: dict[str, int] = {}
        for victim in candidates:
            if amount := victim.demand.get(r, 0):
                count += 1
                queue = victim.mapped.queue if most is not None else ""
                cap = most.get(queue, {}).get(r) if most is not None else None
                if cap is not None:
                    amount = min(amount, cap - taken.get(queue, 0))
                    taken[queue] = taken.get(queue, 0) + amount
                got += amount
                if got >= need or count >= tried:
                    break
        if got < need:
            return False
    return True


def fewest(missing: Mapping[str, int], amounts: Sequence[Mapping[str, int]]) -> int | None:
    """The fewest of ``amounts`` whose sum could cover ``missing`` in every resource, taking
    the largest first per resource (a lower bound); None when all of them do not."""
    return fewest_sorted(
        missing,
        {
            r: sorted((a for x in amounts if (a := x.get(r, 0)) > 0), reverse=True)
            for r, need in missing.items()
            if need > 0
        },
    )


def totals_fit(cluster: ClusterState, need: Mapping[str, int]) -> bool:
    """The cheap half of ``fits``: the totals (no cache is built for a trial's new state)."""
    free = cluster.free
    return all(v <= free.get(r, 0) for r, v in need.items())


def fewest_merged(
    missing: Mapping[str, int], amounts: Mapping[str, Sequence[Sequence[int]]], most: int
) -> int | None:
    """``fewest_sorted`` over several lists per resource (each largest first), counting no
    further than ``most``: ``most`` means that many or more."""
    fewest = 0
    for r, need in missing.items():
        if need <= 0:
            continue
        lists = amounts.get(r, ())
        if sum(sum(one) for one in lists) < need:
            return None
        got = count = 0
        for amount in heapq.merge(*lists, reverse=True):
            got += amount
            count += 1
            if got >= need or count >= most:
                break
        fewest = max(fewest, count)
    return fewest


def fewest_sorted(missing: Mapping[str, int], amounts: Mapping[str, Sequence[int]]) -> int | None:
    """``fewest`` with each resource's amounts given, largest first."""
    fewest = 0
    for r, need in missing.items():
        if need <= 0:
            continue
        got = count = 0
        for amount in amounts.get(r, ()):
            got += amount
            count += 1
            if got >= need:
                break
        if got < need:
            return None
        fewest = max(fewest, count)
    return fewest


class Helping:
    """Whether taking ``amount`` of usage away from the queue ``node`` raises ``leaf``'s room
    in a resource of ``short`` (as ``QuotaTree.room_without`` finds), asked for many queues.

    The leaf's room reads usage only on its own path and at the root. A queue whose path
    shares no queue with the leaf's reaches it only through what it passes up to the root;
    and the leaf's room, as a function of the usage taken away at the root, is of the form
    min(room + taken, limit), so it grows for any amount exactly when it grows for an
    unlimited one. Such a queue helps exactly when it passes some of a resource up to the
    root and the leaf's room in that resource grows with unlimited usage gone from the root:
    found once per resource. Other queues are measured with ``room_without``."""

    def __init__(self, quota: QuotaTree, leaf: QuotaNode, short: Mapping[str, int]) -> None:
        self.quota, self.leaf, self.short = quota, leaf, short
        self.path = frozenset(node.name for node in leaf.up)
        self._now: dict[str, int] | None = None  # the leaf's room now, once asked
        self._grows: dict[str, bool] | None = None

    def __call__(self, node: QuotaNode, amount: Mapping[str, int]) -> bool:
        if not self.path.isdisjoint([n.name for n in node.up]):
            after = self.quota.room_without(self.leaf, ((node, amount),), self.short)
            now = self._room()
            return any(after[r] > now[r] for r in self.short)
        grows = self._from_root()
        return any(grows[r] and passed_to_root(node, amount.get(r, 0), r) > 0 for r in self.short)

    def _room(self) -> dict[str, int]:
        if self._now is None:
            self._now = self.quota.room(self.leaf, self.short)
        return self._now

    def _from_root(self) -> dict[str, bool]:
        if self._grows is None:
            now = self._room()
            unlimited = dict.fromkeys(self.short, _UNLIMITED)
            after = self.quota.room_without(self.leaf, ((self.quota.root, unlimited),), self.short)
            self._grows = {r: after[r] > now[r] for r in self.short}
        return self._grows


def passed_to_root(node: QuotaNode, amount: int, resource: str) -> int:
    """How much less of ``resource`` the root would use with ``amount`` less used by the
    queue ``node``: each queue passes up no more than it uses beyond its guaranteed (as
    ``QuotaTree.remove`` and ``room_without`` do)."""
    while amount > 0 and node.parent is not None:
        amount = min(amount, node.usage[resource] - node.guaranteed[resource])
        node = node.parent
    return max(amount, 0)  # reached the root, or stopped on the way with nothing left
