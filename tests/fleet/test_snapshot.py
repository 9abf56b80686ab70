"""build_snapshot and read_objects: linking, demand fallback, issues, order independence."""

from __future__ import annotations

import datetime as dt
import random
import textwrap
from pathlib import Path

import pytest
import yaml

from engine.cycle import Action, Reason, run_cycle
from engine.fleet.files import read_objects
from engine.fleet.model import IssueCode
from engine.fleet.snapshot import build_snapshot
from engine.policy.policyset import load_policy_set

from .builders import (
    as_list,
    binding_for,
    cluster,
    component,
    custom_job,
    policy,
    priority_class,
    pytorch_job,
    small_fleet,
)

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "fleet-snapshot.yaml"
NOW = dt.datetime(2025, 3, 10, 10, 0, tzinfo=dt.UTC)


def snapshot_of(*objects):
    return build_snapshot([("fleet.yaml", o) for o in objects])


def test_small_fleet_loads_sorted_and_linked() -> None:
    snap = snapshot_of(*small_fleet())
    assert snap.errors == ()
    assert [c.name for c in snap.clusters] == ["gpu-east", "gpu-west"]
    assert [b.name for b in snap.bindings] == ["llama-pytorchjob", "sweep-trainingrun"]
    running, pending = snap.bindings
    assert snap.workload_for(running).source == "template"
    assert snap.workload_for(running).total.get_amount("nvidia.com/gpu") == 16
    assert snap.policy_for(running).name == "research-jobs"
    assert snap.workload_for(pending).source == "binding"


def test_demand_from_replica_requirements_uses_template_metadata() -> None:
    job = custom_job("sweep")
    snap = snapshot_of(
        job, binding_for(job, replicas=2, requests={"cpu": "4", "nvidia.com/gpu": "8"})
    )
    workload = snap.workload_for(snap.bindings[0])
    assert workload.total == {"cpu": 8, "nvidia.com/gpu": 16, "pods": 2}
    assert workload.min_member == 2 and not workload.resizable
    assert workload.labels["fleetgate.io/queue"] == "research-training"
    assert workload.created_at is not None and workload.uid == "uid-sweep"


def test_demand_from_components() -> None:
    job = custom_job("mpi")
    binding = binding_for(
        job,
        components=[
            component("launcher", 1, {"cpu": "2"}),
            component("worker", 3, {"nvidia.com/gpu": "8"}),
        ],
    )
    workload = snapshot_of(job, binding).workloads[
        ("example.com/v1", "TrainingRun", "research", "mpi")
    ]
    assert [(r.name, r.replicas) for r in workload.roles] == [("launcher", 1), ("worker", 3)]
    assert workload.total.get_amount("nvidia.com/gpu") == 24


def test_demand_from_the_binding_when_the_template_is_absent() -> None:
    binding = binding_for(custom_job("gone"), replicas=1, requests={"cpu": "1"})
    snap = snapshot_of(binding)
    assert snap.workload_for(snap.bindings[0]).total == {"cpu": 1, "pods": 1}
    assert snap.errors == ()


@pytest.mark.parametrize(
    "with_template",
    [
        pytest.param(True, id="template of an unread kind"),
        pytest.param(False, id="template absent"),
    ],
)
def test_no_demand_anywhere_is_an_unknown_demand_issue(with_template: bool) -> None:
    job = custom_job("mystery")
    objects = [job, binding_for(job)] if with_template else [binding_for(job)]
    snap = snapshot_of(*objects)
    assert len(snap.bindings) == 1
    assert snap.workload_for(snap.bindings[0]) is None
    [issue] = snap.errors
    # an absent template may still be on its way (a lagging watch); an unread kind never reads
    assert issue.code is (
        IssueCode.UNKNOWN_DEMAND if with_template else IssueCode.TEMPLATE_NOT_FOUND
    )
    assert issue.object == "ResourceBinding/research/mystery-trainingrun"
    assert snap.issues_for(snap.bindings[0].ref) == (issue,)
    # the cycle rejects a kind it cannot read, and keeps waiting for a template not seen yet
    [decision] = run_cycle(snap, load_policy_set([REPO / "policies"]), NOW).decisions
    assert (decision.action, decision.reason) == (
        (Action.REJECT, Reason.UNKNOWN_DEMAND)
        if with_template
        else (Action.PENDING, Reason.WAITING_FOR_TEMPLATE)
    )


