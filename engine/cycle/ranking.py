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

from engine.cycle.capacity import ClusterState
from engine.cycle.jobs import AdmittedJob
from engine.cycle.preemption import MOST_VICTIMS, Search
from engine.cycle.victims import VictimIndex

EXAMINED = 8  # clusters given the full victim search in one preemption attempt


@dataclass(frozen=True, slots=True)
class Preemption:
    cluster: str
    victims: tuple[AdmittedJob, ...]
    reclaim: frozenset[str]  # refs of victims taken by reclaim (the rest: lower priority)


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
