"""The demo's final summary as one JSON-ready document (``-o json`` prints it as is).

Per queue: jobs submitted, admitted, still pending; the wait from submission to the first
admission (p50, p95, simulated seconds); the queue's mean dominant share of the fleet while the
demo ran, its share among its sibling queues, and its weight among them (what fair sharing
aims at within a priority tier). Per cluster: mean utilisation of its headline resource (GPUs,
else batch CPU, else CPU) from the ``allocated``/``allocatable`` its Cluster status reported.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence
from typing import Any

from engine.policy.policyset import PolicySet
from sandbox.demo.failure import Failure, rescheduling_available
from sandbox.demo.jobs import TENANT_MIX, PlannedJob
from sandbox.demo.observe import FINISHED, Tracker

UNDECIDED = frozenset({"unbound", "held"})


def percentile(values: Sequence[float], fraction: float) -> float | None:
    """The nearest-rank percentile; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]


def build(
    tracker: Tracker,
    failure: Failure,
    policies: PolicySet,
    *,
    seed: int,
    speed: float,
    simulated: float,
    wall: float,
    stopped: str,
    started: dt.datetime,
) -> dict[str, Any]:
    jobs = tracker.jobs
    counts = tracker.counts()
    submitted = [j for j in jobs if j.binding in tracker.submitted]
    lost = [j.binding for j in submitted if tracker.state(j).state in UNDECIDED]
    return {
        "seed": seed,
        "speed": speed,
        "simulatedSeconds": round(simulated),
        "wallSeconds": round(wall, 1),
        "stopped": stopped,
        "policyVersion": policies.version,
        "jobs": {
            "planned": len(jobs),
            "submitted": len(submitted),
            "refused": len(tracker.refused),
            "finished": sum(counts.get(s, 0) for s in FINISHED),
            "states": dict(sorted(counts.items())),
            "lost": lost,
        },
        "tenants": _tenants(tracker),
        "queues": _queues(tracker, policies),
        "clusters": _clusters(tracker),
        "pendingReasons": dict(sorted(tracker.reasons_seen.items(), key=lambda kv: -kv[1])),
        "failure": _failure(tracker, failure, started),
    }


def _tenants(tracker: Tracker) -> dict[str, dict[str, int]]:
    found = {}
    for tenant in TENANT_MIX:
        mine = [j for j in tracker.jobs if j.tenant == tenant]
        found[tenant] = {
            "submitted": sum(1 for j in mine if j.binding in tracker.submitted),
            "admitted": sum(1 for j in mine if j.binding in tracker.admitted_at),
            "finished": sum(1 for j in mine if tracker.state(j).state in FINISHED),
        }
    return found


def _queues(tracker: Tracker, policies: PolicySet) -> list[dict[str, Any]]:
    used = {j.queue for j in tracker.jobs}
    shown = sorted(
        {q.name for q in policies.queues if q.name in used}
        | {q.parent for q in policies.queues if q.name in used and q.parent}
    )
    rows = []
    for name in shown:
        queue = policies.queue(name)
        assert queue is not None
        siblings = [q for q in policies.queues if q.parent == queue.parent and q.name in shown]
        weights = sum(q.weight for q in siblings)
        shares = sum(tracker.mean_share(q.name) for q in siblings)
        mine = [j for j in tracker.jobs if _within(j, name, policies)]
        waits = [w for j in mine if (w := tracker.wait_seconds(j)) is not None]
        rows.append(
            {
                "name": name,
                "parent": queue.parent,
                "priority": queue.priority,
                "submitted": sum(1 for j in mine if j.binding in tracker.submitted),
                "admitted": sum(1 for j in mine if j.binding in tracker.admitted_at),
                "pending": sum(1 for j in mine if tracker.state(j).state == "pending"),
                "waitP50Seconds": _round(percentile(waits, 0.5)),
                "waitP95Seconds": _round(percentile(waits, 0.95)),
                "fleetShare": round(tracker.mean_share(name), 3),
                "siblingShare": round(tracker.mean_share(name) / shares, 3) if shares else None,
                "weight": queue.weight,
                "siblingWeight": round(queue.weight / weights, 3) if weights else None,
            }
        )
    return rows


def _within(job: PlannedJob, queue: str, policies: PolicySet) -> bool:
    name: str | None = job.queue
    while name:
        if name == queue:
            return True
        found = policies.queue(name)
        name = found.parent if found is not None else None
    return False


def _clusters(tracker: Tracker) -> list[dict[str, Any]]:
    return [
        {
            "name": name,
            "resource": sample["resource"],
            "capacity": float(sample["total"]),
            "utilisation": round(tracker.utilisation(name), 3),
            "ready": sample["ready"],
        }
        for name, sample in sorted(tracker.clusters.items())
    ]


def _failure(tracker: Tracker, failure: Failure, started: dt.datetime) -> dict[str, Any]:
    def offset(when: dt.datetime | None) -> float | None:
        return round((when - started).total_seconds()) if when else None

    outcomes, before = failure.outcomes(tracker)
    tally: dict[str, int] = {}
    for outcome in outcomes:
        tally[outcome["outcome"]] = tally.get(outcome["outcome"], 0) + 1
    return {
        "cluster": failure.cluster,
        "downAtSeconds": offset(failure.down_at),
        "upAtSeconds": offset(failure.up_at),
        "reschedulingAvailable": rescheduling_available(),
        "affected": outcomes,
        "endedBeforeFailure": before,
        "outcomes": tally,
    }


def _round(value: float | None) -> int | None:
    return None if value is None else round(value)
