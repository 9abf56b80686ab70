"""What preemption searches over: the admitted jobs that may be taken, indexed once per cycle;
the candidates of a quota shortfall grouped by queue (``Pool``); the quota updates a search
makes on trial (undone before it ends); the checks a victim must pass (its queue keeps its
guarantee). The bounds computed from them are in ``bounds.py``. Past 400 lines: the index
keeps per-cycle caches (borrowers, freeing, pools) that the quota updates on trial, and the
quota seen with the cycle's victims gone (``VictimIndex.gone``), must stay in step with."""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Protocol

from engine import vectors
from engine.cycle.jobs.model import AdmittedJob, PendingJob, PodGroup
from engine.cycle.jobs.reading import pod_key
from engine.cycle.placement.capacity import ClusterState
from engine.cycle.quota.tree import QuotaNode, QuotaTree
from engine.vectors import Vec


@dataclass(frozen=True, slots=True)
class Pool:
    """The victims that could be taken out of quota for jobs of one kind (queue, priority,
    resources needed and short of, reclaimed queues), and the most taking them could do."""

    queues: tuple[tuple[QuotaNode, tuple[AdmittedJob, ...], Vec], ...]  # (queue, victims, most)
    room: Vec  # per resource needed, what the job's queue could take with all of them gone
    # per resource short of, each queue's amounts of it, largest first
    amounts: Mapping[str, tuple[tuple[int, ...], ...]]


def victim_order(victim: AdmittedJob, lost: float = 0.0) -> tuple:
    """Lowest priority first, then the least work lost (``protection.work_lost``), the most
    recently admitted, the uid."""
    return (victim.mapped.priority, lost, -victim.admitted_at.timestamp(), victim.binding.uid)


