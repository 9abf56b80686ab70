"""What preemption searches over: the admitted jobs that may be taken, indexed once per cycle;
the quota updates a search makes on trial (undone before it ends); the checks a victim must
pass (its queue keeps its guarantee) and the bounds that rule searches out (the fewest
victims that could cover what is missing, room with every candidate gone)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from engine.cycle import vectors
from engine.cycle.capacity import ClusterState
from engine.cycle.jobs import AdmittedJob, PendingJob, PodGroup, pod_key
from engine.cycle.quota import QuotaNode, QuotaTree
from engine.cycle.vectors import Vec


@dataclass(frozen=True, slots=True)
class Pool:
    """The victims that could be taken out of quota for jobs of one kind (queue, priority,
    resources needed and short of, reclaimed queues), and the most taking them could do."""

    queues: tuple[tuple[QuotaNode, tuple[AdmittedJob, ...], Vec], ...]  # (queue, victims, most)
    room: Vec  # per resource needed, what the job's queue could take with all of them gone
    amounts: Mapping[str, tuple[int, ...]]  # per resource short of, largest first


def victim_order(victim: AdmittedJob) -> tuple:
    return (victim.mapped.priority, -victim.admitted_at.timestamp(), victim.binding.uid)


class VictimIndex:
    """The cycle's admitted jobs that may be preempted, in victim order, by queue and cluster.
    Built once per cycle; ``take`` removes the victims of each decided preemption."""

    def __init__(self, admitted: Iterable[AdmittedJob]) -> None:
        self.order = sorted((j for j in admitted if j.usage), key=victim_order)
        self.rank = {v.ref: i for i, v in enumerate(self.order)}
        self.by_queue: dict[str, list[AdmittedJob]] = {}
        self.on_cluster: dict[str, list[AdmittedJob]] = {}
        for victim in self.order:
            self.by_queue.setdefault(victim.mapped.queue, []).append(victim)
            for name in victim.usage:
                self.on_cluster.setdefault(name, []).append(victim)
        self.taken: set[str] = set()
        # resources → (borrowing queues, [length of ``quota.touched`` seen, them frozen])
        self._borrowers: dict[tuple[str, ...], tuple[set[str], list]] = {}
        self._freeing: dict[tuple, tuple[tuple, list[AdmittedJob], Vec]] = {}
        self.pools: dict[tuple, tuple[tuple[int, int], Pool]] = {}  # kept by ``Search.pool``
        self._room_freers: dict[tuple[str, tuple[int, ...]], list] = {}
        self._alike_on: dict[str, list[tuple[Sequence[PodGroup], list[AdmittedJob]]]] = {}

    def take(self, victims: Iterable[AdmittedJob]) -> None:
        self.taken.update(v.ref for v in victims)

    def freeing(
        self, node: QuotaNode, short: tuple[str, ...], needs: tuple[str, ...] | None
    ) -> tuple[list[AdmittedJob], Vec]:
        """Victims of the queue ``node`` not taken yet that hold one of ``short``, and their
        total demand; with ``needs`` (reclaim), only those whose queue stays at its guarantee
        in ``needs`` without them. Kept while the taken victims and the queue's usage of
        ``needs`` do not change (searches change usage on trial and put it back)."""
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
            kept = (stamp, found, vectors.total((v.demand, 1) for v in found))
            self._freeing[key] = kept
        return kept[1], kept[2]

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
        owners: frozenset[str],
        short: Mapping[str, int],
    ) -> None:
        self.quota, self.job, self.leaf, self.owners = quota, job, leaf, owners
        self.short = dict(short)
        self.out: dict[str, tuple[QuotaNode, Mapping[str, int]]] = {}  # taken out of quota
        self._waiting: list[tuple[str, QuotaNode, Mapping[str, int]]] = []  # taken, not yet out
        self._freed: dict[str, int] = {}  # of the shortfall's resources, by the waiting victims
        self._taken_from: dict[str, dict[str, int]] = {}  # reclaimed queue → demand taken

    def take(self, victim: AdmittedJob) -> bool:
        """Take ``victim`` (False: its queue is reclaimed and would fall below its guarantee)."""
        quota, queue = self.quota, victim.mapped.queue
        owner = quota.node(queue)
        if queue in self.owners:
            if owner is None or not keeps_guarantee(
                self.job, quota, owner, victim, self._taken_from
            ):
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
        """Take every victim taken so far out of quota."""
        take_out(self.quota, self._waiting, self.out)


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
    job: PendingJob,
    quota: QuotaTree,
    owner: QuotaNode,
    victim: AdmittedJob,
    taken_from: Mapping[str, Mapping[str, int]],
) -> bool:
    """Whether taking ``victim`` too leaves its queue at or above its guarantee in every
    resource the job needs that the taken jobs hold."""
    before = taken_from.get(owner.name)
    taken = vectors.total([(before, 1), (victim.demand, 1)]) if before else victim.demand
    needs = [r for r in quota.resources if job.demand.get(r, 0)]
    return stays_at_guarantee(owner, taken, needs)


def room_without(cluster: ClusterState, victims: Sequence[AdmittedJob], job: PendingJob) -> bool:
    """Whether the job fits ``cluster`` with the victims' pods there released (releasing more
    never leaves less room)."""
    trial = cluster.copy()
    for victim in victims:
        pods = victim.pods.get(cluster.name)
        if pods:
            trial.release(pods)
    return trial.fits(job.pods, job.demand)


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


def could_clear(short: Mapping[str, int], candidates: Sequence[AdmittedJob], tried: int) -> bool:
    """Whether, for each resource of ``short``, the first ``tried`` candidates holding it hold
    that much of it: taking a victim lowers a shortfall by at most its demand, so a search
    that tries candidates in this order, each while it holds something still short, cannot
    clear it otherwise."""
    for r, need in short.items():
        got = count = 0
        for victim in candidates:
            if amount := victim.demand.get(r, 0):
                got += amount
                count += 1
                if got >= need or count >= tried:
                    break
        if got < need:
            return False
    return True


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
