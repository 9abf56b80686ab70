"""Preemption for a co-admission group (``groups.Unit``): room for its minimum at once, or none.

When a group's turn ends with its quota short (``WaitingForQuota``) or too few members fitting
at once (``NoClusterFits``), and its queue lets a job preempt (``preemption.allowed``), victims
are searched under a single job's rules (``preemption.Search`` for the group's counted demand,
at the priority of its lowest member): reclaim from queues that borrow what the group needs,
each kept at its guarantee, and jobs of its own queue of a strictly lower priority. A running
member of a group is never a victim (``groups.preemptible``): a group is taken whole or not at
all, and for now not at all (so no group is ever left below its minimum by a preemption).

1. Targets: the ``needed`` members of least demand (those a MinMember quota counts).
2. Room: targets most constrained first; each goes where it fits now (beside the targets
   already nominated, spread on clusters of their own), else on the cluster where the fewest
   victims make it fit: on each of its clusters (at most ``EXAMINED`` with candidates),
   candidates running there are taken in victim order until it fits, and those not needed
   after all dropped, latest first; fewest victims win, then the lowest highest priority,
   then the name. A victim leaves every cluster it runs on.
3. Quota: with those victims out of quota, while the group's counted demand (all its pending
   members', or its minimum's with ``gang.admitOn: MinMember``) is short, quota candidates are
   taken as for a single job (at most ``TRIED``), then the ones not needed dropped.
4. All or nothing: a target that no cluster takes, a quota still short, more than
   ``MOST_VICTIMS`` victims or ``BUDGET`` fit checks spent, and nobody is preempted.

Otherwise the victims get ``Preempt``, and every member ``Preempting`` with the victims (the
targets nominated to their cluster); the group's quota and the room its victims do not free
are held for the rest of the cycle, and the next cycles admit it once the victims are gone.
It is a greedy heuristic: a target's cluster is chosen before later targets are looked at, so
it may miss a set that needed an early target elsewhere (on a cluster with costlier victims),
and a member placed where it fits now is not moved to make room for another.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from engine import vectors
from engine.cycle.groups.formation import PENDING, Unit, smallest
from engine.cycle.groups.place import Outcome, Placing, hardness, members_of
from engine.cycle.jobs.model import AdmittedJob, PendingJob
from engine.cycle.jobs.reading import pod_key
from engine.cycle.placement.capacity import ClusterState
from engine.cycle.preemption.ranking import Searching, victims_rank
from engine.cycle.preemption.search import MOST_VICTIMS, TRIED, Search, allowed
from engine.cycle.preemption.victims import VictimIndex, put_back, stays_at_guarantee
from engine.cycle.quota.tree import QuotaNode, QuotaTree
from engine.cycle.reasons import Reason

BUDGET = 5_000
"""Fit checks one group's victim search may make before it gives up (preempting nobody)."""
EXAMINED = 8
"""Clusters with candidates a target's victims are searched on."""
HELPED = frozenset({Reason.WAITING_FOR_QUOTA, Reason.NO_CLUSTER_FITS})


@dataclass
class Preempted:
    outcome: Outcome  # every member's Preempting decision
    victims: list[tuple[AdmittedJob, PendingJob, bool]]  # (victim, member it is for, reclaim)


@dataclass
class _Trial:
    """The clusters with the chosen victims gone and the targets nominated, as copies."""

    clusters: Mapping[str, ClusterState]
    copies: dict[str, ClusterState]
    used: set[str]
    checks: int = 0

    def state(self, name: str) -> ClusterState:
        found = self.copies.get(name)
        return found if found is not None else self.clusters[name]

    def own(self, name: str) -> ClusterState:
        if name not in self.copies:
            self.copies[name] = self.clusters[name].copy()
        return self.copies[name]

    def fits(self, state: ClusterState, job: PendingJob) -> bool:
        self.checks += 1
        return state.fits(job.pods, job.demand, job.pod_key or pod_key(job.pods))


def may_help(outcome: Outcome) -> bool:
    """Whether ``outcome`` (a group not admitted) is one victims could change."""
    return not outcome.admitted and bool(outcome.decisions) and outcome.decisions[0][1] in HELPED


