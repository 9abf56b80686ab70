"""The members' scheduler-estimator answers, as the cycle uses them.

Before a pass the reconciler asks each Ready member's karmada-scheduler-estimator how many
pods of each shape the cycle may need it can start now (``shapes_wanted``), and puts the
answers in ``Snapshot.estimates``. An answer is exact at that moment; within the cycle, every
pod placed on the cluster since (an in-flight admission, or one this cycle made) lowers it by
as many pods of the shape as it could displace (``displaced``): a pod taking ``t`` of a
resource from one node leaves that node at most ``ceil(t / s)`` fewer pods needing ``s`` of it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence

from engine.cycle.jobs.cache import JobCache
from engine.cycle.jobs.model import PodGroup
from engine.cycle.jobs.reading import classify
from engine.fleet.model import PodShape, Snapshot
from engine.policy.policyset import PolicySet

MAX_SHAPES = 64  # pod shapes asked of each estimator in one pass; the rest use the models


def pod_shape(requests: Mapping[str, int]) -> PodShape:
    """The key of a pod's requests (milli-units) in ``Estimates.replicas``."""
    return tuple(sorted((r, v) for r, v in requests.items() if v))


def shapes_wanted(
    snapshot: Snapshot, policies: PolicySet, now: dt.datetime, cache: JobCache | None = None
) -> tuple[PodShape, ...]:
    """The pod shapes of the pending jobs, most pods first (at most ``MAX_SHAPES``). Pass the
    ``JobCache`` the cycle will use: the jobs are then read once."""
    pending = classify(snapshot, policies, cache if cache is not None else JobCache(), now).pending
    pods: dict[PodShape, int] = {}
    for job in pending:
        for group in job.pods:
            shape = pod_shape(group.requests)
            pods[shape] = pods.get(shape, 0) + group.count
    ranked = sorted(pods, key=lambda s: (-pods[s], s))
    return tuple(ranked[:MAX_SHAPES])


def displaced(placed: Sequence[PodGroup], shape: Mapping[str, int]) -> int:
    """At most how many pods needing ``shape`` the ``placed`` pods leave no room for."""
    lost = 0
    for group in placed:
        worst = 0
        for r, need in shape.items():
            if need > 0 and r != "pods":
                took = group.requests.get(r, 0)
                if took > 0:
                    worst = max(worst, -(-took // need))
        lost += worst * group.count
    return lost


def freed(released: Sequence[PodGroup], shape: Mapping[str, int]) -> int:
    """Pods needing ``shape`` the ``released`` pods' room holds, each pod's room on its own."""
    total = 0
    for group in released:
        most = None
        for r, need in shape.items():
            if need > 0 and r != "pods":
                n = group.requests.get(r, 0) // need
                if most is None or n < most:
                    most = n
        total += (most or 0) * group.count
    return total
