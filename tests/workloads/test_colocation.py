"""Koordinator batch pods: cpu/memory become kubernetes.io/batch-cpu (milli-cores)/batch-memory."""

from __future__ import annotations

from typing import Any

import pytest

from engine.quantity import parse_quantity
from engine.resources import Resources
from engine.workloads.colocation import BATCH_CPU, BATCH_MEMORY, batch_resources, is_batch_pod
from engine.workloads.pods import pod_requests
from engine.workloads.registry import read_workload
from tests.workloads.builders import container

GI = 2**30
MIB = 2**20
BE = {"koordinator.sh/qosClass": "BE"}


def amounts(**quantities: str | int) -> Resources:
    """Resources from quantities; ``batch_cpu``/``batch_memory``/``gpu`` name the long keys."""
    names = {"batch_cpu": BATCH_CPU, "batch_memory": BATCH_MEMORY, "gpu": "nvidia.com/gpu"}
    return Resources({names.get(k, k): parse_quantity(v) for k, v in quantities.items()})


# ---- the rule -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("before", "after"),
    [
        pytest.param(
            amounts(cpu=4, memory="8Gi"),
            amounts(batch_cpu=4000, batch_memory="8Gi"),
            id="4 cores are 4000 milli-cores; memory keeps its value",
        ),
        pytest.param(amounts(cpu="500m"), amounts(batch_cpu=500), id="500m is 500"),
        pytest.param(
            amounts(cpu="1500u"), amounts(batch_cpu=2), id="1.5m rounds up as MilliValue does"
        ),
        pytest.param(
            amounts(memory="1.5Gi"),
            amounts(batch_memory=3 * GI // 2),
            id="memory alone: the same bytes under the batch name",
        ),
        pytest.param(
            amounts(cpu=2, gpu=8, **{"ephemeral-storage": "10Gi"}),
            amounts(batch_cpu=2000, gpu=8, **{"ephemeral-storage": "10Gi"}),
            id="GPUs and storage are left alone",
        ),
        pytest.param(
            amounts(cpu=1, batch_cpu=7000),
            amounts(batch_cpu=1000),
            id="a translated cpu replaces a batch-cpu already there",
        ),
        pytest.param(
            amounts(batch_cpu=7000, memory="1Gi"),
            amounts(batch_cpu=7000, batch_memory="1Gi"),
            id="a batch-cpu without cpu stays",
        ),
        pytest.param(Resources(), Resources(), id="nothing in, nothing out"),
    ],
)
def test_batch_resources(before, after):
    assert batch_resources(before) == after


@pytest.mark.parametrize(
    ("priority_class_name", "priority", "batch"),
    [
        ("koord-batch", None, True),
        ("koord-prod", None, False),
        ("koord-mid", None, False),
        ("koord-free", None, False),
        (None, None, False),
        ("", None, False),
        ("team-batch", 5500, True),  # a class of another name with a value in the batch range
        (None, 5000, True),
        (None, 5999, True),
        (None, 4999, False),
        (None, 6000, False),
        ("koord-batch", 9000, False),  # Koordinator reads the number, not the name
        ("koord-batch", True, True),  # not a priority: the name decides
        (["koord-batch"], None, False),
    ],
)
def test_which_pods_are_batch_pods(priority_class_name: Any, priority: Any, batch: bool):
    assert is_batch_pod(priority_class_name, priority) is batch


# ---- one pod --------------------------------------------------------------------------------


def batch_pod(*containers: dict, **spec: Any) -> dict:
    return {"priorityClassName": "koord-batch", "containers": list(containers), **spec}


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        pytest.param(
            batch_pod(container({"cpu": "500m", "memory": "1Gi"}), container({"cpu": "250m"})),
            amounts(batch_cpu=750, batch_memory="1Gi"),
            id="containers add up after translation",
        ),
        pytest.param(
            batch_pod(container({"cpu": "1500u"}), container({"cpu": "1500u"})),
            amounts(batch_cpu=4),
            id="each container rounds up on its own: 2 + 2, not 3",
        ),
        pytest.param(
            batch_pod(container(limits={"cpu": 2, "memory": "4Gi", "nvidia.com/gpu": 1})),
            amounts(batch_cpu=2000, batch_memory="4Gi", gpu=1),
            id="limits without requests are translated into the requests",
        ),
        pytest.param(
            batch_pod(
                container({"cpu": 1}),
                initContainers=[container({"cpu": 3, "memory": "1Gi"})],
                overhead={"cpu": "250m", "memory": "128Mi"},
            ),
            amounts(batch_cpu=3250, batch_memory=f"{1024 + 128}Mi"),
            id="init containers and the overhead are translated too",
        ),
        pytest.param(
            {"priority": 5100, "containers": [container({"cpu": 1})]},
            amounts(batch_cpu=1000),
            id="a spec.priority in the batch range",
        ),
        pytest.param(
            {"priorityClassName": "koord-prod", "containers": [container({"cpu": 1})]},
            amounts(cpu=1),
            id="a koord-prod pod keeps cpu",
        ),
    ],
)
def test_batch_pod_requests(spec, expected):
    assert pod_requests(spec, "spec") == expected


def test_a_fallback_class_applies_only_when_the_pod_names_none():
    spec = {"containers": [container({"cpu": 1})]}
    assert pod_requests(spec, "spec", fallback_priority_class="koord-batch") == amounts(
        batch_cpu=1000
    )
    named = {**spec, "priorityClassName": "koord-prod"}
    assert pod_requests(named, "spec", fallback_priority_class="koord-batch") == amounts(cpu=1)


# ---- readers --------------------------------------------------------------------------------


