"""What Karmada's cluster status controller reports for a member, and the whole Cluster object.

Follows ``pkg/controllers/status/cluster_status_controller.go``:

* ``resourceSummary.allocatable``: the sum of the nodes' allocatable (``pods`` included);
* ``allocated``: requests of the pods bound to a node (``nodeName`` set) and not finished,
  plus their count as ``pods``;
* ``allocating``: requests of the pods not bound yet (no ``nodeName``), plus their count;
* ``allocatableModelings``: nodes per grade of ``spec.resourceModels`` by what each has free
  (``engine.members.grades``);
* ``nodeSummary``: every simulated node is Ready;
* the annotation ``fleetgate.io/node-shapes`` (the sandbox and the simulator know their nodes):
  the allocatable of each kind of node, as ``engine.fleet.nodeshape.annotation`` writes it;
* the ``Ready`` condition keeps its ``lastTransitionTime`` while its status is unchanged; an
  unreachable member gets only the condition, the rest stays as last collected.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from engine import annotations as ann
from engine.fleet.model import ResourceModel
from engine.fleet.nodeshape import annotation, quantity_text
from engine.members.grades import allocatable_modelings, default_models
from engine.members.model import MemberCluster
from engine.resources import Resources

API_VERSION = "cluster.karmada.io/v1alpha1"
READY = ("True", "ClusterReady", "cluster is healthy and ready to accept workloads")
NOT_READY = ("False", "ClusterNotReachable", "cluster is not reachable")
__all__ = [
    "cluster_object",
    "cluster_status",
    "models_json",
    "node_shapes_annotation",
    "quantity_text",
    "resource_models",
]


def resource_models(member: MemberCluster) -> tuple[ResourceModel, ...]:
    """The member's grades: as its fleet file entry gives them, else the defaults."""
    return member.spec.resource_models or default_models(member.spec.nodes)


def cluster_status(
    member: MemberCluster, now: dt.datetime, previous: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """``status`` of the member's Cluster at ``now``; ``previous`` is the last one reported."""
    previous = previous or {}
    ready = READY if member.ready else NOT_READY
    condition = {
        "type": "Ready",
        "status": ready[0],
        "reason": ready[1],
        "message": ready[2],
        "lastTransitionTime": _ready_since(previous, ready[0]) or timestamp(now),
    }
    if not member.ready:
        status = {k: v for k, v in previous.items() if k != "conditions"}
        return {**status, "conditions": [condition]}
    models = resource_models(member)
    nodes = member.nodes()
    return {
        "kubernetesVersion": member.spec.kubernetes_version,
        "apiEnablements": api_enablements(member.spec.served),
        "conditions": [condition],
        "nodeSummary": {"totalNum": len(nodes), "readyNum": len(nodes)},
        "resourceSummary": {
            "allocatable": resource_list(member.allocatable()),
            "allocated": resource_list(member.allocated()),
            "allocating": resource_list(member.allocating()),
            "allocatableModelings": [
                {"grade": grade, "count": count}
                for grade, count in allocatable_modelings(models, (n.free for n in nodes))
            ],
        },
    }


def cluster_object(
    member: MemberCluster, now: dt.datetime, previous: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The whole ``cluster.karmada.io/v1alpha1`` Cluster, status as ``cluster_status``."""
    spec = member.spec
    cluster_spec: dict[str, Any] = {"apiEndpoint": spec.endpoint, "syncMode": "Push"}
    if spec.provider:
        cluster_spec["provider"] = spec.provider
    if spec.region:
        cluster_spec["region"] = spec.region
    if spec.zones:
        cluster_spec["zones"] = list(spec.zones)
    if spec.taints:
        cluster_spec["taints"] = [_taint(t.key, t.value, t.effect) for t in spec.taints]
    cluster_spec["resourceModels"] = models_json(resource_models(member))
    metadata: dict[str, Any] = {"name": spec.name}
    if spec.labels:
        metadata["labels"] = dict(spec.labels)
    if spec.nodes:
        metadata["annotations"] = {ann.NODE_SHAPES: node_shapes_annotation(member)}
    return {
        "apiVersion": API_VERSION,
        "kind": "Cluster",
        "metadata": metadata,
        "spec": cluster_spec,
        "status": cluster_status(member, now, (previous or {}).get("status")),
    }


def node_shapes_annotation(member: MemberCluster) -> str:
    """``fleetgate.io/node-shapes`` of the member's node groups."""
    return annotation(g.allocatable for g in member.spec.nodes)


def models_json(models: tuple[ResourceModel, ...]) -> list[dict[str, Any]]:
    return [
        {
            "grade": m.grade,
            "ranges": [
                {"name": name, "min": quantity_text(name, low), "max": quantity_text(name, high)}
                for name, (low, high) in m.ranges.items()
            ],
        }
        for m in models
    ]


def api_enablements(kinds: tuple[tuple[str, str], ...]) -> list[dict[str, Any]]:
    """``status.apiEnablements``: by groupVersion, resources by name, as Karmada sorts them."""
    groups: dict[str, list[dict[str, str]]] = {}
    for api_version, kind in kinds:
        groups.setdefault(api_version, []).append({"name": plural(kind), "kind": kind})
    return [
        {"groupVersion": gv, "resources": sorted(rs, key=lambda r: r["name"])}
        for gv, rs in sorted(groups.items())
    ]


def plural(kind: str) -> str:
    """The resource name of a kind, as CRDs and the built-ins name them."""
    lower = kind.lower()
    if lower.endswith(("s", "x", "ch", "sh")):
        return lower + "es"
    if lower.endswith("y") and lower[-2:-1] not in "aeiou":
        return lower[:-1] + "ies"
    return lower + "s"


def resource_list(amounts: Resources) -> dict[str, str]:
    return {name: quantity_text(name, value) for name, value in amounts.items()}


def timestamp(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _ready_since(previous: Mapping[str, Any], status: str) -> str | None:
    for condition in previous.get("conditions") or ():
        if condition.get("type") == "Ready" and condition.get("status") == status:
            return condition.get("lastTransitionTime")
    return None


def _taint(key: str, value: str, effect: str) -> dict[str, Any]:
    """A taint as written (Karmada's API server, not the member, stamps NoExecute timeAdded)."""
    taint: dict[str, Any] = {"key": key, "effect": effect}
    if value:
        taint["value"] = value
    return taint
