"""Which cluster a preemption search takes its victims on.

Clusters are tried in order of a lower bound on the victims they need (``Search.lower_bound``:
the fewest candidates whose amounts could cover what is missing, by totals and by the pods of
each group the nodes lack room for), at most ``EXAMINED`` of them; a cluster whose bound
exceeds the fewest victims found so far is not tried, nor one where no victims could rank
before the best found (``Search.least_rank``: too few of them, or none of low enough priority).
The cluster needing the fewest victims wins, then the one whose victims have the lowest
priorities, then the one whose victims lose the least work, then the first by name.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from engine.cycle.groups.place import Placing
from engine.cycle.jobs.model import AdmittedJob, PendingJob
from engine.cycle.jobs.reading import pod_key
from engine.cycle.placement.capacity import ClusterState
from engine.cycle.preemption.search import MOST_VICTIMS, Search, allowed
from engine.cycle.preemption.victims import VictimIndex
from engine.cycle.quota.tree import QuotaNode, QuotaTree
from engine.policy.model import Queue
from engine.policy.policyset import PolicySet

EXAMINED = 8  # clusters given the full victim search in one preemption attempt


@dataclass(frozen=True, slots=True)
class Preemption:
    cluster: str
    victims: tuple[AdmittedJob, ...]
    reclaim: frozenset[str]  # refs of victims taken by reclaim (the rest: lower priority)


class Searching(Protocol):
    """What a preemption search (a job's here, a group's in ``groups_preempt``) needs of
    ``engine.cycle.cycle.FullCycle``."""

    policies: PolicySet
    quota: QuotaTree
    victims: VictimIndex
    placer: Placing
    clusters: dict[str, ClusterState]
    searched: dict[str, str]  # queue → the job (ref) that had its search this cycle
    # (queue, priority, pods, victims taken) → the job (ref) whose search found nobody
    no_victims: dict[tuple[Any, ...], str]

    def victims_spent(self, more: int = 0) -> bool: ...


def search(cycle: Searching, job: PendingJob, leaf: QuotaNode) -> Preemption | None:
    """The victims ``job`` takes, or None: its queue had its search this cycle, may not
    preempt, the cycle's ``maxVictimsPerCycle`` is spent, or nobody it may take makes it fit
    (remembered in ``no_victims`` for jobs of its shape until more victims are taken)."""
    if leaf.name in cycle.searched or cycle.victims_spent():
        return None
    queue = cycle.policies.queue(leaf.name)
    if queue is None or not allowed(queue):
        return None
    pods = job.pod_key or pod_key(job.pods)
    shape = (leaf.name, job.mapped.priority, pods, len(cycle.victims.taken))
    if shape in cycle.no_victims:
        return None
    with cycle.victims.gone(cycle.quota):  # what earlier victims free is not paid for again
        chosen = _search(cycle, job, leaf, queue)
    if chosen is None:
        cycle.no_victims[shape] = job.ref
    return chosen


def _search(cycle: Searching, job: PendingJob, leaf: QuotaNode, queue: Queue) -> Preemption | None:
    found = Search(job, leaf, queue, cycle.quota, cycle.victims)
    if not (found.owners or found.lower) or found.hopeless():
        return None  # nobody it may take, or not enough
    names = cycle.placer.candidates(job, cycle.placer.job_key(job)).names
    clusters = cycle.clusters
    targets = [n for n in names if clusters[n].could_ever_hold(job.pods, job.demand)]
    if not targets:
        return None
    cycle.searched[leaf.name] = job.ref
    chosen = choose(found, clusters, targets)
    if chosen is not None and cycle.victims_spent(len(chosen.victims)):
        chosen = None  # more than this cycle may still preempt: the next cycle tries again
    return chosen


def choose(
    search: Search, clusters: Mapping[str, ClusterState], targets: Sequence[str]
) -> Preemption | None:
    """The best (cluster, victims) that makes the job fit, or None (the caller has ruled out
    a ``hopeless`` search)."""
    if search.short and not search.quota_reachable():
        return None
    ranked: list[tuple[int, str]] = []
    ones = 0  # clusters whose bound is the least there is: the first ``EXAMINED`` by name win
    for name in sorted(targets):
        bound = search.lower_bound(clusters[name])
        if bound is not None and bound <= MOST_VICTIMS:
            ranked.append((bound, name))
            ones += bound == 1
            if ones == EXAMINED:
                break
    ranked.sort()
    best: tuple[tuple, Preemption] | None = None
    for bound, name in ranked[:EXAMINED]:
        if (best is not None and bound > best[0][0]) or search.quota_failed:
            break
        near = search.near(name)
        if best is not None and search.least_rank(clusters[name], bound, near) >= best[0]:
            continue  # no set of victims here could rank before the best one
        chosen = search.on_cluster(clusters[name], near)
        if not chosen:
            continue
        rank = victims_rank(chosen, name, search.index)
        if best is None or rank < best[0]:
            reclaim = frozenset(v.ref for v in chosen if v.mapped.queue in search.owners)
            best = (rank, Preemption(name, tuple(chosen), reclaim))
    return best[1] if best else None


def victims_rank(
    victims: Sequence[AdmittedJob], cluster: str, index: VictimIndex
) -> tuple[int, int, float, int, str]:
    """How a set of victims on ``cluster`` ranks against another: fewer victims first, then
    the lower highest priority, the less work lost (``protection.work_lost``), the lower
    priority sum, the cluster name."""
    priorities = [v.mapped.priority for v in victims]
    lost = sum(index.lost(v) for v in victims)
    return (len(priorities), max(priorities), lost, sum(priorities), cluster)
