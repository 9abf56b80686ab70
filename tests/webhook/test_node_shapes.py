"""The fit check warns at creation of a pod larger than every node of every cluster that
declares its node shapes (``fleetgate.io/node-shapes``); a cluster that declares none is
bounded by its allocatable, as the refusing totals check is."""

from __future__ import annotations

import json

import yaml

from engine import annotations as ann
from engine.fleet.snapshot import build_snapshot
from engine.workloads.registry import read_workload
from tests.conftest import REPO
from tests.webhook.test_validate import pytorchjob, validate
from webhook.fit import Fleet

GPU_NODE = {"cpu": "190", "memory": "1900Gi", "nvidia.com/gpu": "8", "pods": "110"}


def two_pods(gpus: int) -> dict:
    """llama-pretrain with one worker: two pods of ``gpus`` GPUs each."""
    job = pytorchjob(workers=1, gpus=gpus)
    job["spec"]["runPolicy"]["schedulingPolicy"]["minAvailable"] = 2
    return job


def fleet(shapes: dict[str, list[dict[str, str]]]) -> Fleet:
    """examples/fleet-snapshot.yaml, its clusters declaring ``shapes`` (by cluster name)."""
    items = yaml.safe_load((REPO / "examples" / "fleet-snapshot.yaml").read_text())["items"]
    for item in items:
        if item["kind"] == "Cluster" and item["metadata"]["name"] in shapes:
            notes = item["metadata"].setdefault("annotations", {})
            notes[ann.NODE_SHAPES] = json.dumps(shapes[item["metadata"]["name"]])
    snapshot = build_snapshot([("snapshot.yaml", i) for i in items])
    assert snapshot.errors == ()
    return Fleet.from_snapshot(snapshot)


def test_a_pod_of_more_gpus_than_any_node_is_named_with_its_role_and_the_largest_node():
    both = fleet({"gpu-east": [GPU_NODE], "gpu-west": [GPU_NODE]})
    workload = read_workload(two_pods(16))  # 32 GPUs: gpu-east has them
    assert workload is not None
    assert both.never_fits(workload, workload.pods, False) is None
    assert both.larger_than_every_node(workload) == (
        "one Master pod asks nvidia.com/gpu 16; the largest node of any cluster offers 8"
    )
    assert both.larger_than_every_node(read_workload(two_pods(8))) is None


def test_a_cluster_that_declares_no_shapes_is_bounded_by_its_allocatable():
    east_only = fleet({"gpu-east": [GPU_NODE]})  # gpu-west: 32 GPUs, no shapes declared
    assert east_only.larger_than_every_node(read_workload(two_pods(16))) is None
    assert fleet({}).larger_than_every_node(read_workload(two_pods(16))) is None


def test_a_pod_no_single_node_holds_though_each_resource_is_offered_somewhere():
    lean = {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "8", "pods": "110"}
    fat = {"cpu": "190", "memory": "1900Gi", "pods": "110"}
    mixed = fleet({"gpu-east": [lean, fat], "gpu-west": [lean]})
    why = mixed.larger_than_every_node(read_workload(two_pods(8)))
    assert why is not None
    assert why.startswith("one Master pod asks ")
    assert why.endswith("no node of any cluster offers all of that at once")


def test_the_webhook_admits_the_job_with_a_warning(make_app):
    both = fleet({"gpu-east": [GPU_NODE], "gpu-west": [GPU_NODE]})
    client = make_app(fleet=both).test_client()
    response, _ = validate(client, two_pods(16))
    assert response["allowed"] is True
    assert response["warnings"] == [
        "builtin:fit: the job can never start on the declared node shapes: one Master pod asks "
        "nvidia.com/gpu 16; the largest node of any cluster offers 8"
    ]
