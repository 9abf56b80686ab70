"""Random and mutated fleet objects never crash the snapshot builder: issues, never exceptions."""

from __future__ import annotations

import copy
import functools
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


@functools.cache
def snapshot_items() -> list[Any]:
    """examples/fleet-snapshot.yaml's objects (read when first needed, not at collection)."""
    return yaml.safe_load((REPO / "examples" / "fleet-snapshot.yaml").read_text())["items"]


def build(objects: list[Any]) -> Snapshot:
    snapshot = build_snapshot(("test.yaml", obj) for obj in objects)
    assert isinstance(snapshot, Snapshot)
    return snapshot


def identity(obj: dict[str, Any]) -> tuple[str, str, str]:
    meta = obj["metadata"]
    return obj["kind"], meta.get("namespace", ""), meta["name"]


def loaded(snapshot: Snapshot) -> set[tuple[str, str, str]]:
    """Every object the builder kept, as (kind, namespace, name)."""
    return (
        {("Cluster", "", c.name) for c in snapshot.clusters}
        | {(b.kind, b.namespace, b.name) for b in snapshot.bindings}
        | {(w.kind, w.namespace, w.name) for w in snapshot.workloads.values()}
        | {(p.kind, p.namespace, p.name) for p in snapshot.policies}
        | {("PriorityClass", "", p.name) for p in snapshot.priority_classes}
    )


@functools.cache
def clean() -> Snapshot:
    return build(copy.deepcopy(snapshot_items()))


def test_the_clean_snapshot_loads_every_object():
    assert clean().errors == ()
    assert loaded(clean()) == {identity(obj) for obj in snapshot_items()}


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
    objects = copy.deepcopy(snapshot_items())
    index = data.draw(st.integers(0, len(objects) - 1))
    targets = [p for p in paths(objects[index]) if p and p[0] not in ("apiVersion", "kind")]
    target = data.draw(st.sampled_from(targets))
    parent = objects[index]
    for step in target[:-1]:
        parent = parent[step]
    parent[target[-1]] = data.draw(json_like)
    snapshot = build(objects)
    mutated = identity(snapshot_items()[index])
    left_out = loaded(clean()) - loaded(snapshot)
    assert left_out <= {mutated}, f"{sorted(left_out - {mutated})} lost with {mutated}"
    renamed = loaded(snapshot) - loaded(clean())  # junk in its name or namespace
    if mutated in left_out and not renamed:
        kind = mutated[0]  # issues name a workload by kind.group: Job.batch.volcano.sh/...
        reported = [e for e in snapshot.errors if e.object.split("/")[0].split(".")[0] == kind]
        assert reported, f"{mutated} was left out without an error; errors: {snapshot.errors}"


def test_a_member_job_condition_of_the_wrong_type_is_read_as_still_running() -> None:
    """Found by the test above: an unhashable condition type in a member's job status."""
    assert not is_finished({"conditions": [{"type": [], "status": "True"}]})
    assert not is_finished({"conditions": [{"type": {"a": 1}, "status": "True"}]})
    assert is_finished({"conditions": [{"type": "Complete", "status": "True"}]})