class VictimIndex:
    """The cycle's admitted jobs that may be preempted, in victim order, by queue and cluster.
    Built once per cycle; ``take`` removes the victims of each decided preemption."""

    def __init__(
        self, admitted: Iterable[AdmittedJob], lost: Callable[[AdmittedJob], float] | None = None
    ) -> None:
        jobs = [j for j in admitted if j.usage]
        # binding ref → the work the job would lose (``protection.work_lost``; 0 unknown)
        self.lost_of = {j.ref: lost(j) for j in jobs} if lost is not None else {}
        self._index(sorted(jobs, key=lambda j: victim_order(j, self.lost(j))))

    @classmethod
    def ordered(cls, order: list[AdmittedJob], lost_of: dict[str, float]) -> VictimIndex:
        """The index of victims already in victim order, each using something, with the work
        each would lose by binding ref (``candidates.Candidates.ordered``)."""
        index = cls.__new__(cls)
        index.lost_of = lost_of
        index._index(order)
        return index

    def _index(self, order: list[AdmittedJob]) -> None:
        self.order = order
        self.rank = {v.ref: i for i, v in enumerate(self.order)}
        self.by_queue: dict[str, list[AdmittedJob]] = {}
        self.on_cluster: dict[str, list[AdmittedJob]] = {}
        for victim in self.order:
            self.by_queue.setdefault(victim.mapped.queue, []).append(victim)
            for name in victim.usage:
                self.on_cluster.setdefault(name, []).append(victim)
        self.taken: set[str] = set()
        self._taken_of: dict[str, list[AdmittedJob]] = {}  # queue → its victims taken
        self._taken_sum: dict[str, Vec] = {}  # queue → its taken victims' demand, summed
        # queue → (its victims' priorities, in order; their demand summed over each prefix)
        self._sums: dict[str, tuple[list[int], list[Vec]]] = {}
        # resources → (borrowing queues, [length of ``quota.touched`` seen, them frozen])
        self._borrowers: dict[tuple[str, ...], tuple[set[str], list]] = {}
        self._freeing: dict[tuple, tuple[tuple, list[AdmittedJob], Vec, dict]] = {}
        self.pools: dict[tuple, tuple[tuple[int, int], Pool]] = {}  # kept by ``Search.pool``
        self._room_freers: dict[tuple[str, tuple[int, ...]], list] = {}
        self._queues_on: dict[str, frozenset[str]] = {}
        self._alike_on: dict[str, list[tuple[Sequence[PodGroup], list[AdmittedJob]]]] = {}

    def lost(self, victim: AdmittedJob) -> float:
        return self.lost_of.get(victim.ref, 0.0)

    def queues_on(self, cluster: str) -> frozenset[str]:
        """The queues with victims running on ``cluster`` (taken ones included)."""
        found = self._queues_on.get(cluster)
        if found is None:
            found = frozenset(v.mapped.queue for v in self.on_cluster.get(cluster, ()))
            self._queues_on[cluster] = found
        return found

    def take(self, victims: Iterable[AdmittedJob]) -> None:
        for v in victims:
            self.taken.add(v.ref)
            self._taken_of.setdefault(v.mapped.queue, []).append(v)
            vectors.add_into(self._taken_sum.setdefault(v.mapped.queue, {}), v.demand)

    @contextmanager
    def gone(self, quota: QuotaTree) -> Iterator[None]:
        """The quota as it will be once the victims taken this cycle have left, for a later
        search. They count until they terminate, and each preemptor's demand is held on top of
        them so that no later job takes what it will need; a later search would otherwise pay
        for that room again, and judge the borrowers' guarantees by usage they are losing."""
        if not self.taken:
            yield
            return
        entries = [
            (owner, amount)
            for queue, amount in self._taken_sum.items()
            if (owner := quota.node(queue)) is not None
        ]
        with quota.apart(entries, len(self.taken)):  # taken only grows
            yield

    def below(self, queue: str, priority: int) -> Vec:
        """The summed demand of the victims of ``queue`` not taken yet whose priority is
        below ``priority``: all that a job of that priority may preempt within its queue."""
        sums = self._sums.get(queue)
        if sums is None:
            priorities, summed = [], [{}]
            for v in self.by_queue.get(queue, ()):  # in victim order: priority ascending
                priorities.append(v.mapped.priority)
                summed.append(vectors.add(summed[-1], v.demand))
            sums = self._sums[queue] = (priorities, summed)
        found = dict(sums[1][bisect.bisect_left(sums[0], priority)])
        for v in self._taken_of.get(queue, ()):
            if v.mapped.priority < priority:
                vectors.add_into(found, v.demand, -1)
        return found

    def freeing(
        self, node: QuotaNode, short: tuple[str, ...], needs: tuple[str, ...] | None
    ) -> tuple[tuple[AdmittedJob, ...], Vec, dict[str, tuple[int, ...]]]:
        """Victims of the queue ``node`` not taken yet that hold one of ``short``, the most
        taking them could free (their total demand), and per resource of ``short`` their
        amounts of it, largest first. With ``needs`` (reclaim), only those whose queue stays
        at its guarantee in ``needs`` without them, and the most in each of ``needs`` no more
        than the queue has above its guarantee. Kept while the taken victims and the queue's
        usage of ``needs`` do not change (searches change usage on trial and put it back):
        callers only read what is returned."""
        key = (node.name, short, needs)
        total = node.total
        stamp = (len(self.taken), tuple([total.get(r, 0) for r in needs]) if needs else ())
        kept = self._freeing.get(key)
        if kept is None or kept[0] != stamp:
            found = [
                v
                for v in self.by_queue.get(node.name, ())
                if v.ref not in self.taken
                and any(v.demand.get(r, 0) for r in short)
                and (needs is None or stays_at_guarantee(node, v.demand, needs))
            ]
            most = vectors.total((v.demand, 1) for v in found)
            for r in needs or ():  # a reclaimed queue keeps its guarantee
                above = max(0, total.get(r, 0) - node.guarantee.get(r, 0))
                most[r] = min(most.get(r, 0), above)
            kept = (stamp, tuple(found), most, largest(found, short))
            self._freeing[key] = kept
        return kept[1], kept[2], kept[3]

    def room_freers(
        self, cluster: ClusterState, shape: tuple[int, ...]
    ) -> list[tuple[int, list[AdmittedJob]]]:
        """(pods of ``shape`` a victim's release makes room for, the victims on ``cluster``
        that make that much room, in victim order), most room first, for the victims that
        make room for any; taken ones included (callers skip them)."""
        key = (cluster.name, shape)
        found = self._room_freers.get(key)
        if found is None:
            alike = self._alike(cluster.name)
            freed = cluster.rooms_freed([pods for pods, _ in alike], shape)
            found = sorted(
                ((f, victims) for f, (_, victims) in zip(freed, alike, strict=True) if f),
                key=lambda x: -x[0],
            )
            self._room_freers[key] = found
        return found

    def _alike(self, cluster: str) -> list[tuple[Sequence[PodGroup], list[AdmittedJob]]]:
        """The victims on ``cluster`` grouped by the pods they run there (each group in victim
        order, groups in the order of their first victim): release frees the same for all."""
        found = self._alike_on.get(cluster)
        if found is None:
            groups: dict[tuple, tuple[Sequence[PodGroup], list[AdmittedJob]]] = {}
            for v in self.on_cluster.get(cluster, ()):
                pods = v.pods[cluster]
                groups.setdefault(pod_key(pods), (pods, []))[1].append(v)
            found = self._alike_on[cluster] = list(groups.values())
        return found

    def borrowers(self, quota: QuotaTree, resources: tuple[str, ...]) -> frozenset[str]:
        """Queues with victims that use more than their guarantee of one of ``resources``.
        Whether a queue borrows depends on its own usage only: after the first call, only
        the queues the quota touched since are looked at again."""
        kept = self._borrowers.get(resources)
        touched = quota.touched
        if kept is None:
            found = {
                name
                for name in self.by_queue
                if (node := quota.node(name)) is not None and quota.borrowing(node, resources)
            }
            kept = self._borrowers[resources] = (found, [len(touched), frozenset(found)])
        found, seen = kept
        if seen[0] != len(touched):
            for name in set(touched[seen[0] :]):
                node = quota.node(name)
                if name not in self.by_queue or node is None:
                    continue
                if quota.borrowing(node, resources):
                    found.add(name)
                else:
                    found.discard(name)
            seen[:] = [len(touched), frozenset(found)]
        return seen[1]


