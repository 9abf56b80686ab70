"""Random and mutated objects never crash a demand reader: a Workload or a DemandError."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.workloads.model import DemandError, Workload
from engine.workloads.registry import known_kinds, read_workload
from tests.conftest import REPO

FIXTURES = REPO / "tests" / "fixtures" / "workloads"

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**40), max_value=2**40),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
    st.sampled_from(["1", "500m", "8Gi", "2x", "-1", "", "Always", "1g", "K8sJobMode"]),
)
json_like = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(
            st.sampled_from(
                [
                    "spec",
                    "template",
                    "replicas",
                    "containers",
                    "resources",
                    "requests",
                    "limits",
                    "cpu",
                    "memory",
                    "nvidia.com/gpu",
                    "tasks",
                    "minAvailable",
                    "name",
                    "initContainers",
                    "restartPolicy",
                    "overhead",
                    "executor",
                    "driver",
                    "instances",
                    "cores",
                    "workerGroupSpecs",
                    "headGroupSpec",
                    "replicatedJobs",
                    "parallelism",
                    "Worker",
                    "Master",
                    "Launcher",
                    "pytorchReplicaSpecs",
                    "mpiReplicaSpecs",
                    "runPolicy",
                    "schedulingPolicy",
                    "queue",
                    "metadata",
                ]
            ),
            inner,
            max_size=5,
        ),
    ),
    max_leaves=25,
)


def check(obj: dict[str, Any]) -> None:
    try:
        result = read_workload(obj)
    except DemandError as err:
        assert isinstance(err.message, str)
        return
    assert result is None or isinstance(result, Workload)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(known_kinds()), json_like, json_like)
def test_random_objects_of_every_kind(kind, spec, metadata):
    api_version, name = kind
    check({"apiVersion": api_version, "kind": name, "metadata": metadata, "spec": spec})


def fixture_objects(directory: Path = FIXTURES) -> list[dict[str, Any]]:
    """Every object of the workload fixtures; none is an error, not a reason to fuzz less."""
    objects = []
    for path in sorted(directory.glob("*.yaml")):
        if path.name.endswith(".expected.yaml"):
            continue
        objects.extend(d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict))
    if not objects:
        raise FileNotFoundError(f"no workload manifests in {directory} to mutate")
    return objects


def test_missing_fixtures_are_an_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="no workload manifests"):
        fixture_objects(tmp_path)


def test_the_mutated_objects_are_the_fixtures():
    kinds = {obj["kind"] for obj in fixture_objects()}
    assert {"PyTorchJob", "MPIJob", "RayJob", "SparkApplication", "Job"} <= kinds


def paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    found = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            found.extend(paths(value, (*prefix, key)))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            found.extend(paths(value, (*prefix, i)))
    return found


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(fixture_objects()), st.data())
def test_mutated_real_objects(obj, data):
    """Replace one field anywhere in a realistic manifest with junk."""
    mutated = copy.deepcopy(obj)
    targets = [p for p in paths(mutated) if p and p[0] not in ("apiVersion", "kind")]
    if not targets:
        return
    target = data.draw(st.sampled_from(targets))
    parent = mutated
    for step in target[:-1]:
        parent = parent[step]
    parent[target[-1]] = data.draw(json_like)
    check(mutated)
