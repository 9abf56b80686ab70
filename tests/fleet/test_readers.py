"""Each reader on realistic objects, and malformed fields reported with their paths."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from engine.fleet.bindings import read_binding
from engine.fleet.clusters import read_cluster
from engine.fleet.priority import read_priority_class
from engine.fleet.propagation import read_policy
from engine.workloads.model import DemandError

from .builders import (
    binding_for,
    cluster,
    component,
    custom_job,
    policy,
    priority_class,
    pytorch_job,
)

GPU_MODELS = [
    {
        "grade": 0,
        "ranges": [
            {"name": "cpu", "min": "0", "max": "8"},
            {"name": "nvidia.com/gpu", "min": "0", "max": "8"},
        ],
    },
    {
        "grade": 1,
        "ranges": [
            {"name": "cpu", "min": "8", "max": "1024"},
            {"name": "nvidia.com/gpu", "min": "8", "max": "1024"},
        ],
    },
]


def test_cluster_reads_spec_and_status() -> None:
    view = read_cluster(
        cluster(
            "gpu-east",
            gpus=32,
            labels={"gpu.fleetgate.io/model": "h100"},
            taints=[{"key": "dedicated", "value": "ml", "effect": "NoSchedule"}],
            apis={"kubeflow.org/v1": ["PyTorchJob", "TFJob"], "v1": ["Pod"]},
            models=GPU_MODELS,
            modelings=[(1, 1), (0, 3)],
        )
    )
    assert view.name == "gpu-east"
    assert view.labels == {"gpu.fleetgate.io/model": "h100"}
    assert (view.provider, view.region, view.zones) == ("aws", "us-east-1", ("us-east-1a",))
    assert [(t.key, t.value, t.effect) for t in view.taints] == [("dedicated", "ml", "NoSchedule")]
    assert view.ready and view.ready_changed_at == dt.datetime(2025, 3, 9, 22, 14, 3, tzinfo=dt.UTC)
    assert ("kubeflow.org/v1", "TFJob") in view.api_enablements
    assert view.allocatable.get_amount("nvidia.com/gpu") == 32
    assert [m.grade for m in view.resource_models] == [0, 1]
    assert view.resource_models[1].ranges["nvidia.com/gpu"] == (8, 1024)
    assert view.allocatable_modelings == ((0, 3), (1, 1))


def test_deprecated_zone_is_used_when_zones_is_absent() -> None:
    obj = cluster("old", zones=())
    obj["spec"]["zone"] = "eu-1a"
    assert read_cluster(obj).zones == ("eu-1a",)


def test_a_cluster_without_ready_condition_is_not_ready() -> None:
    obj = cluster("new")
    obj["status"]["conditions"] = []
    assert not read_cluster(obj).ready


def test_binding_reads_karmada_fields() -> None:
    job = pytorch_job("llama")
    obj = binding_for(
        job,
        clusters=[("gpu-east", 0)],
        applied={"gpu-east": True},
        placement={"clusterAffinity": {"clusterNames": ["gpu-east"]}},
    )
    obj["metadata"]["annotations"] = {"fleetgate.io/admitted-at": "2025-03-10T09:01:00Z"}
    view = read_binding(obj)
    assert (view.namespace, view.name, view.kind) == (
        "research",
        "llama-pytorchjob",
        "ResourceBinding",
    )
    assert view.resource.key == ("kubeflow.org/v1", "PyTorchJob", "research", "llama")
    assert view.resource.uid == "uid-llama"
    assert (view.policy_kind, view.policy_permanent_id) == ("PropagationPolicy", "id-research-jobs")
    assert view.suspended_scheduling
    assert view.clusters == (("gpu-east", 0),)
    assert view.applied == {"gpu-east": True} and view.healthy("gpu-east")
    assert view.conditions == {"Scheduled": "True"}
    assert (view.generation, view.scheduler_observed_generation) == (2, 2)
    assert view.replica_requirements is None and view.components == ()
    assert view.placement is not None and view.placement.affinity is not None
    assert view.annotations["fleetgate.io/admitted-at"] == "2025-03-10T09:01:00Z"
    assert view.labels["fleetgate.io/managed"] == "true"


def test_binding_reads_replica_requirements_and_components() -> None:
    view = read_binding(
        binding_for(
            custom_job("x"),
            replicas=3,
            requests={"cpu": "500m", "nvidia.com/gpu": "1"},
            components=[
                component("launcher", 1, {"cpu": "2"}),
                component("worker", 4, {"nvidia.com/gpu": "8"}),
            ],
        )
    )
    assert view.replicas == 3
    assert view.replica_requirements == {"cpu": 0.5, "nvidia.com/gpu": 1}
    assert [(c.name, c.replicas) for c in view.components] == [("launcher", 1), ("worker", 4)]
    assert view.components[1].requests.get_amount("nvidia.com/gpu") == 8


def test_binding_claimed_by_a_cluster_policy() -> None:
    obj = binding_for(custom_job("x"))
    obj["metadata"]["labels"] = {"clusterpropagationpolicy.karmada.io/permanent-id": "cpp-1"}
    view = read_binding(obj)
    assert (view.policy_kind, view.policy_permanent_id) == ("ClusterPropagationPolicy", "cpp-1")


def test_policy_reads_placement_and_selectors() -> None:
    view = read_policy(
        policy(
            "research-jobs",
            priority=5,
            placement={
                "clusterAffinities": [
                    {"affinityName": "h100", "labelSelector": {"matchLabels": {"gpu": "h100"}}},
                    {"affinityName": "any", "exclude": ["cpu-spot"]},
                ],
                "clusterTolerations": [
                    {"key": "spot", "operator": "Exists", "effect": "NoSchedule"}
                ],
                "spreadConstraints": [{"spreadByField": "cluster", "maxGroups": 1, "minGroups": 1}],
            },
        )
    )
    assert (view.kind, view.namespace, view.name) == (
        "PropagationPolicy",
        "research",
        "research-jobs",
    )
    assert (view.permanent_id, view.priority) == ("id-research-jobs", 5)
    assert [name for name, _ in view.placement.affinities] == ["h100", "any"]
    assert view.placement.tolerations[0].operator == "Exists"
    assert view.placement.spread_constraints[0].max_groups == 1
    assert view.resource_selectors[0].kind == "PyTorchJob"


def test_cluster_policy_has_no_namespace() -> None:
    view = read_policy(policy("global", cluster_scoped=True))
    assert (view.kind, view.namespace, view.permanent_id) == (
        "ClusterPropagationPolicy",
        "",
        "id-global",
    )


def test_priority_class() -> None:
    view = read_priority_class(priority_class("standard", 500, default=True))
    assert (view.name, view.value, view.global_default) == ("standard", 500, True)
    assert read_priority_class(priority_class("low", -10)).value == -10


def _set(obj: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    *parents, last = path.split(".")
    node = obj
    for key in parents:
        node = node.setdefault(key, {})
    node[last] = value
    return obj


MALFORMED = [
    (
        "a cluster quantity that does not parse",
        read_cluster,
        cluster("c"),
        "status.resourceSummary.allocatable.cpu",
        "lots",
        "status.resourceSummary.allocatable.cpu",
    ),
    (
        "a cluster taint with an unknown effect",
        read_cluster,
        cluster("c"),
        "spec.taints",
        [{"key": "k", "effect": "Never"}],
        "spec.taints[0].effect",
    ),
    (
        "a cluster without a name",
        read_cluster,
        cluster("c"),
        "metadata.name",
        None,
        "metadata.name",
    ),
    (
        "a resource model whose max is not above min",
        read_cluster,
        cluster("c"),
        "spec.resourceModels",
        [{"grade": 0, "ranges": [{"name": "cpu", "min": "4", "max": "2"}]}],
        "spec.resourceModels[0].ranges[0]",
    ),
    (
        "apiEnablements without a groupVersion",
        read_cluster,
        cluster("c"),
        "status.apiEnablements",
        [{"resources": []}],
        "status.apiEnablements[0].groupVersion",
    ),
    (
        "a binding without spec.resource",
        read_binding,
        binding_for(custom_job("x")),
        "spec.resource",
        None,
        "spec.resource",
    ),
    (
        "a binding whose resource has no kind",
        read_binding,
        binding_for(custom_job("x")),
        "spec.resource.kind",
        None,
        "spec.resource.kind",
    ),
    (
        "a binding with replicas as text",
        read_binding,
        binding_for(custom_job("x")),
        "spec.replicas",
        "two",
        "spec.replicas",
    ),
    (
        "a binding with a bad resource request",
        read_binding,
        binding_for(custom_job("x"), replicas=1, requests={}),
        "spec.replicaRequirements.resourceRequest",
        {"cpu": "x"},
        "spec.replicaRequirements.resourceRequest.cpu",
    ),
    (
        "a binding with scheduling suspension as text",
        read_binding,
        binding_for(custom_job("x")),
        "spec.suspension.scheduling",
        "yes",
        "spec.suspension.scheduling",
    ),
    (
        "a binding target without a name",
        read_binding,
        binding_for(custom_job("x")),
        "spec.clusters",
        [{"replicas": 1}],
        "spec.clusters[0].name",
    ),
    (
        "a policy without resourceSelectors",
        read_policy,
        policy("p"),
        "spec.resourceSelectors",
        [],
        "spec.resourceSelectors",
    ),
    (
        "a policy toleration with a list as key",
        read_policy,
        policy("p"),
        "spec.placement.clusterTolerations",
        [{"key": ["a"]}],
        "spec.placement.clusterTolerations[0].key",
    ),
    (
        "a priority class without value",
        read_priority_class,
        priority_class("p", 1),
        "value",
        None,
        "value",
    ),
]


@pytest.mark.parametrize(
    ("reader", "obj", "field", "value", "path"),
    [pytest.param(r, o, f, v, p, id=desc) for desc, r, o, f, v, p in MALFORMED],
)
def test_malformed_fields_are_named(
    reader: Any, obj: dict[str, Any], field: str, value: Any, path: str
) -> None:
    with pytest.raises(DemandError) as info:
        reader(_set(obj, field, value))
    assert info.value.path == path