def attempt(cycle: Searching, unit: Unit, leaf: QuotaNode, refused: Outcome) -> Preempted | None:
    """Victims that let ``unit``'s minimum in at once, taken now; None: nobody is preempted
    (``refused`` stands). Like a single job's, at most one search per queue per cycle."""
    if not may_help(refused) or leaf.name in cycle.searched or cycle.victims_spent():
        return None
    queue = cycle.policies.queue(leaf.name)
    if queue is None or not allowed(queue):
        return None
    quota, index = cycle.quota, cycle.victims
    lowest = min(m.mapped.priority for m in unit.members)
    representative = unit.representative
    if representative.mapped.priority != lowest:
        representative = replace(
            representative, mapped=replace(representative.mapped, priority=lowest)
        )
    with index.gone(quota):  # what earlier victims free is not paid for again
        search = Search(representative, leaf, queue, quota, index)
        if not (search.owners or search.lower) or search.hopeless():
            return None
        cycle.searched[leaf.name] = unit.representative.ref
        chosen = _choose(unit, search, cycle.placer, cycle.clusters)
    if chosen is None or cycle.victims_spent(len(chosen[1])):
        return None
    nominated, victims = chosen  # taken with the earlier victims counted again: they still run
    return _take(unit, leaf, quota, index, cycle.clusters, search, nominated, victims, refused)


def _choose(
    unit: Unit, search: Search, placer: Placing, clusters: Mapping[str, ClusterState]
) -> tuple[list[tuple[PendingJob, str]], dict[str, tuple[AdmittedJob, PendingJob]]] | None:
    """(target, cluster) and victim ref → (victim, the member it is taken for), or None."""
    members = members_of(replace(unit, members=_targets(unit)), placer, clusters)
    order = sorted(members, key=lambda m: hardness(m, clusters))
    trial = _Trial(clusters, {}, set(unit.taken) if unit.spec.spread else set())
    victims: dict[str, tuple[AdmittedJob, PendingJob]] = {}
    taken_from: dict[str, dict[str, int]] = {}  # reclaimed queue → the demand taken from it
    nominated: list[tuple[PendingJob, str]] = []
    for member in order:
        job = member.job
        options = [n for n in member.options if n not in trial.used]
        where = next((n for n in options if trial.fits(trial.state(n), job)), None)
        found: list[AdmittedJob] = []
        if where is None:
            best = _cheapest(job, options, search, trial, victims, taken_from)
            if best is None or trial.checks > BUDGET:
                return None
            where, found = best
        for victim in found:
            victims[victim.ref] = (victim, job)
            if victim.mapped.queue in search.owners:
                vectors.add_into(taken_from.setdefault(victim.mapped.queue, {}), victim.demand)
            for name, pods in victim.pods.items():
                if name in clusters:
                    trial.own(name).release(pods)
        trial.own(where).place(job.pods)
        if unit.spec.spread:
            trial.used.add(where)
        nominated.append((job, where))
    if len(victims) > MOST_VICTIMS:
        return None
    first = nominated[0][0]
    extra = _for_quota(search, [v for v, _ in victims.values()])
    if extra is None or len(victims) + len(extra) > MOST_VICTIMS or not (victims or extra):
        return None
    victims.update((v.ref, (v, first)) for v in extra)
    return nominated, victims


def _targets(unit: Unit) -> tuple[PendingJob, ...]:
    """The ``needed`` members of least demand (those a MinMember quota counts), in queue
    order."""
    chosen = {j.ref for j in smallest(unit.members, unit.needed)}
    return tuple(j for j in unit.members if j.ref in chosen)


def _cheapest(
    job: PendingJob,
    options: Sequence[str],
    search: Search,
    trial: _Trial,
    victims: Mapping[str, Any],
    taken_from: Mapping[str, Mapping[str, int]],
) -> tuple[str, list[AdmittedJob]] | None:
    """The cluster of ``options`` where the fewest more victims make ``job`` fit."""
    best: tuple[tuple[int, int, int, str], list[AdmittedJob]] | None = None
    examined = 0
    for name in options:
        near = [v for v in search.near(name) if v.ref not in victims]  # in victim order
        if not near:
            continue
        examined += 1
        found = _on_cluster(job, trial.state(name), name, near, search, trial, taken_from)
        if found:
            rank = victims_rank(found, name, search.index)
            if best is None or rank < best[0]:
                best = (rank, found)
        if examined >= EXAMINED or trial.checks > BUDGET:
            break
    return (best[0][-1], best[1]) if best else None


def _on_cluster(
    job: PendingJob,
    state: ClusterState,
    name: str,
    near: Sequence[AdmittedJob],
    search: Search,
    trial: _Trial,
    taken_from: Mapping[str, Mapping[str, int]],
) -> list[AdmittedJob]:
    """Victims on cluster ``name`` that make ``job`` fit there (empty: none do)."""
    copy = state.copy()
    taken: list[AdmittedJob] = []
    mine: dict[str, dict[str, int]] = {}
    for victim in near:
        if not _keeps(search, victim, taken_from, mine):
            continue
        taken.append(victim)
        if victim.mapped.queue in search.owners:
            vectors.add_into(mine.setdefault(victim.mapped.queue, {}), victim.demand)
        copy.release(victim.pods[name])
        if trial.fits(copy, job):
            break
        if len(taken) > MOST_VICTIMS or trial.checks > BUDGET:
            return []
    else:
        return []
    for victim in reversed(taken[:-1]):  # drop the ones not needed after all, latest first
        copy.retake(victim.pods[name])
        if trial.fits(copy, job):
            taken.remove(victim)
        else:
            copy.release(victim.pods[name])
    return taken


