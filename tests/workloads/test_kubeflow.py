"""Kubeflow training-operator jobs: replica types as roles, runPolicy gang minimum and hints."""

from __future__ import annotations

from typing import Any

import pytest

from engine.workloads.model import DemandError
from engine.workloads.registry import read_workload
from tests.workloads.builders import container, replica, res

FIELDS = {
    "PyTorchJob": "pytorchReplicaSpecs",
    "TFJob": "tfReplicaSpecs",
    "XGBoostJob": "xgbReplicaSpecs",
    "PaddleJob": "paddleReplicaSpecs",
    "JAXJob": "jaxReplicaSpecs",
    "MPIJob": "mpiReplicaSpecs",
}


def job(kind: str, replicas: dict, **spec: Any) -> dict:
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": kind,
        "metadata": {"name": "train", "namespace": "research"},
        "spec": {FIELDS[kind]: replicas, **spec},
    }


def scheduling(**policy: Any) -> dict:
    return {"runPolicy": {"schedulingPolicy": policy}}


GPU = container({"cpu": "4", "memory": "16Gi"}, {"nvidia.com/gpu": 1})
GPU_REQ = res(cpu=4, memory="16Gi", nvidia_com_gpu=1)
CPU = container({"cpu": "1", "memory": "2G"})
CPU_REQ = res(cpu=1, memory=2 * 10**9)

READS = [
    pytest.param(
        job("PyTorchJob", {"Master": replica(1, GPU), "Worker": replica(3, GPU)}),
        [("Master", 1, GPU_REQ), ("Worker", 3, GPU_REQ)],
        4,
        id="a PyTorchJob gangs its master and every worker by default",
    ),
    pytest.param(
        job("PyTorchJob", {"Worker": replica(4, GPU)}, **scheduling(minAvailable=2)),
        [("Worker", 4, GPU_REQ)],
        2,
        id="schedulingPolicy minAvailable below the pod count is the gang minimum",
    ),
    pytest.param(
        job(
            "PyTorchJob",
            {"Worker": replica(4, GPU)},
            elasticPolicy={"minReplicas": 2, "maxReplicas": 4, "rdzvBackend": "c10d"},
        ),
        [("Worker", 4, GPU_REQ)],
        4,
        id="an elastic PyTorchJob still gangs all workers since the operator ignores minReplicas",
    ),
    pytest.param(
        job(
            "PyTorchJob",
            {"Worker": replica(4, GPU)},
            elasticPolicy={"minReplicas": 2, "maxReplicas": 4},
            **scheduling(minAvailable=2),
        ),
        [("Worker", 4, GPU_REQ)],
        2,
        id="an elastic PyTorchJob gangs minReplicas workers when minAvailable says so",
    ),
    pytest.param(
        job("PyTorchJob", {"master": replica(1, GPU), "WORKER": replica(1, GPU)}),
        [("Master", 1, GPU_REQ), ("Worker", 1, GPU_REQ)],
        2,
        id="replica type names are matched case-insensitively like the operator's defaulting",
    ),
    pytest.param(
        job("PyTorchJob", {"Worker": replica(None, CPU), "Master": replica(None, CPU)}),
        [("Master", 1, CPU_REQ), ("Worker", 1, CPU_REQ)],
        2,
        id="missing replicas default to 1 and roles are sorted by replica type",
    ),
    pytest.param(
        job(
            "TFJob",
            {
                "Worker": replica(4, GPU),
                "PS": replica(2, CPU),
                "Chief": replica(1, CPU),
                "Evaluator": replica(1, CPU),
            },
        ),
        [
            ("Chief", 1, CPU_REQ),
            ("Evaluator", 1, CPU_REQ),
            ("PS", 2, CPU_REQ),
            ("Worker", 4, GPU_REQ),
        ],
        8,
        id="a TFJob with chief, evaluator, parameter servers and workers",
    ),
    pytest.param(
        job("XGBoostJob", {"Master": replica(1, CPU), "Worker": replica(2, CPU)}),
        [("Master", 1, CPU_REQ), ("Worker", 2, CPU_REQ)],
        3,
        id="an XGBoostJob master and workers",
    ),
    pytest.param(
        job("PaddleJob", {"Worker": replica(2, container(limits={"nvidia.com/gpu": 8}))}),
        [("Worker", 2, res(nvidia_com_gpu=8))],
        2,
        id="a PaddleJob whose GPUs are given only as limits",
    ),
    pytest.param(
        job("JAXJob", {"Worker": replica(2, container(), container({"memory": "512M"}))}),
        [("Worker", 2, res(memory=512 * 10**6))],
        2,
        id="a JAXJob with one container that asks for nothing",
    ),
    pytest.param(
        job("MPIJob", {"Launcher": replica(1, CPU), "Worker": replica(None, GPU)}),
        [("Launcher", 1, CPU_REQ), ("Worker", 0, GPU_REQ)],
        1,
        id="a legacy MPIJob worker without replicas has none since the operator defaults it to 0",
    ),
    pytest.param(
        job("MPIJob", {"Launcher": replica(None, CPU), "Worker": replica(2, GPU)}),
        [("Launcher", 1, CPU_REQ), ("Worker", 2, GPU_REQ)],
        3,
        id="a legacy MPIJob gangs launcher and workers",
    ),
    pytest.param(
        job(
            "PyTorchJob",
            {
                "Worker": replica(
                    2,
                    container({"cpu": "2", "memory": "1Gi"}),
                    initContainers=[
                        container({"cpu": "500m", "memory": "4Gi"}),
                        container({"cpu": "100m", "memory": "128Mi"}, restartPolicy="Always"),
                    ],
                )
            },
        ),
        [("Worker", 2, res(cpu="2100m", memory="4Gi"))],
        2,
        id="a data loader init container and a log sidecar follow the Kubernetes pod rules",
    ),
]


