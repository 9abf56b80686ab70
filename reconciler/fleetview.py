"""The fleet as the dashboard's Fleet page shows it: each cluster's health and capacity, the
policy set's state, and each queue's share over time (``reconciler.history``).

Built from one pass (its snapshot's clusters and the jobs it holds admitted) on request;
aggregate numbers only, never a job of anyone, so whoever may ``get fleets`` may read it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from engine import vectors
from engine.annotations import format_time
from engine.fleet.model import ClusterView
from engine.policy.reload import ReloadStatus
from engine.vectors import Vec
from reconciler.history import FleetHistory, Sample
from reconciler.jobsview import PassView

NAME = "current"  # the one Fleet object
POINTS = 60  # at most this many points of a queue's history in a queue's item


def admitted_by_cluster(view: PassView) -> dict[str, Vec]:
    """What fleetgate holds admitted on each cluster: each admitted job's demand, split over its
    clusters by its pods there."""
    found: dict[str, Vec] = {}
    for entry in view.jobs:
        if entry.state != "admitted":
            continue
        record = view.result.jobs.get(entry.ref)
        placed = entry.decision.clusters
        pods = sum(c.replicas for c in placed)
        if record is None or pods <= 0:
            continue
        for cluster in placed:
            part = {k: v * cluster.replicas // pods for k, v in record.demand.items()}
            vectors.add_into(found.setdefault(cluster.name, {}), part)
    return found


def fleet_json(
    view: PassView,
    clusters: Sequence[ClusterView],
    status: ReloadStatus | None,
    history: FleetHistory,
) -> dict[str, Any]:
    admitted = admitted_by_cluster(view)
    return {
        "metadata": {"name": NAME},
        "decidedAt": format_time(view.result.now),
        "historySince": _time(history.started),
        "policy": _policy(view.result.policy_version, status),
        "clusters": [_cluster(c, admitted.get(c.name, {}), history) for c in clusters],
    }


def _cluster(cluster: ClusterView, admitted: Vec, history: FleetHistory) -> dict[str, Any]:
    return {
        "name": cluster.name,
        "region": cluster.region or None,
        "ready": cluster.ready,
        "readyChangedAt": _time(cluster.ready_changed_at),
        "allocatable": cluster.allocatable.to_json(),
        "allocated": (cluster.allocated + cluster.allocating).to_json(),
        "admitted": vectors.to_json(admitted),
        "notReady": [
            {"since": _time(s.since), "until": _time(s.until)} for s in history.spells(cluster.name)
        ],
    }


def _policy(version: str, status: ReloadStatus | None) -> dict[str, Any]:
    if status is None:
        return {"version": version}
    return {
        "version": version,
        "healthy": status.healthy,
        "loadedAt": _time(status.loaded_at),
        "lastAttemptAt": _time(status.last_attempt_at),
        "errors": [str(e) for e in status.errors[:20]],
        "fallback": status.fallback,
        "reloads": status.reloads,
        "failures": status.failures,
    }


def queue_histories(
    samples: Sequence[Sample], queues: Sequence[str], points: int = POINTS
) -> dict[str, dict[str, Any]]:
    """:func:`queue_history` of each of ``queues``, the samples read once."""
    kept: dict[str, list[Sample]] = {q: [] for q in queues}
    for sample in samples:
        for queue in sample.queues.keys() & kept.keys():
            kept[queue].append(sample)
    return {q: queue_history(found, q, points) for q, found in kept.items()}


def queue_history(samples: Sequence[Sample], queue: str, points: int = POINTS) -> dict[str, Any]:
    """One queue's share and GPUs over ``samples``: at most ``points`` of them, evenly picked,
    the newest always; times as seconds after ``start``."""
    kept = [s for s in samples if queue in s.queues]
    if not kept:
        return {"start": None, "points": []}
    step = -(-len(kept) // points)  # ceil
    picked = kept[::-1][::step][::-1]
    start = picked[0].at
    return {
        "start": format_time(start),
        "points": [
            [round((s.at - start).total_seconds()), s.queues[queue].share, s.queues[queue].gpus]
            for s in picked
        ],
    }


def _time(value: dt.datetime | None) -> str | None:
    return format_time(value) if value is not None else None
