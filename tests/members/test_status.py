"""What the cluster status controller reports, the Cluster object, and its round trip."""

from __future__ import annotations

import math
from pathlib import Path

from engine.cycle.placement.nodes import from_models
from engine.fleet.clusters import read_cluster
from engine.fleet.snapshot import build_snapshot
from engine.members import ClusterSpec, Fleet, MemberCluster, NodeGroup, cluster_object, load_fleet
from engine.members.status import cluster_status
from engine.resources import Resources
from tests.conftest import REPO
from tests.members.builders import GI, at, gpu_member, job

TI = 1024 * GI


def busy_gpu_member() -> MemberCluster:
    """2 nodes x {96 cpu, 1Ti, 8 GPU}: one runs an 8-GPU pod, a 2 x 8-GPU gang waits."""
    member = gpu_member(nodes=2)
    member.submit(job("a", gpus=8), at(0))
    member.submit(job("big", pods_=2, gpus=8), at(0))
    member.step(at(0))
    return member


def test_resource_summary_counts_bound_and_unbound_pods_as_karmada_does():
    summary = cluster_status(busy_gpu_member(), at(1))["resourceSummary"]
    assert summary["allocatable"] == {
        "cpu": "192",
        "memory": "2Ti",
        "nvidia.com/gpu": "16",
        "pods": "220",
    }
    assert summary["allocated"] == {"cpu": "1", "memory": "4Gi", "nvidia.com/gpu": "8", "pods": "1"}
    assert summary["allocating"] == {
        "cpu": "2",
        "memory": "8Gi",
        "nvidia.com/gpu": "16",
        "pods": "2",
    }
    # grades on GPUs 0 1 … 8, cpu and memory at the full per-GPU share (12 cores, 128Gi)
    assert summary["allocatableModelings"] == [
        {"grade": 0, "count": 1},  # the busy node: no GPU free
        *({"grade": g, "count": 0} for g in range(1, 8)),
        {"grade": 8, "count": 1},  # the idle node: the whole node, 8 GPUs, 96 cores, 1Ti
    ]


def test_default_grades_of_a_gpu_member():
    models = cluster_object(gpu_member(), at(0))["spec"]["resourceModels"]
    mins = [{r["name"]: r["min"] for r in m["ranges"]} for m in models]
    # a grade at every GPU count, the full per-GPU share of the node: the top grade is the
    # whole node
    memory = ["0", *(f"{128 * g}Gi" for g in range(1, 8)), "1Ti"]
    assert mins == [
        {"cpu": str(12 * g), "memory": memory[g], "nvidia.com/gpu": str(g)} for g in range(9)
    ]
    assert models[-1]["ranges"][0]["max"] == str(2**63 - 1)


def test_a_cpu_member_gets_grades_up_to_its_whole_node():
    shape = {"cpu": 62, "memory": 240 * GI}
    member = MemberCluster(ClusterSpec("cpu", nodes=(NodeGroup.of(3, shape),)), at(0))
    obj = cluster_object(member, at(0))
    cpu_mins = [m["ranges"][0]["min"] for m in obj["spec"]["resourceModels"]]
    assert cpu_mins == ["0", "1", "2", "3", "4", "6", "8", "12", "16", "24", "32", "48", "62"]
    # (Karmada's defaults put this node in grade 5: 16 cores, 128Gi) the top grade is the node
    top = obj["spec"]["resourceModels"][-1]["ranges"]
    assert [(r["name"], r["min"]) for r in top] == [("cpu", "62"), ("memory", "240Gi")]
    modelings = obj["status"]["resourceSummary"]["allocatableModelings"]
    assert [m["count"] for m in modelings] == [0] * 12 + [3]


def test_status_keeps_the_ready_transition_time_and_goes_stale_when_unreachable():
    member = busy_gpu_member()
    first = cluster_status(member, at(1))
    second = cluster_status(member, at(2), first)
    assert second["conditions"][0]["lastTransitionTime"] == "2025-03-10T09:01:00Z"
    member.set_ready(False, at(3))
    member.remove("a")
    stale = cluster_status(member, at(3), second)
    assert stale["conditions"][0]["status"] == "False"
    assert stale["conditions"][0]["reason"] == "ClusterNotReachable"
    assert stale["resourceSummary"] == second["resourceSummary"]


def test_the_cluster_object_validates_against_karmadas_schema(karmada_crds: Path):
    from sandbox.schema import load_schemas
    from tests.fleet.test_schemas import unknown_fields

    validator = load_schemas(karmada_crds).validators[("cluster.karmada.io/v1alpha1", "Cluster")]
    import json

    definitions = json.loads(
        (karmada_crds / "cluster.karmada.io_v1alpha1.swagger-definitions.json").read_text()
    )["definitions"]
    root = definitions["com.github.karmada-io.karmada.pkg.apis.cluster.v1alpha1.Cluster"]
    fleet = Fleet(load_fleet(REPO / "examples" / "fleet.yaml"), at(0))
    fleet["gpu-east"].submit(job("a", pods_=3, gpus=8), at(0))
    fleet.step(at(0))
    for member in fleet:
        obj = cluster_object(member, at(1))
        assert [e.message for e in validator.iter_errors(obj)] == []
        assert list(unknown_fields(obj, root, definitions)) == []


def test_the_cluster_object_round_trips_into_the_same_free_capacity_and_node_grades():
    member = busy_gpu_member()
    view = read_cluster(cluster_object(member, at(1)))
    assert view.ready and view.name == "gpu"
    assert view.allocatable == member.allocatable()
    assert view.allocated == member.allocated()
    assert view.allocating == member.allocating()
    assert view.free == Resources({"cpu": 189, "memory": 2 * TI - 12 * GI, "pods": 217})
    names, nodes = from_models(view.resource_models, view.allocatable_modelings)
    assert names == ("cpu", "memory", "nvidia.com/gpu")
    assert nodes == {(0, 0, 0): 1, (96_000, TI * 1000, 8_000): 1}  # the idle node, whole
    assert all(math.isfinite(m.grade) for m in view.resource_models)


def test_the_example_fleet_reads_into_a_snapshot():
    fleet = Fleet(load_fleet(REPO / "examples" / "fleet.yaml"), at(0))
    snapshot = build_snapshot([("fleet", cluster_object(m, at(0))) for m in fleet])
    assert snapshot.errors == ()
    clusters = {c.name: c for c in snapshot.clusters}
    assert sorted(clusters) == ["cpu-spot", "gpu-east", "gpu-west"]
    assert clusters["gpu-east"].free.get_amount("nvidia.com/gpu") == 32
    assert clusters["gpu-east"].serves("ray.io/v1", "RayJob")
    assert not clusters["gpu-west"].serves("ray.io/v1", "RayJob")
    assert clusters["gpu-west"].serves("batch/v1", "Job")
    assert clusters["cpu-spot"].taints[0].effect == "NoSchedule"