def test_malformed_objects_become_issues_and_the_rest_still_load() -> None:
    bad_cluster = cluster("broken", gpus=8)
    bad_cluster["status"]["resourceSummary"]["allocatable"]["cpu"] = "lots"
    bad_job = pytorch_job("bad")
    bad_job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = "two"
    objects = [*small_fleet(), bad_cluster, bad_job, binding_for(bad_job), "not an object"]
    snap = snapshot_of(*objects)
    assert [c.name for c in snap.clusters] == ["gpu-east", "gpu-west"]
    assert len(snap.bindings) == 3
    assert snap.workload_for(snap.bindings[0]) is None  # its template is broken
    where = {(i.object, i.path) for i in snap.errors}
    assert ("Cluster/broken", "status.resourceSummary.allocatable.cpu") in where
    assert any(obj == "PyTorchJob/research/bad" and "replicas" in path for obj, path in where)
    assert all(i.source == "fleet.yaml" for i in snap.errors)
    assert any(i.code is IssueCode.UNREADABLE for i in snap.errors)
    # a broken template gets its own issue, not an UnknownDemand one as well
    assert not any(i.code is IssueCode.UNKNOWN_DEMAND for i in snap.errors)


def test_duplicates_keep_the_newest_copy_whatever_the_order() -> None:
    old, new = cluster("gpu-east", gpus=8), cluster("gpu-east", gpus=16)
    old["metadata"]["resourceVersion"], new["metadata"]["resourceVersion"] = "10", "20"
    for pairs in ([("a.yaml", old), ("b.yaml", new)], [("b.yaml", new), ("a.yaml", old)]):
        snap = build_snapshot(pairs)
        assert snap.clusters[0].allocatable.get_amount("nvidia.com/gpu") == 16
        [issue] = snap.errors
        assert (issue.code, issue.source, issue.object) == (
            IssueCode.DUPLICATE,
            "a.yaml",
            "Cluster/gpu-east",
        )
        assert "b.yaml" in issue.message


def test_kinds_sharing_a_name_in_different_groups_are_not_duplicates() -> None:
    volcano = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "j", "namespace": "n"},
    }
    batch = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": "n"}}
    snap = snapshot_of(
        volcano, batch, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "j"}}
    )
    assert not any(i.code is IssueCode.DUPLICATE for i in snap.errors)


def test_input_order_does_not_change_the_snapshot() -> None:
    objects = [*small_fleet(), priority_class("high", 1000), policy("other", "team")]
    expected = snapshot_of(*objects)
    rng = random.Random(7)
    for _ in range(5):
        shuffled = objects[:]
        rng.shuffle(shuffled)
        assert snapshot_of(*shuffled) == expected


def test_a_list_and_multi_document_yaml_give_the_same_snapshot(tmp_path: Path) -> None:
    objects = small_fleet()
    listed = tmp_path / "list.yaml"
    listed.write_text(yaml.safe_dump(as_list(objects)))
    documents = tmp_path / "docs.yaml"
    documents.write_text(yaml.safe_dump_all(objects))
    from_list, issues_a = read_objects([listed])
    from_docs, issues_b = read_objects([documents])
    assert issues_a == issues_b == []
    strip = lambda pairs: [("", obj) for _, obj in pairs]  # noqa: E731
    assert build_snapshot(strip(from_list)) == build_snapshot(strip(from_docs))


def test_typed_lists_give_their_items_a_kind() -> None:
    typed = {
        "apiVersion": "cluster.karmada.io/v1alpha1",
        "kind": "ClusterList",
        "items": [{k: v for k, v in cluster("c").items() if k not in ("apiVersion", "kind")}],
    }
    assert [c.name for c in snapshot_of(typed).clusters] == ["c"]


