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

A ``Search`` holds one attempt's candidates, its bounds per cluster (``lower_bound``,
``least_rank``) and the search on one cluster (``on_cluster``); ``ranking.choose`` picks the
cluster. The quota side is tried once, before any cluster, and gives up after ``TRIED``
candidates.
Nothing is preempted unless the job then fits, and never more than ``MOST_VICTIMS`` jobs for
one (an over-committed queue could otherwise evict hundreds of jobs to admit one small job).
Jobs admitted in this cycle are never victims,
and a victim of one job is not offered to another, so no job can be preempted for a job that it
preempted (no A→B→A cycles).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from engine.cycle.jobs.model import AdmittedJob, PendingJob
from engine.cycle.placement.capacity import ClusterState
from engine.cycle.preemption.bounds import (
    Helping,
    alone,
    could_clear,
    fewest,
    fewest_for_nodes,
    fewest_merged,
    totals_fit,
)
from engine.cycle.preemption.victims import (
    Pool,
    Taking,
    VictimIndex,
    make_pool,
    merged,
    put_back,
    reclaimable,
)
from engine.cycle.quota.tree import QuotaNode, QuotaTree
from engine.policy.model import Queue, ReclaimPolicy, WithinQueuePreemption

MOST_VICTIMS = 100  # a job that would need more victims than this waits instead
TRIED = 4 * MOST_VICTIMS  # candidates the quota side tries before it gives up


