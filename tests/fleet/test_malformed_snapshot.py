"""Random and mutated fleet objects never crash the snapshot builder: issues, never exceptions."""

from __future__ import annotations

import copy
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.fleet.bindings import is_finished
from engine.fleet.model import Snapshot
from engine.fleet.snapshot import build_snapshot
from tests.conftest import REPO
from tests.workloads.test_malformed import json_like, paths

KINDS = [
    ("cluster.karmada.io/v1alpha1", "Cluster"),
    ("work.karmada.io/v1alpha2", "ResourceBinding"),
    ("work.karmada.io/v1alpha2", "ClusterResourceBinding"),
    ("policy.karmada.io/v1alpha1", "PropagationPolicy"),
    ("policy.karmada.io/v1alpha1", "ClusterPropagationPolicy"),
    ("scheduling.k8s.io/v1", "PriorityClass"),
]
SNAPSHOT = yaml.safe_load((REPO / "examples" / "fleet-snapshot.yaml").read_text())["items"]


def build(objects: list[Any]) -> Snapshot:
    snapshot = build_snapshot(("test.yaml", obj) for obj in objects)
    assert isinstance(snapshot, Snapshot)
    return snapshot


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(KINDS), json_like, json_like, json_like)
def test_random_fleet_objects(kind, metadata, spec, status):
    api_version, name = kind
    obj = {"apiVersion": api_version, "kind": name, "metadata": metadata, "spec": spec}
    obj["status"] = status
    build([obj])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_one_mutated_object_leaves_the_others_loaded(data):
    """Junk in one field of one object: the builder reports it and keeps every other object."""
    objects = copy.deepcopy(SNAPSHOT)
    index = data.draw(st.integers(0, len(objects) - 1))
    targets = [p for p in paths(objects[index]) if p and p[0] not in ("apiVersion", "kind")]
    target = data.draw(st.sampled_from(targets))
    parent = objects[index]
    for step in target[:-1]:
        parent = parent[step]
    parent[target[-1]] = data.draw(json_like)
    snapshot = build(objects)
    clean = build(copy.deepcopy(SNAPSHOT))
    assert len(snapshot.clusters) >= len(clean.clusters) - 1
    assert len(snapshot.bindings) >= len(clean.bindings) - 1


def test_a_member_job_condition_of_the_wrong_type_is_read_as_still_running() -> None:
    """Found by the test above: an unhashable condition type in a member's job status."""
    assert not is_finished({"conditions": [{"type": [], "status": "True"}]})
    assert not is_finished({"conditions": [{"type": {"a": 1}, "status": "True"}]})
    assert is_finished({"conditions": [{"type": "Complete", "status": "True"}]})