@pytest.mark.parametrize(("obj", "roles", "min_member"), READS)
def test_reads_roles_and_gang_minimum(obj, roles, min_member):
    got = read_workload(obj)
    assert [(r.name, r.replicas, r.requests) for r in got.roles] == roles
    assert got.min_member == min_member
    assert got.resizable is False


def test_queue_and_priority_class_come_from_the_scheduling_policy():
    obj = job(
        "TFJob",
        {"Worker": replica(1, CPU)},
        **scheduling(queue="research", priorityClass="batch-high"),
    )
    got = read_workload(obj)
    assert (got.queue, got.priority_class_name) == ("research", "batch-high")


def test_no_scheduling_policy_means_no_hints():
    got = read_workload(job("PyTorchJob", {"Worker": replica(1, CPU)}))
    assert (got.queue, got.priority_class_name) == (None, None)


def test_pod_template_priority_class_is_not_the_podgroup_priority():
    obj = job("PyTorchJob", {"Worker": replica(1, CPU, priorityClassName="pod-level")})
    assert read_workload(obj).priority_class_name is None


def test_json_entry_has_the_inspect_shape():
    obj = job("PyTorchJob", {"Master": replica(1, GPU)}, **scheduling(queue="default"))
    assert read_workload(obj).to_json() == {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "namespace": "research",
        "name": "train",
        "roles": [
            {
                "name": "Master",
                "replicas": 1,
                "requests": {"cpu": 4.0, "memory": 17179869184, "nvidia.com/gpu": 1},
            }
        ],
        "total": {"cpu": 4.0, "memory": 17179869184, "nvidia.com/gpu": 1, "pods": 1},
        "minMember": 1,
        "resizable": False,
        "priorityClassName": None,
        "queue": "default",
    }


W = "spec.pytorchReplicaSpecs.Worker"

