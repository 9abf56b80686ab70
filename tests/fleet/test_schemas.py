"""Field names checked against the real Karmada schemas.

ResourceBindings and PropagationPolicies (from the builders and the example fleet) validate
against the CRDs' openAPIV3Schema, and carry no field the schema lacks (the API server would
prune it silently). Clusters have no CRD: their fields, and every field the reader reads, must
exist in the swagger definitions of cluster.karmada.io/v1alpha1.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from engine.fleet.files import read_objects

from .builders import binding_for, cluster, component, custom_job, policy, pytorch_job, small_fleet

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "fleet-snapshot.yaml"
DEFINITION = "com.github.karmada-io.karmada.pkg.apis.cluster.v1alpha1."
CRD_FILES = {
    "ResourceBinding": ("work.karmada.io_resourcebindings.yaml", "v1alpha2"),
    "ClusterResourceBinding": ("work.karmada.io_clusterresourcebindings.yaml", "v1alpha2"),
    "PropagationPolicy": ("policy.karmada.io_propagationpolicies.yaml", "v1alpha1"),
    "ClusterPropagationPolicy": ("policy.karmada.io_clusterpropagationpolicies.yaml", "v1alpha1"),
}

# Every Cluster field path engine/fleet/clusters.py reads ([] steps into list items).
CLUSTER_PATHS_READ = [
    "metadata",
    "spec.provider",
    "spec.region",
    "spec.zone",
    "spec.zones",
    "spec.taints",
    "spec.resourceModels[].grade",
    "spec.resourceModels[].ranges[].name",
    "spec.resourceModels[].ranges[].min",
    "spec.resourceModels[].ranges[].max",
    "status.conditions",
    "status.apiEnablements[].groupVersion",
    "status.apiEnablements[].resources[].kind",
    "status.resourceSummary.allocatable",
    "status.resourceSummary.allocated",
    "status.resourceSummary.allocating",
    "status.resourceSummary.allocatableModelings[].grade",
    "status.resourceSummary.allocatableModelings[].count",
]


@pytest.fixture(scope="module")
def crd_schemas(karmada_crds: Path) -> dict[str, dict[str, Any]]:
    schemas = {}
    for kind, (name, version) in CRD_FILES.items():
        crd = yaml.safe_load((karmada_crds / name).read_text())
        [served] = [v for v in crd["spec"]["versions"] if v["name"] == version]
        schemas[kind] = served["schema"]["openAPIV3Schema"]
    return schemas


@pytest.fixture(scope="module")
def cluster_definitions(karmada_crds: Path) -> dict[str, Any]:
    path = karmada_crds / "cluster.karmada.io_v1alpha1.swagger-definitions.json"
    return json.loads(path.read_text())["definitions"]


def unknown_fields(
    value: Any, schema: dict[str, Any], defs: dict[str, Any], path: str = ""
) -> Iterator[str]:
    """Paths in ``value`` the schema does not declare; stops at schemas it cannot see into."""
    if "$ref" in schema:
        ref = schema["$ref"].removeprefix("#/definitions/")
        if ref not in defs:
            return  # io.k8s.* definitions (ObjectMeta, Taint, Condition) are not in the file
        schema = defs[ref]
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return
    if isinstance(value, dict) and "properties" in schema:
        for key, item in value.items():
            if key not in schema["properties"]:
                yield f"{path}.{key}".lstrip(".")
            else:
                yield from unknown_fields(item, schema["properties"][key], defs, f"{path}.{key}")
    elif isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            yield from unknown_fields(item, schema["items"], defs, f"{path}[{i}]")


def builder_objects() -> list[dict[str, Any]]:
    job = pytorch_job("llama")
    placement = {
        "clusterAffinities": [
            {"affinityName": "h100", "labelSelector": {"matchLabels": {"gpu": "h100"}}},
            {
                "affinityName": "fallback",
                "fieldSelector": {
                    "matchExpressions": [{"key": "region", "operator": "In", "values": ["us"]}]
                },
                "exclude": ["cpu-spot"],
            },
        ],
        "clusterTolerations": [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}],
        "spreadConstraints": [{"spreadByField": "cluster", "maxGroups": 1, "minGroups": 1}],
    }
    return [
        *small_fleet(),
        binding_for(
            job, clusters=[("gpu-east", 2)], applied={"gpu-east": True}, placement=placement
        ),
        binding_for(
            custom_job("c"),
            replicas=2,
            requests={"cpu": "2"},
            components=[component("worker", 2, {"nvidia.com/gpu": "8"})],
        ),
        policy("with-placement", placement=placement),
        policy("global", cluster_scoped=True),
        cluster(
            "everything",
            gpus=8,
            taints=[{"key": "spot", "value": "true", "effect": "NoSchedule"}],
            apis={"v1": ["Pod"]},
            models=[{"grade": 0, "ranges": [{"name": "cpu", "min": "0", "max": "8"}]}],
            modelings=[(0, 2)],
            pending={"cpu": "1"},
        ),
    ]


def example_objects() -> list[dict[str, Any]]:
    objects, issues = read_objects([EXAMPLE])
    assert issues == []
    [(_, listing)] = objects
    return listing["items"]


@pytest.mark.parametrize(
    "source",
    [
        pytest.param(builder_objects, id="builders"),
        pytest.param(example_objects, id="example fleet"),
    ],
)
def test_bindings_and_policies_validate_against_the_crds(
    source: Any, crd_schemas: dict[str, Any]
) -> None:
    checked = 0
    for obj in source():
        schema = crd_schemas.get(obj["kind"])
        if schema is None or not obj["apiVersion"].startswith(
            ("work.karmada.io/", "policy.karmada.io/")
        ):
            continue
        where = f"{obj['kind']}/{obj['metadata']['name']}"
        errors = [e.message for e in jsonschema.Draft7Validator(schema).iter_errors(obj)]
        assert errors == [], where
        assert list(unknown_fields(obj, schema, {})) == [], where
        checked += 1
    assert checked >= 4


@pytest.mark.parametrize(
    "source",
    [
        pytest.param(builder_objects, id="builders"),
        pytest.param(example_objects, id="example fleet"),
    ],
)
def test_cluster_fields_exist_in_the_swagger_definitions(
    source: Any, cluster_definitions: dict[str, Any]
) -> None:
    clusters = [o for o in source() if o["kind"] == "Cluster"]
    assert clusters
    for obj in clusters:
        assert (
            list(
                unknown_fields(
                    obj, cluster_definitions[DEFINITION + "Cluster"], cluster_definitions
                )
            )
            == []
        )


@pytest.mark.parametrize("path", CLUSTER_PATHS_READ)
def test_every_cluster_field_read_exists(path: str, cluster_definitions: dict[str, Any]) -> None:
    schema = cluster_definitions[DEFINITION + "Cluster"]
    for step in path.split("."):
        key, is_list = step.removesuffix("[]"), step.endswith("[]")
        assert key in schema.get("properties", {}), f"{path}: no {key}"
        schema = schema["properties"][key]
        if is_list:
            assert schema["type"] == "array"
            schema = schema["items"]
        if (
            "$ref" in schema
            and schema["$ref"].removeprefix("#/definitions/") in cluster_definitions
        ):
            schema = cluster_definitions[schema["$ref"].removeprefix("#/definitions/")]


def test_the_walker_catches_a_misspelled_field(crd_schemas: dict[str, Any]) -> None:
    obj = binding_for(custom_job("x"))
    obj["spec"]["suspension"]["schedule"] = True
    assert list(unknown_fields(obj, crd_schemas["ResourceBinding"], {})) == [
        "spec.suspension.schedule"
    ]