def _keeps(
    search: Search,
    victim: AdmittedJob,
    taken_from: Mapping[str, Mapping[str, int]],
    more: Mapping[str, Mapping[str, int]] | None = None,
) -> bool:
    """Whether a reclaimed victim's queue stays at its guarantee with it taken too."""
    queue = victim.mapped.queue
    if queue not in search.owners:
        return True
    owner = search.quota.node(queue)
    if owner is None:
        return False
    taken = vectors.total(
        [(taken_from.get(queue, {}), 1), ((more or {}).get(queue, {}), 1), (victim.demand, 1)]
    )
    return stays_at_guarantee(owner, taken, search.guarded(queue))


def _for_quota(search: Search, victims: Sequence[AdmittedJob]) -> list[AdmittedJob] | None:
    """More victims the group's quota needs with ``victims`` gone (None: no set found). They
    are out of quota during the search, so a reclaimed queue's usage shows them gone."""
    quota, leaf, demand = search.quota, search.leaf, search.job.demand
    out = [(node, v.demand) for v in victims if (node := quota.node(v.mapped.queue))]
    extra: list[tuple[AdmittedJob, QuotaNode]] = []
    with quota.trial():
        try:
            for node, amount in out:
                quota.remove(node, amount)
            short = quota.deficit(leaf, demand)
            taken = {v.ref for v in victims}
            tried = 0
            for victim in search.quota_candidates() if short else ():
                if not short or tried >= TRIED:
                    break
                node = quota.node(victim.mapped.queue)
                if victim.ref in taken or node is None:
                    continue
                if not any(victim.demand.get(r, 0) for r in short):
                    continue
                tried += 1
                if not _keeps(search, victim, {}):  # its queue's usage shows the others gone
                    continue
                extra.append((victim, node))
                out.append((node, victim.demand))
                quota.remove(node, victim.demand)
                short = quota.deficit(leaf, demand)
            if short or quota.check(leaf, demand) is not None:
                return None
            for victim, node in reversed(extra[:-1]):  # not needed after all: put back
                quota.add(node, victim.demand)
                if quota.check(leaf, demand) is None:
                    extra.remove((victim, node))
                    out.remove((node, victim.demand))
                else:
                    quota.remove(node, victim.demand)
        finally:
            put_back(quota, out)
    return [victim for victim, _ in extra]


def _take(
    unit: Unit,
    leaf: QuotaNode,
    quota: QuotaTree,
    index: VictimIndex,
    clusters: Mapping[str, ClusterState],
    search: Search,
    nominated: list[tuple[PendingJob, str]],
    victims: dict[str, tuple[AdmittedJob, PendingJob]],
    refused: Outcome,
) -> Preempted:
    """Take the victims; hold the group's quota, and on each nominated cluster what they do
    not free, for the rest of the cycle (they run until they terminate)."""
    taken = sorted((v for v, _ in victims.values()), key=lambda v: index.rank[v.ref])
    index.take(taken)
    quota.add(leaf, unit.representative.demand)
    need: dict[str, dict[str, int]] = {}
    for job, where in nominated:
        vectors.add_into(need.setdefault(where, {}), job.demand)
    for where, demand in sorted(need.items()):
        freed = vectors.total((v.usage.get(where, {}), 1) for v in taken)
        clusters[where].take(vectors.beyond(demand, freed))
    why = refused.decisions[0][2]
    names = ", ".join(v.ref for v in taken)
    placed = ", ".join(f"{_short(job)} → {where}" for job, where in nominated)
    message = (
        f"{why}; preempting {names} makes room for {len(nominated)} of its members at once "
        f"({placed})"
    )
    outcome = Outcome(state=PENDING)
    where_of = {job.ref: where for job, where in nominated}
    for job in unit.members:
        extra: dict[str, Any] = {"victims": tuple(taken)}
        if job.ref in where_of:
            extra["assignments"] = ((where_of[job.ref], job.pods),)
        outcome.decisions.append((job, Reason.PREEMPTING, message, extra))
    found = [(v, victims[v.ref][1], v.mapped.queue in search.owners) for v in taken]
    return Preempted(outcome, found)


def _short(job: PendingJob) -> str:
    return job.workload.name if job.workload is not None else job.ref
