"""Choosing victims for a job that cannot be admitted: whole jobs, fewest and lowest first.

Candidates, in order:
1. reclaim — when the preemptor's queue has ``preemption.reclaim: Any`` and the job fits in
   its queue's guarantee: admitted jobs of other queues that borrow above their guarantee in a
   resource the job needs, as long as taking the job away leaves that queue at or above its
   guarantee in those resources;
2. within the queue — with ``preemption.withinQueue: LowerPriority``: admitted jobs of the same
   queue with a lower priority.
Inside each group: lowest priority first, then the most recently admitted, then uid.

For every cluster the job may use, victims are added in that order while they free something
the job lacks (room on that cluster, or quota), until quota and the cluster both fit; then
each victim that is not needed after all is dropped again. The cluster needing the fewest
victims (then the lowest priorities) wins. Nothing is preempted unless the job then fits.
Jobs admitted in this cycle are never victims, and a victim of one job is not offered to
another, so no job can be preempted for a job that it preempted (no A→B→A cycles).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from engine.cycle.capacity import ClusterState
from engine.cycle.jobs import AdmittedJob, PendingJob
from engine.cycle.quota import QuotaNode, QuotaTree
from engine.policy.model import ReclaimPolicy, WithinQueuePreemption
from engine.policy.policyset import PolicySet


@dataclass(frozen=True, slots=True)
class Preemption:
    cluster: str
    victims: tuple[AdmittedJob, ...]
    reclaim: frozenset[str]  # refs of victims taken by reclaim (the rest: lower priority)


def candidates(
    job: PendingJob,
    leaf: QuotaNode,
    quota: QuotaTree,
    policies: PolicySet,
    admitted_by_queue: Mapping[str, Sequence[AdmittedJob]],
    taken: set[str],
) -> tuple[list[AdmittedJob], frozenset[str]]:
    """Victims in the order they are tried; ``admitted_by_queue`` lists each queue's admitted
    jobs already sorted by ``victim_order``."""
    queue = policies.queue(leaf.name)
    if queue is None:
        return [], frozenset()
    needs = [r for r in quota.resources if job.demand.get(r, 0)]
    reclaim_ok = (
        queue.preemption.reclaim == ReclaimPolicy.ANY
        and bool(needs)
        and quota.within_guarantee(leaf, job.demand)
    )
    lower_ok = queue.preemption.within_queue == WithinQueuePreemption.LOWER_PRIORITY
    reclaim: list[AdmittedJob] = []
    if reclaim_ok:
        for name, jobs in admitted_by_queue.items():
            owner = quota.node(name)
            if name != leaf.name and owner is not None and quota.borrowing(owner, needs):
                reclaim.extend(v for v in jobs if v.ref not in taken and v.usage)
        reclaim.sort(key=victim_order)
    lower: list[AdmittedJob] = []
    if lower_ok:
        priority = job.mapped.priority
        for victim in admitted_by_queue.get(leaf.name, ()):
            if victim.mapped.priority >= priority:
                break  # sorted by priority: the rest are not lower
            if victim.ref not in taken and victim.usage:
                lower.append(victim)
    return reclaim + lower, frozenset(v.ref for v in reclaim)


@dataclass(frozen=True, slots=True)
class VictimPool:
    victims: tuple[AdmittedJob, ...]  # in the order they are tried
    reclaimers: frozenset[str]
    on_cluster: Mapping[str, Mapping[str, int]]  # cluster → what all victims hold there
    total: Mapping[str, int]  # what all victims hold

    @staticmethod
    def of(victims: Sequence[AdmittedJob], reclaimers: frozenset[str]) -> VictimPool:
        on_cluster: dict[str, dict[str, int]] = {}
        total: dict[str, int] = {}
        for victim in victims:
            for name, usage in victim.usage.items():
                held = on_cluster.setdefault(name, {})
                for r, v in usage.items():
                    held[r] = held.get(r, 0) + v
                    total[r] = total.get(r, 0) + v
        return VictimPool(tuple(victims), reclaimers, on_cluster, total)

    def may_fit(self, job: PendingJob, cluster: ClusterState) -> bool:
        """Totals only: could the job fit ``cluster`` if every victim there were gone?"""
        held = self.on_cluster.get(cluster.name, {})
        free = cluster.free
        return all(free.get(r, 0) + held.get(r, 0) >= v for r, v in job.demand.items())


def victim_order(victim: AdmittedJob) -> tuple:
    return (victim.mapped.priority, -victim.admitted_at.timestamp(), victim.binding.uid)


def choose(
    job: PendingJob,
    leaf: QuotaNode,
    quota: QuotaTree,
    clusters: Mapping[str, ClusterState],
    targets: Sequence[str],
    victims: Sequence[AdmittedJob],
    reclaimers: frozenset[str],
) -> Preemption | None:
    """The best (cluster, victims) that makes ``job`` fit, or None."""
    best: tuple[tuple, Preemption] | None = None
    for name in targets:
        chosen = _for_cluster(job, leaf, quota, clusters[name], victims, reclaimers)
        if chosen is None:
            continue
        rank = (
            len(chosen),
            max(v.mapped.priority for v in chosen),
            sum(v.mapped.priority for v in chosen),
            name,
        )
        if best is None or rank < best[0]:
            best = (rank, Preemption(name, tuple(chosen), reclaimers & {v.ref for v in chosen}))
    return best[1] if best else None


def _for_cluster(
    job: PendingJob,
    leaf: QuotaNode,
    quota: QuotaTree,
    cluster: ClusterState,
    victims: Sequence[AdmittedJob],
    reclaimers: frozenset[str],
) -> list[AdmittedJob] | None:
    miss = quota.check(leaf, job.demand)
    short = set(miss.short) if miss is not None else set()
    useful: list[AdmittedJob] = []
    for victim in victims:
        if cluster.name not in victim.usage and not any(victim.demand.get(r) for r in short):
            continue  # frees nothing the job lacks
        if victim.ref in reclaimers and not _keeps_guarantee(job, quota, victim, useful):
            continue
        useful.append(victim)
    if not useful or not _could_fit(job, cluster, useful, miss.short if miss else {}):
        return None
    chosen: list[AdmittedJob] = []
    removed: list[tuple[QuotaNode, Mapping[str, int]]] = []
    trial = cluster.copy()
    try:
        for victim in useful:
            chosen.append(victim)
            owner = quota.node(victim.mapped.queue)
            if owner is not None:
                quota.remove(owner, victim.demand)
                removed.append((owner, victim.demand))
            pods = victim.pods.get(cluster.name)
            if pods:
                trial.release(pods)
            if quota.check(leaf, job.demand) is None and trial.misfit(job.pods) is None:
                break
        else:
            return None  # even every candidate together does not make room here
    finally:
        for owner, demand in reversed(removed):
            quota.add(owner, demand)
    for victim in reversed(chosen[:-1]):
        fewer = [v for v in chosen if v is not victim]
        if _fits(job, leaf, quota, cluster, fewer):
            chosen = fewer
    return chosen


def _could_fit(
    job: PendingJob,
    cluster: ClusterState,
    useful: Sequence[AdmittedJob],
    quota_short: Mapping[str, int],
) -> bool:
    """A cheap upper bound: totals freed on the cluster and in quota by every candidate."""
    freed: dict[str, int] = {}
    released: dict[str, int] = dict(cluster.free)
    for victim in useful:
        for r, v in victim.demand.items():
            freed[r] = freed.get(r, 0) + v
        for r, v in victim.usage.get(cluster.name, {}).items():
            released[r] = released.get(r, 0) + v
    if any(freed.get(r, 0) < v for r, v in quota_short.items()):
        return False
    return all(released.get(r, 0) >= v for r, v in job.demand.items())


def _keeps_guarantee(
    job: PendingJob, quota: QuotaTree, victim: AdmittedJob, chosen: Sequence[AdmittedJob]
) -> bool:
    owner = quota.node(victim.mapped.queue)
    if owner is None:
        return False
    taken = [v for v in chosen if v.mapped.queue == victim.mapped.queue] + [victim]
    for r in quota.resources:
        if not job.demand.get(r, 0):
            continue
        after = owner.total.get(r, 0) - sum(v.demand.get(r, 0) for v in taken)
        if after < owner.guarantee.get(r, 0) and any(v.demand.get(r, 0) for v in taken):
            return False
    return True


def _fits(
    job: PendingJob,
    leaf: QuotaNode,
    quota: QuotaTree,
    cluster: ClusterState,
    chosen: Sequence[AdmittedJob],
) -> bool:
    """Whether the job fits quota and ``cluster`` with ``chosen`` gone (nothing is changed)."""
    removed: list[tuple[QuotaNode, Mapping[str, int]]] = []
    trial = cluster.copy()
    for victim in chosen:
        owner = quota.node(victim.mapped.queue)
        if owner is not None:
            demand = victim.demand
            quota.remove(owner, demand)
            removed.append((owner, demand))
        pods = victim.pods.get(cluster.name)
        if pods:
            trial.release(pods)
    try:
        return quota.check(leaf, job.demand) is None and trial.misfit(job.pods) is None
    finally:
        for owner, demand in reversed(removed):
            quota.add(owner, demand)
