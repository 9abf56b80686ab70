"""The null cycle: the floor a scheduling cycle is measured against in ``fleetgate bench``.

Sort the pending jobs by their order key, then place each job's demand vector (its pods summed,
one number per resource) on the first Ready cluster whose free vector still holds it, skipping
at once a job that exceeds, in some resource, the most any cluster has free, or whose demand
vector has failed before (rooms only shrink, so it fails again): no queues, quotas,
gangs, node shapes, scores, preemption or reasons. :func:`prepare` turns the jobs and clusters
the full cycle read (its JobCache warm) into tuples over one list of resources, untimed, as the
cycle's own cache holds its jobs ready; :func:`null_cycle` is what is timed: an ordering, and a
look at the clusters per job. Issue 34 states the full cycle's target as a multiple of it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

Prepared = tuple[list[tuple[Any, tuple[int, ...]]], list[list[int]]]


def prepare(
    jobs: Iterable[tuple[Any, Mapping[str, int]]], clusters: Sequence[Mapping[str, int]]
) -> Prepared:
    """(order key, demand tuple) per job and a free list per cluster, over the same resources."""
    listed = list(jobs)
    names = sorted({name for _, demand in listed for name in demand})
    vectors = [(key, tuple(demand.get(name, 0) for name in names)) for key, demand in listed]
    return vectors, [[free.get(name, 0) for name in names] for free in clusters]


def null_cycle(prepared: Prepared) -> int:
    """How many jobs first fit lands; the clusters' free lists are copied, not changed."""
    jobs, clusters = prepared
    rooms = [list(room) for room in clusters]
    if not rooms:
        return 0
    most = [max(column) for column in zip(*rooms, strict=True)]
    admitted = 0
    failed: set[tuple[int, ...]] = set()  # rooms only shrink: a demand that failed fails again
    for _, demand in sorted(jobs, key=_first):
        if demand in failed:
            continue
        if any(amount > top for amount, top in zip(demand, most, strict=True)):
            failed.add(demand)
            continue
        for room in rooms:
            if all(free >= amount for free, amount in zip(room, demand, strict=True)):
                for index, amount in enumerate(demand):
                    room[index] -= amount
                most = [max(column) for column in zip(*rooms, strict=True)]
                admitted += 1
                break
        else:
            failed.add(demand)
    return admitted


def _first(item: tuple[Any, tuple[int, ...]]) -> Any:
    return item[0]