class Taking:
    """Victims taken out of quota during one trial. A reclaimed queue keeps its guarantee
    (``keeps_guarantee``); the job's shortfall (``short``) is measured again only once the
    victims taken since could cover it, as taking usage away lowers it by at most that much.
    The caller puts ``out`` back when the trial ends."""

    def __init__(
        self,
        quota: QuotaTree,
        job: PendingJob,
        leaf: QuotaNode,
        guarded: Mapping[str, tuple[str, ...]],
        short: Mapping[str, int],
    ) -> None:
        self.quota, self.job, self.leaf = quota, job, leaf
        self.guarded = guarded  # reclaimed queue → the resources it keeps its guarantee of
        self.short = dict(short)
        self.out: dict[str, tuple[QuotaNode, Mapping[str, int]]] = {}  # taken out of quota
        self._waiting: list[tuple[str, QuotaNode, Mapping[str, int]]] = []  # taken, not yet out
        self._freed: dict[str, int] = {}  # of the shortfall's resources, by the waiting victims
        # reclaimed queue → demand taken and not yet out of quota (``settle``)
        self._taken_from: dict[str, dict[str, int]] = {}

    def take(self, victim: AdmittedJob) -> bool:
        """Take ``victim`` (False: its queue is reclaimed and would fall below its guarantee)."""
        quota, queue = self.quota, victim.mapped.queue
        owner = quota.node(queue)
        guarded = self.guarded.get(queue)
        if guarded is not None:
            if owner is None or not keeps_guarantee(owner, victim, guarded, self._taken_from):
                return False
            vectors.add_into(self._taken_from.setdefault(queue, {}), victim.demand)
        if owner is None:
            return True
        self._waiting.append((victim.ref, owner, victim.demand))
        short = self.short
        if short:
            freed = self._freed
            for r in short:
                freed[r] = freed.get(r, 0) + victim.demand.get(r, 0)
            if all(freed[r] >= v for r, v in short.items()):
                self.settle()
                self.short = quota.deficit(self.leaf, self.job.demand)
                self._freed = {}
        return True

    def settle(self) -> None:
        """Take every victim taken so far out of quota. Their queues' usage now shows them
        gone, so what was taken from reclaimed queues is counted from here on."""
        take_out(self.quota, self._waiting, self.out)
        self._taken_from = {}


def take_out(
    quota: QuotaTree,
    waiting: list[tuple[str, QuotaNode, Mapping[str, int]]],
    out: dict[str, tuple[QuotaNode, Mapping[str, int]]],
) -> None:
    """Take the waiting victims out of quota, one update per queue (the quota's state depends
    only on each queue's usage); ``out`` records each of them, and ``waiting`` is emptied."""
    update(quota, ((owner, demand) for _, owner, demand in waiting), quota.remove)
    for ref, owner, demand in waiting:
        out[ref] = (owner, demand)
    waiting.clear()


def put_back(quota: QuotaTree, entries: Iterable[tuple[QuotaNode, Mapping[str, int]]]) -> None:
    update(quota, entries, quota.add)


def update(
    quota: QuotaTree,
    entries: Iterable[tuple[QuotaNode, Mapping[str, int]]],
    apply: Callable[[QuotaNode, Mapping[str, int]], None],
) -> None:
    summed: dict[str, tuple[QuotaNode, dict[str, int]]] = {}
    for owner, demand in entries:
        vectors.add_into(summed.setdefault(owner.name, (owner, {}))[1], demand)
    for owner, amount in summed.values():
        apply(owner, amount)