def native_job(template_metadata: dict, **pod_spec: Any) -> dict:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "etl", "namespace": "analytics"},
        "spec": {
            "parallelism": 4,
            "template": {
                "metadata": template_metadata,
                "spec": {
                    "containers": [container({"cpu": "1500m", "memory": "6Gi"})],
                    "restartPolicy": "Never",
                    **pod_spec,
                },
            },
        },
    }


def test_a_batch_v1_job_with_the_koord_batch_class():
    workload = read_workload(native_job({"labels": BE}, priorityClassName="koord-batch"))
    assert workload is not None
    assert workload.roles[0].requests == amounts(batch_cpu=1500, batch_memory="6Gi")
    assert workload.total == amounts(batch_cpu=6000, batch_memory="24Gi", pods=4)
    assert workload.priority_class_name == "koord-batch"


@pytest.mark.parametrize(
    "labels",
    [BE, {"koordinator.sh/priority-class": "koord-batch"}],
    ids=["qosClass BE", "priority-class label"],
)
def test_labels_alone_do_not_make_a_batch_pod(labels):
    workload = read_workload(native_job({"labels": labels}))
    assert workload is not None
    assert workload.roles[0].requests == amounts(cpu="1500m", memory="6Gi")


def spark(driver: dict, executor: dict, **spec: Any) -> dict:
    return {
        "apiVersion": "sparkoperator.k8s.io/v1beta2",
        "kind": "SparkApplication",
        "metadata": {"name": "etl", "namespace": "analytics"},
        "spec": {
            "type": "Scala",
            "mode": "cluster",
            "driver": driver,
            "executor": executor,
            **spec,
        },
    }


BATCH_DRIVER = {"cores": 2, "memory": "6g", "memoryOverhead": "2g", "labels": BE}
BATCH_EXECUTOR = {"cores": 8, "instances": 20, "memory": "28g", "memoryOverhead": "4g"}


def test_spark_driver_and_executors_on_batch_resources():
    app = spark(
        {**BATCH_DRIVER, "priorityClassName": "koord-batch"},
        {
            **BATCH_EXECUTOR,
            "labels": BE,
            "priorityClassName": "koord-batch",
            "coreRequest": "7500m",
            "sidecars": [container({"cpu": "100m", "memory": "64Mi"}, name="log")],
        },
    )
    workload = read_workload(app)
    assert workload is not None
    driver, executor = workload.roles
    assert driver.requests == amounts(batch_cpu=2000, batch_memory="8Gi")
    assert executor.requests == amounts(batch_cpu=7600, batch_memory=f"{32 * 1024 + 64}Mi")
    assert workload.total == Resources(
        {BATCH_CPU: 2000 + 20 * 7600, BATCH_MEMORY: 8 * GI + 20 * (32 * 1024 + 64) * MIB}
    ) + {"pods": 21}


def test_spark_pods_are_decided_one_by_one():
    app = spark(BATCH_DRIVER, {**BATCH_EXECUTOR, "priorityClassName": "koord-batch"})
    workload = read_workload(app)
    assert workload is not None
    driver, executor = workload.roles
    assert driver.requests == amounts(cpu=2, memory="8Gi")
    assert executor.requests == amounts(batch_cpu=8000, batch_memory="32Gi")


def test_spark_batch_scheduler_priority_class_does_not_reach_the_pods():
    app = spark(
        BATCH_DRIVER, BATCH_EXECUTOR, batchSchedulerOptions={"priorityClassName": "koord-batch"}
    )
    workload = read_workload(app)
    assert workload is not None
    assert workload.priority_class_name == "koord-batch"
    assert workload.roles[0].requests == amounts(cpu=2, memory="8Gi")


def volcano_job(template_spec: dict) -> dict:
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "etl", "namespace": "analytics"},
        "spec": {
            "priorityClassName": "koord-batch",
            "tasks": [
                {
                    "name": "worker",
                    "replicas": 2,
                    "template": {"spec": {"containers": [container({"cpu": 4})], **template_spec}},
                }
            ],
        },
    }


def test_a_volcano_task_without_a_class_gets_the_jobs():
    workload = read_workload(volcano_job({}))
    assert workload is not None
    assert workload.roles[0].requests == amounts(batch_cpu=4000)


def test_a_volcano_task_class_wins_over_the_jobs():
    workload = read_workload(volcano_job({"priorityClassName": "koord-prod"}))
    assert workload is not None
    assert workload.roles[0].requests == amounts(cpu=4)


def test_ray_containers_added_to_a_batch_head_are_translated():
    head = {"spec": {"priorityClassName": "koord-batch", "containers": [container({"cpu": 1})]}}
    worker = {"spec": {"containers": [container({"cpu": 2})]}}
    cluster = {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": "r", "namespace": "analytics"},
        "spec": {
            "enableInTreeAutoscaling": True,
            "headGroupSpec": {"template": head},
            "workerGroupSpecs": [
                {"groupName": "w", "replicas": 1, "minReplicas": 1, "template": worker}
            ],
        },
    }
    workload = read_workload(cluster)
    assert workload is not None
    head_role, worker_role = workload.roles
    # KubeRay's default autoscaler container (500m, 512Mi) joins the head pod.
    assert head_role.requests == amounts(batch_cpu=1500, batch_memory="512Mi")
    assert worker_role.requests == amounts(cpu=2)


def test_a_pod_with_the_koord_batch_class():
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "analytics", "labels": BE},
        "spec": batch_pod(container({"cpu": "250m", "memory": "256Mi"})),
    }
    workload = read_workload(pod)
    assert workload is not None
    assert workload.roles[0].requests == amounts(batch_cpu=250, batch_memory="256Mi")