def test_yaml_errors_name_file_and_line(tmp_path: Path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text(yaml.safe_dump(cluster("ok")))
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        textwrap.dedent("""\
        apiVersion: v1
        kind: List
        items:
          - kind: Cluster
            metadata: {name: [unclosed
        """)
    )
    objects, issues = read_objects([good, bad, tmp_path / "missing.yaml"])
    assert [obj["metadata"]["name"] for _, obj in objects] == ["ok"]
    assert [(i.source, i.code) for i in issues] == [
        (str(bad), IssueCode.UNREADABLE),
        (str(tmp_path / "missing.yaml"), IssueCode.UNREADABLE),
    ]
    assert (issues[0].line, issues[0].column) == (6, 1)
    assert str(issues[0]) == f"{bad}:6:1: YAML syntax: expected ',' or ']', but got '<stream end>'"


def test_a_directory_reads_its_yaml_files(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(yaml.safe_dump(cluster("a")))
    (tmp_path / "b.json").write_text(
        '{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}'
    )
    (tmp_path / "notes.txt").write_text("ignored")
    objects, issues = read_objects([tmp_path])
    assert len(objects) == 2 and issues == []


def test_priority_lookups() -> None:
    snap = snapshot_of(
        priority_class("standard", 500, default=True),
        priority_class("also-default", 100, default=True),
        priority_class("high", 1000),
    )
    assert snap.default_priority_class().name == "also-default"  # lowest of several defaults
    assert snap.priority_value("high") == 1000
    assert snap.priority_value(None) == 100
    assert snap.priority_value("missing") is None
    assert snapshot_of().priority_value(None) == 0


def test_the_example_fleet_loads_without_issues() -> None:
    objects, issues = read_objects([EXAMPLE])
    snap = build_snapshot(objects)
    assert issues == [] and snap.errors == ()
    assert [c.name for c in snap.clusters] == ["cpu-spot", "gpu-east", "gpu-west"]
    free_gpus = {c.name: c.free.get_amount("nvidia.com/gpu") for c in snap.clusters}
    assert free_gpus == {"cpu-spot": 0, "gpu-east": 8, "gpu-west": 16}
    assert len(snap.bindings) == 10
    assert all(
        b.suspended_scheduling and b.labels["fleetgate.io/managed"] == "true" for b in snap.bindings
    )
    assert all(snap.policy_for(b) is not None for b in snap.bindings)
    bound = {b.name: b.clusters[0][0] for b in snap.bindings if b.clusters}
    assert bound == {
        "llama-pretrain-pytorchjob": "gpu-east",
        "bert-sweep-job": "gpu-west",
        "chat-eval-job": "gpu-west",
        "nightly-etl-sparkapplication": "cpu-spot",
    }
    queues = {
        snap.workload_for(b).labels.get("fleetgate.io/queue", "")
        for b in snap.bindings
        if snap.workload_for(b) is not None
    }
    assert queues <= {
        "research-training",
        "research-experiments",
        "prod-inference",
        "analytics",
        "",
    }
    by_name = {b.name: b for b in snap.bindings}
    ray = by_name["vit-probe-rayjob"]
    assert [c.name for c in snap.clusters if c.serves(ray.resource.api_version, "RayJob")] == [
        "gpu-east"
    ]
    assert snap.default_priority_class().name == "standard"


def test_namespaces_give_their_labels_to_the_queues_selectors() -> None:
    """A Namespace's labels, with the name label the API server sets; a namespace the
    snapshot lacks has that label alone; a malformed one is an issue, the rest still load."""
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml", "labels": {"t": "a"}}}
    bad = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x", "labels": ["t"]}}
    snap = snapshot_of(*small_fleet(), ns, bad)
    assert dict(snap.namespace_labels("ml")) == {"t": "a", "kubernetes.io/metadata.name": "ml"}
    assert dict(snap.namespace_labels("gone")) == {"kubernetes.io/metadata.name": "gone"}
    assert "x" not in snap.namespaces
    assert [(i.object, i.path) for i in snap.errors] == [("Namespace/x", "metadata.labels")]
    assert [c.name for c in snap.clusters] == ["gpu-east", "gpu-west"]