def stays_at_guarantee(owner: QuotaNode, demand: Mapping[str, int], needs: Sequence[str]) -> bool:
    """Whether ``owner`` keeps its guarantee in each of ``needs`` that ``demand`` holds when
    ``demand`` is taken away (``keeps_guarantee`` for a first victim)."""
    total, guarantee = owner.total, owner.guarantee
    for r in needs:
        taken = demand.get(r, 0)
        if taken and total.get(r, 0) - taken < guarantee.get(r, 0):
            return False
    return True


def keeps_guarantee(
    owner: QuotaNode,
    victim: AdmittedJob,
    guarded: Sequence[str],
    taken_from: Mapping[str, Mapping[str, int]],
) -> bool:
    """Whether taking ``victim`` too leaves its queue at or above its guarantee in each of
    ``guarded`` (the resources the preemptor is short of) that the taken jobs hold."""
    before = taken_from.get(owner.name)
    taken = vectors.total([(before, 1), (victim.demand, 1)]) if before else victim.demand
    return stays_at_guarantee(owner, taken, guarded)


def reclaimable(
    quota: QuotaTree,
    leaf: QuotaNode,
    demand: Mapping[str, int],
    needs: tuple[str, ...],
    short: Mapping[str, int],
    index: VictimIndex,
) -> dict[str, tuple[str, ...]]:
    """The queues a job of ``leaf`` may reclaim from, each with the resources it keeps its
    guarantee of: the resources the job is short of.

    Short of quota: the resources of ``short``. The job must fit its queue's guarantee in
    them, and a queue is reclaimed when it borrows in one of them; that taking a victim puts
    its queue further below its guarantee of anything else (cpu and memory beside borrowed
    GPUs, typically) does not count, as in Kueue, which looks at the resources the preemptor
    needs preemption for. Short of room only: each resource the job needs that the queue
    borrows now (it may give up what it borrows, not what it is guaranteed).
    """
    contested = tuple(r for r in needs if short.get(r, 0))
    if not quota.within_guarantee(leaf, {r: demand[r] for r in contested or needs}):
        return {}
    if contested:
        return dict.fromkeys(sorted(index.borrowers(quota, contested) - {leaf.name}), contested)
    found = {}
    for name in sorted(index.borrowers(quota, needs) - {leaf.name}):
        node = quota.node(name)
        if node is not None:
            found[name] = tuple(r for r in needs if quota.borrowing(node, (r,)))
    return found


def merged(
    first: Sequence[AdmittedJob],
    second: Sequence[AdmittedJob],
    key: Callable[[AdmittedJob], tuple[int, int]],
) -> list[AdmittedJob]:
    """Both lists (each already in ``key`` order) as one, without duplicates."""
    if not second:
        return list(first)
    seen: set[str] = set()
    out: list[AdmittedJob] = []
    for victim in sorted([*first, *second], key=key):
        if victim.ref not in seen:
            seen.add(victim.ref)
            out.append(victim)
    return out


class Asking(Protocol):
    """What a preemption search tells ``make_pool`` (``preemption.Search``)."""

    index: VictimIndex
    quota: QuotaTree
    leaf: QuotaNode
    owners: frozenset[str]  # queues it may reclaim from
    needs: tuple[str, ...]  # quota resources the job needs

    def eligible(self, victim: AdmittedJob) -> bool: ...

    def guarded(self, queue: str) -> tuple[str, ...]: ...


def make_pool(search: Asking, short: tuple[str, ...]) -> Pool:
    """``Search.pool``: the reclaimed queues' victims and the job's own queue's eligible
    ones that hold one of ``short``, grouped by queue, with what taking them could do."""
    index, quota, leaf, needs = search.index, search.quota, search.leaf, search.needs
    queues = []
    amounts: dict[str, list[tuple[int, ...]]] = {r: [] for r in short}
    for q in sorted(search.owners | {leaf.name}):
        node = quota.node(q)
        if node is None:
            continue
        reclaim = q in search.owners
        victims, most, held = index.freeing(node, short, search.guarded(q) if reclaim else None)
        if not reclaim:
            victims = tuple(v for v in victims if search.eligible(v))
            most = vectors.total((v.demand, 1) for v in victims)
            held = largest(victims, short)
        if not victims:
            continue
        queues.append((node, victims, most))
        for r in short:
            amounts[r].append(held[r])
    room = quota.room_without(leaf, [(node, most) for node, _, most in queues], needs)
    return Pool(tuple(queues), room, {r: tuple(lists) for r, lists in amounts.items()})


def largest(victims: Sequence[AdmittedJob], resources: Iterable[str]) -> dict[str, tuple[int, ...]]:
    """Per resource, the victims' amounts of it (those that hold any), largest first."""
    return {
        r: tuple(sorted((a for v in victims if (a := v.demand.get(r, 0))), reverse=True))
        for r in resources
    }
