"""Choosing victims for a job that cannot be admitted: whole jobs, fewest and lowest first.

Candidates, in order:
1. reclaim — when the preemptor's queue has ``preemption.reclaim: Any`` and the job fits in
   its queue's guarantee: admitted jobs of other queues that borrow above their guarantee in a
   resource the job needs, as long as taking the job away leaves that queue at or above its
   guarantee in those resources;
2. within the queue — with ``preemption.withinQueue: LowerPriority``: admitted jobs of the same
   queue with a lower priority.
Inside each group: lowest priority first, then the most recently admitted, then uid.

On a cluster the job may use, candidates are taken in that order while they free something the
job still lacks: quota it is short of, or room on that cluster. When quota and the cluster both
fit, each victim that is not needed after all is dropped again.

Clusters are tried in order of a lower bound on the victims they need (the fewest candidates
whose amounts could cover what is missing, by totals), at most ``EXAMINED`` of them; a cluster
whose bound exceeds the fewest victims found so far is not tried. The cluster needing the fewest
victims wins, then the one whose victims have the lowest priorities, then the first by name.
Nothing is preempted unless the job then fits. Jobs admitted in this cycle are never victims,
and a victim of one job is not offered to another, so no job can be preempted for a job that it
preempted (no A→B→A cycles).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from engine.cycle.capacity import ClusterState
from engine.cycle.jobs import AdmittedJob, PendingJob
from engine.cycle.quota import QuotaNode, QuotaTree
from engine.policy.model import Queue, ReclaimPolicy, WithinQueuePreemption

EXAMINED = 8  # clusters given the full victim search in one preemption attempt


@dataclass(frozen=True, slots=True)
class Preemption:
    cluster: str
    victims: tuple[AdmittedJob, ...]
    reclaim: frozenset[str]  # refs of victims taken by reclaim (the rest: lower priority)


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

    def take(self, victims: Iterable[AdmittedJob]) -> None:
        self.taken.update(v.ref for v in victims)


class Search:
    """One preemption attempt for ``job``: who may be taken, and what quota it is short of."""

    def __init__(
        self,
        job: PendingJob,
        leaf: QuotaNode,
        queue: Queue,
        quota: QuotaTree,
        index: VictimIndex,
    ) -> None:
        self.job, self.leaf, self.quota, self.index = job, leaf, quota, index
        needs = [r for r in quota.resources if job.demand.get(r, 0)]
        owners: set[str] = set()
        if (
            queue.preemption.reclaim == ReclaimPolicy.ANY
            and needs
            and quota.within_guarantee(leaf, job.demand)
        ):
            for name in index.by_queue:
                node = quota.node(name)
                if name != leaf.name and node is not None and quota.borrowing(node, needs):
                    owners.add(name)
        self.owners = owners
        self.lower = queue.preemption.within_queue == WithinQueuePreemption.LOWER_PRIORITY
        miss = quota.check(leaf, job.demand)
        self.short = dict(miss.short) if miss is not None else {}
        self._quota_candidates: list[AdmittedJob] | None = None
        self._quota_only: tuple[AdmittedJob, ...] | None = None
        self._quota_fewest: tuple[int | None] | None = None  # (bound,) once computed
        self.useless: set[str] = set()  # candidates that freed no quota the job could use

    # --- candidates ----------------------------------------------------------------------------
    def eligible(self, victim: AdmittedJob) -> bool:
        if victim.ref in self.index.taken:
            return False
        queue = victim.mapped.queue
        if queue in self.owners:
            return True
        return (
            self.lower
            and queue == self.leaf.name
            and victim.mapped.priority < self.job.mapped.priority
        )

    def order(self, victim: AdmittedJob) -> tuple[int, int]:
        """Reclaim candidates first, each group in victim order."""
        return (0 if victim.mapped.queue in self.owners else 1, self.index.rank[victim.ref])

    def quota_candidates(self) -> list[AdmittedJob]:
        """Eligible victims that free some quota resource the job is short of, in order."""
        if self._quota_candidates is None:
            short = self.short
            found = [
                v
                for q in sorted(self.owners | {self.leaf.name})
                for v in self.index.by_queue.get(q, ())
                if any(v.demand.get(r, 0) for r in short) and self.eligible(v)
            ]
            self._quota_candidates = sorted(found, key=self.order)
        return self._quota_candidates

    def near(self, cluster: str) -> list[AdmittedJob]:
        """Eligible victims running on ``cluster``, in order."""
        found = [v for v in self.index.on_cluster.get(cluster, ()) if self.eligible(v)]
        return sorted(found, key=self.order)

    def hopeless(self) -> bool:
        """No set of victims could make the job fit its quota."""
        if not self.short:
            return False
        leaf, quota, demand = self.leaf, self.quota, self.job.demand
        if any(demand.get(r, 0) > quota.potential(leaf, r) for r in self.short):
            return True
        return self._quota_bound() is None

    def _quota_bound(self) -> int | None:
        """The fewest quota candidates whose demand could cover the shortfall (None: none)."""
        if self._quota_fewest is None:
            amounts = [v.demand for v in self.quota_candidates()]
            self._quota_fewest = (_fewest(self.short, amounts),)
        return self._quota_fewest[0]

    def lower_bound(self, cluster: ClusterState, near: Sequence[AdmittedJob]) -> int | None:
        """The fewest victims that could make the job fit quota and ``cluster`` by totals;
        None when even all of them could not."""
        free = cluster.free
        missing = {r: v - free.get(r, 0) for r, v in self.job.demand.items() if v > free.get(r, 0)}
        bound = _fewest(missing, [v.usage.get(cluster.name, {}) for v in near])
        if bound is None or not self.short:
            return bound
        quota_bound = self._quota_bound()
        return None if quota_bound is None else max(bound, quota_bound)

    # --- the search on one cluster -------------------------------------------------------------
    def on_cluster(self, cluster: ClusterState, near: Sequence[AdmittedJob]) -> list[AdmittedJob]:
        """The victims that make the job fit ``cluster`` (empty when none do).

        A candidate is taken when it frees room the job still lacks on the cluster, or when
        taking it out of quota shrinks what the job is short of there (with hierarchical
        quota, a borrower's job may free nothing the job's queue can use: such a candidate is
        not offered again in this search)."""
        job, quota, leaf, name = self.job, self.quota, self.leaf, cluster.name
        room_fits = cluster.fits(job.pods, job.demand)
        if room_fits and self._quota_only is not None:
            return list(self._quota_only)  # the same victims wherever the job has room now
        short = dict(self.short)
        sequence = _merged(near, self.quota_candidates() if short else [], self.order)
        trial = cluster.copy()
        chosen: list[AdmittedJob] = []
        out: dict[str, tuple[QuotaNode, Mapping[str, int]]] = {}  # taken out of quota
        taken_from: dict[str, dict[str, int]] = {}  # reclaimed queue → demand taken from it
        try:
            for victim in sequence:
                for_room = not room_fits and name in victim.usage
                for_quota = (
                    bool(short)
                    and victim.ref not in self.useless
                    and any(victim.demand.get(r, 0) for r in short)
                )
                if not (for_room or for_quota):
                    continue  # frees nothing the job still lacks
                owner = quota.node(victim.mapped.queue)
                if victim.mapped.queue in self.owners and (
                    owner is None or not _keeps_guarantee(job, quota, owner, victim, taken_from)
                ):
                    continue
                if owner is not None:
                    quota.remove(owner, victim.demand)
                    out[victim.ref] = (owner, victim.demand)
                if short:
                    miss = quota.check(leaf, job.demand)
                    after = dict(miss.short) if miss is not None else {}
                    if not for_room and not any(after.get(r, 0) < v for r, v in short.items()):
                        if owner is not None:
                            quota.add(*out.pop(victim.ref))
                        self.useless.add(victim.ref)
                        continue
                    short = after
                if victim.mapped.queue in self.owners:
                    held = taken_from.setdefault(victim.mapped.queue, {})
                    for r, v in victim.demand.items():
                        held[r] = held.get(r, 0) + v
                chosen.append(victim)
                if name in victim.usage:
                    trial.release(victim.pods[name])
                    room_fits = room_fits or trial.fits(job.pods, job.demand)
                if not short and room_fits:
                    break
            else:
                return []
            chosen = self._fewer(cluster, chosen, out)
        finally:
            for owner, demand in out.values():
                quota.add(owner, demand)
        if self.short and cluster.fits(job.pods, job.demand):
            self._quota_only = tuple(chosen)
        return chosen

    def _fewer(
        self,
        cluster: ClusterState,
        chosen: list[AdmittedJob],
        out: dict[str, tuple[QuotaNode, Mapping[str, int]]],
    ) -> list[AdmittedJob]:
        """Drop each victim, latest first (not the last taken), that the job fits without;
        every victim in ``chosen`` is out of quota on entry, and the dropped ones back in."""
        job, quota, leaf, name = self.job, self.quota, self.leaf, cluster.name
        keep = list(chosen)
        for victim in reversed(chosen[:-1]):
            entry = out.pop(victim.ref, None)
            if entry is not None:
                quota.add(*entry)
            fewer = [v for v in keep if v is not victim]
            if quota.check(leaf, job.demand) is None and (
                name not in victim.usage or _room_without(cluster, fewer, job)
            ):
                keep = fewer
            elif entry is not None:
                quota.remove(*entry)
                out[victim.ref] = entry
        return keep


def choose(
    search: Search, clusters: Mapping[str, ClusterState], targets: Sequence[str]
) -> Preemption | None:
    """The best (cluster, victims) that makes the job fit, or None (the caller has ruled out
    a ``hopeless`` search)."""
    ranked: list[tuple[int, str, list[AdmittedJob]]] = []
    for name in targets:
        near = search.near(name)
        bound = search.lower_bound(clusters[name], near)
        if bound is not None:
            ranked.append((bound, name, near))
    ranked.sort(key=lambda x: (x[0], x[1]))
    best: tuple[tuple, Preemption] | None = None
    for bound, name, near in ranked[:EXAMINED]:
        if best is not None and bound > best[0][0]:
            break
        chosen = search.on_cluster(clusters[name], near)
        if not chosen:
            continue
        rank = (
            len(chosen),
            max(v.mapped.priority for v in chosen),
            sum(v.mapped.priority for v in chosen),
            name,
        )
        if best is None or rank < best[0]:
            reclaim = frozenset(v.ref for v in chosen if v.mapped.queue in search.owners)
            best = (rank, Preemption(name, tuple(chosen), reclaim))
    return best[1] if best else None


# --- helpers -----------------------------------------------------------------------------------
def _merged(
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


def _fewest(missing: Mapping[str, int], amounts: Sequence[Mapping[str, int]]) -> int | None:
    """The fewest of ``amounts`` whose sum could cover ``missing`` in every resource, taking
    the largest first per resource (a lower bound); None when all of them do not."""
    fewest = 0
    for r, need in missing.items():
        if need <= 0:
            continue
        got = 0
        count = 0
        for amount in sorted((a.get(r, 0) for a in amounts), reverse=True):
            if amount <= 0:
                break
            got += amount
            count += 1
            if got >= need:
                break
        if got < need:
            return None
        fewest = max(fewest, count)
    return fewest


def _keeps_guarantee(
    job: PendingJob,
    quota: QuotaTree,
    owner: QuotaNode,
    victim: AdmittedJob,
    taken_from: Mapping[str, Mapping[str, int]],
) -> bool:
    """Whether taking ``victim`` too leaves its queue at or above its guarantee in every
    resource the job needs that the taken jobs hold."""
    before = taken_from.get(owner.name, {})
    for r in quota.resources:
        if not job.demand.get(r, 0):
            continue
        taken = before.get(r, 0) + victim.demand.get(r, 0)
        if taken and owner.total.get(r, 0) - taken < owner.guarantee.get(r, 0):
            return False
    return True


def _room_without(cluster: ClusterState, victims: Sequence[AdmittedJob], job: PendingJob) -> bool:
    """Whether the job fits ``cluster`` with the victims' pods there released."""
    trial = cluster.copy()
    for victim in victims:
        pods = victim.pods.get(cluster.name)
        if pods:
            trial.release(pods)
    return trial.fits(job.pods, job.demand)
