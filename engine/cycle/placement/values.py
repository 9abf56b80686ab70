"""The CEL variables of placement expressions: ``cluster`` from a cluster's state in the cycle,
and ``job`` with what the job's binding says of its time in the queue.

A placement ``job`` is the mapping's ``job`` (``JobValues``) plus ``queuedAt`` (the binding's
``fleetgate.io/queued-at``, reset by a requeue; else its creation), ``excludedClusters`` (the
clusters of ``fleetgate.io/excluded-clusters`` whose exclusion still holds at ``now``) and
``excludedRegions`` (their regions). The wrapper is built only when an expression reads one of
those fields (``reads_placed``); otherwise placement passes the ``JobValues`` themselves.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Hashable, Iterable, Iterator, Mapping
from typing import Any

from engine import annotations as ann
from engine.cycle.placement.capacity import ClusterState
from engine.cycle.quota.tree import QuotaTree
from engine.fleet.model import ClusterView
from engine.policy.access import Path, Projector
from engine.policy.policyset import PolicySet

REGION_LABEL = "topology.kubernetes.io/region"
PLACED_FIELDS = ("queuedAt", "excludedClusters", "excludedRegions")


def cluster_region(view: ClusterView) -> str:
    """Karmada's ``spec.region``; when it is empty, the well-known label
    ``topology.kubernetes.io/region`` on the Cluster; else ``""``."""
    return view.region or view.labels.get(REGION_LABEL, "")


def cluster_values(state: ClusterState) -> dict[str, Any]:
    """The CEL ``cluster`` variable; ``free`` is the cycle's current free capacity."""
    view = state.view
    return {
        "name": view.name,
        "labels": dict(view.labels),
        "provider": view.provider,
        "region": cluster_region(view),
        "zones": list(view.zones),
        "allocatable": view.allocatable.to_floats(),
        "free": {k: max(v, 0) / 1000 for k, v in state.free.items()},
        "ready": view.ready,
        "taints": [{"key": t.key, "value": t.value, "effect": t.effect} for t in view.taints],
    }


def reads_placed(paths: Iterable[Path]) -> bool:
    """Whether expressions reading these paths need the placement fields of ``job``."""
    return any(p[0] == "job" and (len(p) == 1 or p[1] in PLACED_FIELDS) for p in paths)


class PlacedJob(Mapping[str, Any]):
    """The CEL ``job`` of placement: ``values`` and the fields read from the binding."""

    __slots__ = ("_extra", "_part", "values")

    def __init__(self, values: Mapping[str, Any], extra: Mapping[str, Any]) -> None:
        self.values = values
        self._extra = extra
        self._part: tuple[Projector, Hashable] | None = None

    def part(self, projector: Projector) -> Hashable:
        """``projector.part("job", self)``, kept for the last projector asked."""
        found = self._part
        if found is None or found[0] is not projector:
            found = self._part = (projector, projector.part("job", self))
        return found[1]

    def __getitem__(self, key: str) -> Any:
        if key in self._extra:
            return self._extra[key]
        return self.values[key]

    def __iter__(self) -> Iterator[str]:
        yield from self.values
        yield from self._extra

    def __len__(self) -> int:
        return len(self.values) + len(self._extra)


def placed_job(
    values: Mapping[str, Any],
    binding_annotations: Mapping[str, str],
    queued_at: dt.datetime,
    now: dt.datetime,
    clusters: Mapping[str, ClusterState],
) -> PlacedJob:
    exclusions = ann.parse_exclusions(binding_annotations.get(ann.EXCLUDED_CLUSTERS, ""))
    excluded = sorted(name for name, until in exclusions.items() if until > now)
    regions = {cluster_region(clusters[n].view) for n in excluded if n in clusters}
    extra = {
        "queuedAt": queued_at,
        "excludedClusters": excluded,
        "excludedRegions": sorted(regions - {""}),
    }
    return PlacedJob(values, extra)


def queue_values(policies: PolicySet, quota: QuotaTree, name: str) -> dict[str, Any]:
    """The CEL ``queue`` variable of queue ``name``."""
    queue = policies.queue(name)
    node = quota.node(name)
    if queue is None or node is None:
        return {"name": name, "parent": "", "priority": 0, "weight": 0.0}
    return {
        "name": name,
        "parent": queue.parent or "",
        "priority": queue.priority,
        "weight": float(queue.weight),
        "guarantee": {k: float(v) for k, v in queue.guarantee.items()},
        "max": {k: float(v) for k, v in queue.max.items()},
        "usage": {k: v / 1000 for k, v in node.total.items()},
    }