ERRORS = [
    pytest.param(
        job("PyTorchJob", {"Worker": replica("two", CPU)}), f"{W}.replicas", id="replicas as a word"
    ),
    pytest.param(
        job("PyTorchJob", {"Worker": replica(True, CPU)}), f"{W}.replicas", id="replicas as a bool"
    ),
    pytest.param(
        job("PyTorchJob", {"Worker": replica(1, container({"cpu": "2x"}))}),
        f"{W}.template.spec.containers[0].resources.requests.cpu",
        id="a cpu quantity like 2x",
    ),
    pytest.param(
        job("PyTorchJob", {"Worker": {"replicas": 1, "template": "pod.yaml"}}),
        f"{W}.template",
        id="a template that is not a mapping",
    ),
    pytest.param(
        job("PyTorchJob", {"Worker": {"replicas": 1}}),
        f"{W}.template",
        id="a replica spec without a template",
    ),
    pytest.param(
        job("PyTorchJob", {"Worker": {"replicas": 1, "template": {"spec": {}}}}),
        f"{W}.template.spec.containers",
        id="a template without containers",
    ),
    pytest.param(job("PyTorchJob", {"Worker": [1, 2]}), W, id="a replica spec that is a list"),
    pytest.param(
        job("PyTorchJob", {"Trainer": replica(1, CPU)}),
        "spec.pytorchReplicaSpecs.Trainer",
        id="an unknown replica type",
    ),
    pytest.param(
        job("PyTorchJob", {"worker": replica(1, CPU), "Worker": replica(1, CPU)}),
        W,
        id="the same replica type twice in different case",
    ),
    pytest.param(
        job("PyTorchJob", {"Master": replica(2, CPU)}),
        "spec.pytorchReplicaSpecs.Master.replicas",
        id="a PyTorch master with two replicas",
    ),
    pytest.param(job("PyTorchJob", {}), "spec.pytorchReplicaSpecs", id="no replica specs at all"),
    pytest.param(
        {**job("PyTorchJob", {}), "spec": {}}, "spec.pytorchReplicaSpecs", id="no replica field"
    ),
    pytest.param(
        job("TFJob", {"Chief": replica(1, CPU), "Master": replica(1, CPU)}),
        "spec.tfReplicaSpecs.Master",
        id="a TFJob with both chief and master",
    ),
    pytest.param(
        job("MPIJob", {"Worker": replica(2, CPU)}),
        "spec.mpiReplicaSpecs.Launcher",
        id="a legacy MPIJob without launcher",
    ),
    pytest.param(
        job("MPIJob", {"launcher": replica(1, CPU)}),
        "spec.mpiReplicaSpecs.launcher",
        id="a legacy MPIJob replica type in the wrong case",
    ),
    pytest.param(
        job("PyTorchJob", {"Worker": replica(2, CPU)}, **scheduling(minAvailable=3)),
        "spec.runPolicy.schedulingPolicy.minAvailable",
        id="minAvailable above the pod count",
    ),
    pytest.param(
        job("PyTorchJob", {"Worker": replica(2, CPU)}, **scheduling(minAvailable="2")),
        "spec.runPolicy.schedulingPolicy.minAvailable",
        id="minAvailable as a string",
    ),
    pytest.param(
        job("PyTorchJob", {"Worker": replica(2, CPU)}, **scheduling(queue=["a"])),
        "spec.runPolicy.schedulingPolicy.queue",
        id="a queue that is a list",
    ),
    pytest.param(
        job("PyTorchJob", {"Worker": replica(2, CPU)}, runPolicy={"schedulingPolicy": 3}),
        "spec.runPolicy.schedulingPolicy",
        id="a schedulingPolicy that is a number",
    ),
    pytest.param(
        job("PyTorchJob", {"Worker": replica(2, CPU)}, elasticPolicy={"minReplicas": "one"}),
        "spec.elasticPolicy.minReplicas",
        id="an elastic minReplicas as a word",
    ),
    pytest.param(
        job(
            "PyTorchJob",
            {"Worker": replica(2, CPU)},
            elasticPolicy={"minReplicas": 3, "maxReplicas": 2},
        ),
        "spec.elasticPolicy.minReplicas",
        id="an elastic minReplicas above maxReplicas",
    ),
]


@pytest.mark.parametrize(("obj", "path"), ERRORS)
def test_malformed_jobs_name_the_bad_field(obj, path):
    with pytest.raises(DemandError) as info:
        read_workload(obj)
    assert info.value.path == path