def allowed(queue: Queue) -> bool:
    """Whether jobs of ``queue`` may preempt at all."""
    preemption = queue.preemption
    return (
        preemption.reclaim == ReclaimPolicy.ANY
        or preemption.within_queue == WithinQueuePreemption.LOWER_PRIORITY
    )


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
        needs = tuple(r for r in quota.resources if job.demand.get(r, 0))
        self.needs = needs
        self.short = quota.deficit(leaf, job.demand)
        # reclaimed queue → the resources it keeps its guarantee of (``guarded``)
        self._guarded: dict[str, tuple[str, ...]] = {}
        if queue.preemption.reclaim == ReclaimPolicy.ANY and needs:
            self._guarded = reclaimable(quota, leaf, job.demand, needs, self.short, index)
        self.owners = frozenset(self._guarded)
        self.lower = queue.preemption.within_queue == WithinQueuePreemption.LOWER_PRIORITY
        self._quota_candidates: list[AdmittedJob] | None = None
        # a cluster's search ended with the shortfall left, or needing too many victims for it
        self.quota_failed = False
        self._quota_only: tuple[AdmittedJob, ...] | None = None
        self._within: dict[str, list[AdmittedJob]] | None = None  # cluster → own-queue victims
        self._quota_fewest: tuple[int | None] | None = None  # (bound,) once computed
        self._near: dict[str, list[AdmittedJob]] = {}

    def guarded(self, queue: str) -> tuple[str, ...]:
        """The resources reclaimed queue ``queue`` keeps its guarantee of."""
        return self._guarded.get(queue, ())

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
        """Eligible victims that could shrink the job's quota shortfall, in order: those of
        the pool whose queue helps, i.e. taking all of them at once shrinks the shortfall.
        Less usage never lowers what a queue can get, so when all of a queue's victims do not
        help, no subset of them does."""
        if self._quota_candidates is None:
            # the shortfall shrinks exactly when the room for a resource of it grows
            helps = Helping(self.quota, self.leaf, self.short)
            found: list[AdmittedJob] = []
            for node, victims, most in self.pool().queues:
                if helps(node, most):
                    found += victims
            self._quota_candidates = sorted(found, key=self.order)
        return self._quota_candidates

    def pool(self) -> Pool:
        """Per queue, its victims that hold a resource the job is short of (a reclaimed one
        only when its queue keeps its guarantee without it), and the most taking them could
        free: their demand, for a reclaimed queue no more than it has above its guarantee in
        what the job needs. Kept for jobs of the same kind while quota and victims stay."""
        index, quota, leaf = self.index, self.quota, self.leaf
        short_keys = tuple(sorted(self.short))
        below = self.job.mapped.priority if self.lower else None  # own-queue victims' bound
        key = (leaf.name, below, self.needs, short_keys)
        key += (self.owners,)
        stamp = (quota.version, len(index.taken))
        kept = index.pools.get(key)
        if kept is not None and kept[0] == stamp:
            return kept[1]
        pool = make_pool(self, short_keys)
        index.pools[key] = (stamp, pool)
        return pool

    def near(self, cluster: str) -> list[AdmittedJob]:
        """Eligible victims running on ``cluster``, in order (the index lists them in victim
        order, so reclaim candidates first keeps it). Kept for the search."""
        found = self._near.get(cluster)
        if found is None:
            found = self._near[cluster] = self._find_near(cluster)
        return found

    def _find_near(self, cluster: str) -> list[AdmittedJob]:
        taken, owners = self.index.taken, self.owners
        lower = self.lower
        leaf, priority = self.leaf.name, self.job.mapped.priority
        if not owners:  # only the queue's own jobs (``eligible``): index them by cluster once
            if self._within is None:
                self._within = {}
                for v in self.index.by_queue.get(leaf, ()) if lower else ():
                    if v.ref not in taken and v.mapped.priority < priority:
                        for name in v.usage:
                            self._within.setdefault(name, []).append(v)
            return list(self._within.get(cluster, ()))
        reclaim: list[AdmittedJob] = []
        within: list[AdmittedJob] = []
        for v in self.index.on_cluster.get(cluster, ()):  # ``eligible``, inlined: a hot loop
            if v.ref in taken:
                continue
            queue = v.mapped.queue
            if queue in owners:
                reclaim.append(v)
            elif lower and queue == leaf and v.mapped.priority < priority:
                within.append(v)
        return reclaim + within

    def _nobody_on(self, cluster: str) -> bool:
        """Whether surely no eligible victim runs on ``cluster`` (False: maybe one does).
        With reclaim, by the queues that run jobs there: no full scan of them."""
        if not self.owners:
            return not self.near(cluster)  # the queue's own victims, indexed once
        queues = self.index.queues_on(cluster)
        return self.owners.isdisjoint(queues) and not (self.lower and self.leaf.name in queues)

    def hopeless(self) -> bool:
        """No set of victims could make the job fit its quota."""
        if not self.short:
            return False
        leaf, quota, demand = self.leaf, self.quota, self.job.demand
        if any(demand.get(r, 0) > quota.potential(leaf, r) for r in self.short):
            return True
        if not self.owners:  # only its own queue's lower-priority jobs: are there enough?
            held = self.index.below(leaf.name, self.job.mapped.priority)
            if any(held.get(r, 0) < v for r, v in self.short.items()):
                return True
        pool = self.pool()
        bound = self._quota_bound()
        if bound is None or bound > MOST_VICTIMS:
            return True
        # taking every candidate at once is the most victims could do
        return any(demand[r] > pool.room.get(r, 0) for r in self.needs)

    def quota_reachable(self) -> bool:
        """Whether taking quota candidates alone, in order and keeping each reclaimed queue at
        its guarantee, clears the shortfall within the first ``TRIED`` candidates that hold
        something still short: the quota side of every cluster's search, tried once (a
        cluster's search also takes victims for room, which frees quota too, so this can only
        be a pre-check)."""
        quota = self.quota
        candidates = [v for v in self.quota_candidates() if quota.node(v.mapped.queue)]
        # while a resource is short, every candidate holding it is tried
        most = {node.name: most for node, _, most in self.pool().queues}
        if not could_clear(self.short, candidates, TRIED, most):
            return False
        taking = Taking(quota, self.job, self.leaf, self._guarded, self.short)
        tried = 0
        with quota.trial():
            try:
                for victim in candidates:
                    if not taking.short or tried >= TRIED:
                        break
                    if not any(victim.demand.get(r, 0) for r in taking.short):
                        continue
                    tried += 1
                    taking.take(victim)
            finally:
                put_back(quota, taking.out.values())
        return not taking.short

    def _quota_bound(self) -> int | None:
        """The fewest candidates whose demand could cover the shortfall (None: none)."""
        if self._quota_fewest is None:
            found = fewest_merged(self.short, self.pool().amounts, MOST_VICTIMS + 1)
            self._quota_fewest = (found,)
        return self._quota_fewest[0]

    def lower_bound(self, cluster: ClusterState) -> int | None:
        """The fewest victims that could make the job fit quota and ``cluster``, by totals and
        by the room of each pod group on the nodes; None when even all of them could not. At
        least one: the job does not fit now (its quota is short, or the cluster lacks room)."""
        free = cluster.free
        missing = {r: v - free.get(r, 0) for r, v in self.job.demand.items() if v > free.get(r, 0)}
        nobody = self._nobody_on(cluster.name)
        bound = 0
        if missing:
            if nobody:
                return None
            near = self.near(cluster.name)
            found = fewest(missing, [v.usage.get(cluster.name, {}) for v in near])
            if found is None:
                return None
            bound = found
        if nobody:  # no victim to give the nodes room: the job fits their shape or never
            for_nodes = None if cluster.node_deficits(self.job.pods) else 0
        else:
            for_nodes = fewest_for_nodes(cluster, self.job, self.index, self.eligible)
        if for_nodes is None:
            return None
        bound = max(bound, for_nodes, 1)
        if not self.short:
            return bound
        quota_bound = self._quota_bound()
        return None if quota_bound is None else max(bound, quota_bound)

    def least_rank(
        self, cluster: ClusterState, bound: int, near: Sequence[AdmittedJob]
    ) -> tuple[int, int, float, int, str]:
        """A rank no victims found on ``cluster`` can beat (see ``choose``), for a cluster
        whose ``lower_bound`` is ``bound``: at least ``bound`` victims, none below the lowest
        priority among its candidates. One victim alone (when quota is not short) must free
        by itself all the room the job lacks here."""
        pool: Sequence[AdmittedJob] = near
        if self.short:
            pool = list(near) + self.quota_candidates()
        elif bound == 1:
            pool = alone(cluster, near, self.job, self.index, self.eligible)
            if not pool:  # no one victim does: at least two, from all of them
                bound, pool = 2, near
        lowest = min((v.mapped.priority for v in pool), default=None)
        if lowest is None:  # no candidates at all: no solution here
            return (MOST_VICTIMS + 1, 0, 0.0, 0, "")
        return (bound, lowest, 0.0, bound * lowest, cluster.name)  # no work lost is the least

    # --- the search on one cluster -------------------------------------------------------------
    def on_cluster(self, cluster: ClusterState, near: Sequence[AdmittedJob]) -> list[AdmittedJob]:
        """The victims that make the job fit ``cluster`` (empty when none do).

        Candidates are taken in order while they free something the job still lacks: room on
        the cluster, or a resource of its quota shortfall. Taking usage away lowers the
        shortfall by at most that much, so the shortfall is measured again only once the
        victims taken since cover it. Victims not needed in the end are then dropped."""
        job = self.job
        room_fits = cluster.fits(job.pods, job.demand)
        if room_fits and self._quota_only is not None:
            return list(self._quota_only)  # the same victims wherever the job has room now
        sequence = merged(near, self.quota_candidates() if self.short else [], self.order)
        with self.quota.trial():
            chosen = self._take(cluster, sequence, room_fits)
        if chosen and self.short and room_fits:
            self._quota_only = tuple(chosen)
        return chosen

    def _take(
        self, cluster: ClusterState, sequence: Sequence[AdmittedJob], room_fits: bool
    ) -> list[AdmittedJob]:
        job, name = self.job, cluster.name
        taking = Taking(self.quota, job, self.leaf, self._guarded, self.short)
        # with room here from the start, every victim is taken for quota alone: what fails here
        # for quota fails on every cluster (the same candidates, in the same order)
        conclusive = bool(self.short) and room_fits
        trial = cluster.copy()
        chosen: list[AdmittedJob] = []
        try:
            for victim in sequence:
                for_room = not room_fits and name in victim.usage
                for_quota = bool(taking.short) and any(
                    victim.demand.get(r, 0) for r in taking.short
                )
                if not (for_room or for_quota) or not taking.take(victim):
                    continue  # frees nothing the job still lacks, or may not be taken
                chosen.append(victim)
                if len(chosen) > 4 * MOST_VICTIMS:  # unneeded ones are dropped later, not so many
                    self.quota_failed = conclusive
                    return []
                if name in victim.usage:
                    trial.release(victim.pods[name])
                    room_fits = room_fits or (
                        totals_fit(trial, job.demand) and trial.fits(job.pods, job.demand)
                    )
                if not taking.short and room_fits:
                    break
            else:  # the shortfall did not clear, or there is no room
                self.quota_failed = conclusive and bool(taking.short)
                return []
            taking.settle()
            chosen = self._fewer(cluster, chosen, taking.out)
            if len(chosen) > MOST_VICTIMS:
                self.quota_failed = conclusive
                return []
        finally:
            put_back(self.quota, taking.out.values())
        return chosen

    def _fewer(
        self,
        cluster: ClusterState,
        chosen: list[AdmittedJob],
        out: dict[str, tuple[QuotaNode, Mapping[str, int]]],
    ) -> list[AdmittedJob]:
        """Drop each victim, latest first (not the last taken), that the job fits without;
        every victim in ``chosen`` is out of quota on entry, and the dropped ones back in.

        ``spare`` is a lower bound of the quota left over once the job is in: putting a
        victim back takes at most its demand from it, so a victim within it is dropped
        without measuring again."""
        job, quota, leaf, name = self.job, self.quota, self.leaf, cluster.name
        keep = list(chosen)
        spare = quota.headroom(leaf, job.demand)
        trial = cluster.copy()  # with the pods of every victim kept released
        for victim in chosen:
            if name in victim.usage:
                trial.release(victim.pods[name])
        for victim in reversed(chosen[:-1]):
            entry = out.pop(victim.ref, None)
            fits, after = True, spare
            if entry is not None:
                quota.add(*entry)
                demand = entry[1]
                if all(demand.get(r, 0) <= v for r, v in spare.items()):
                    after = {r: v - demand.get(r, 0) for r, v in spare.items()}
                else:
                    after = quota.headroom(leaf, job.demand)
                    fits = all(v >= 0 for v in after.values())
            if fits and name in victim.usage:
                trial.retake(victim.pods[name])
                fits = trial.fits(job.pods, job.demand)
                if not fits:
                    trial.release(victim.pods[name])
            if fits:
                keep, spare = [v for v in keep if v is not victim], after
            elif entry is not None:
                quota.remove(*entry)
                out[victim.ref] = entry
        return keep
