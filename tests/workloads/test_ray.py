"""RayCluster and RayJob demand: KubeRay's replica clamping, multi-host groups, the submitter."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from engine.resources import Resources
from engine.workloads.model import DemandError
from engine.workloads.registry import read_workload
from tests.workloads.builders import res


def pod(requests: dict | None = None, limits: dict | None = None, **spec: Any) -> dict:
    resources: dict[str, Any] = {}
    if requests is not None:
        resources["requests"] = requests
    if limits is not None:
        resources["limits"] = limits
    return {
        "spec": {
            "containers": [
                {"name": "ray", "image": "rayproject/ray:2.52.0", "resources": resources}
            ],
            **spec,
        }
    }


def group(name: str, template: dict, **fields: Any) -> dict:
    return {"groupName": name, "rayStartParams": {}, "template": template, **fields}


HEAD = pod({"cpu": "1", "memory": "2Gi"}, {"cpu": "1", "memory": "5Gi"})
SMALL = pod({"cpu": "200m"}, {"cpu": "1"})


def cluster_spec(*groups: dict, head: dict = HEAD, **spec: Any) -> dict:
    return {
        "rayVersion": "2.52.0",
        "headGroupSpec": {"rayStartParams": {}, "template": head},
        "workerGroupSpecs": list(groups),
        **spec,
    }


def raycluster(*groups: dict, labels: dict | None = None, **spec: Any) -> dict:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": "rc", "namespace": "ml", "labels": labels or {}},
        "spec": cluster_spec(*groups, **spec),
    }


def rayjob(cluster: dict | None, labels: dict | None = None, **spec: Any) -> dict:
    body: dict[str, Any] = {"entrypoint": "python /home/ray/samples/sample_code.py", **spec}
    if cluster is not None:
        body["rayClusterSpec"] = cluster
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": "rj", "namespace": "ml", "labels": labels or {}},
        "spec": body,
    }


HEAD_RES = res(cpu=1, memory="2Gi")
SMALL_RES = res(cpu="200m")
SUBMITTER = res(cpu="500m", memory="200Mi")

READS = [
    pytest.param(
        raycluster(
            group("small", SMALL, replicas=1, minReplicas=1, maxReplicas=5),
            group(
                "gpu",
                pod({"cpu": "8", "memory": "32Gi"}, {"nvidia.com/gpu": 2}),
                replicas=2,
                minReplicas=0,
                maxReplicas=4,
            ),
        ),
        [
            ("head", 1, HEAD_RES),
            ("small", 1, SMALL_RES),
            ("gpu", 2, res(cpu=8, memory="32Gi", nvidia_com_gpu=2)),
        ],
        4,
        id="without autoscaling the gang is the head and every desired worker",
    ),
    pytest.param(
        raycluster(group("small", SMALL, minReplicas=2, maxReplicas=5)),
        [("head", 1, HEAD_RES), ("small", 2, SMALL_RES)],
        3,
        id="a group with no replicas runs minReplicas",
    ),
    pytest.param(
        raycluster(group("small", SMALL)),
        [("head", 1, HEAD_RES), ("small", 0, SMALL_RES)],
        1,
        id="a group with no replicas and no minReplicas runs nothing",
    ),
    pytest.param(
        raycluster(group("small", SMALL, replicas=9, minReplicas=1, maxReplicas=3)),
        [("head", 1, HEAD_RES), ("small", 3, SMALL_RES)],
        4,
        id="replicas above maxReplicas are clamped to maxReplicas",
    ),
    pytest.param(
        raycluster(group("small", SMALL, replicas=1, minReplicas=2, maxReplicas=3)),
        [("head", 1, HEAD_RES), ("small", 2, SMALL_RES)],
        3,
        id="replicas below minReplicas are raised to minReplicas",
    ),
    pytest.param(
        raycluster(
            group(
                "tpu",
                pod({"cpu": "24", "memory": "100G", "google.com/tpu": 4}),
                replicas=2,
                minReplicas=1,
                maxReplicas=2,
                numOfHosts=4,
            )
        ),
        [("head", 1, HEAD_RES), ("tpu", 8, res(cpu=24, memory="100G", google_com_tpu=4))],
        9,
        id="a multi-host group runs replicas times numOfHosts pods",
    ),
    pytest.param(
        raycluster(
            group("small", SMALL, replicas=3, minReplicas=1, maxReplicas=5),
            group("off", SMALL, replicas=3, minReplicas=2, maxReplicas=5, suspend=True),
            enableInTreeAutoscaling=True,
        ),
        [
            ("head", 1, HEAD_RES + res(cpu="500m", memory="512Mi")),
            ("small", 3, SMALL_RES),
            ("off", 0, SMALL_RES),
        ],
        2,
        id="with autoscaling the head gets the autoscaler sidecar and the gang counts minReplicas",
    ),
    pytest.param(
        raycluster(
            group("tpu", SMALL, replicas=2, minReplicas=1, maxReplicas=3, numOfHosts=2),
            enableInTreeAutoscaling=True,
            autoscalerOptions={
                "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "2"}}
            },
        ),
        [("head", 1, res(cpu=2, memory="3Gi")), ("tpu", 4, SMALL_RES)],
        3,
        id="autoscalerOptions resources replace the autoscaler default and hosts scale the gang",
    ),
    pytest.param(
        raycluster(
            group("mem", pod({"memory": "1000M"}), replicas=1, minReplicas=1, maxReplicas=1),
            head=pod({"cpu": "1", "memory": "1Gi"}),
        ),
        [
            ("head", 1, Resources({"cpu": 1, "memory": 2**30})),
            ("mem", 1, Resources({"memory": 10**9})),
        ],
        2,
        id="decimal M and binary Mi are different amounts",
    ),
    pytest.param(
        raycluster(group("bare", pod(), replicas=2, maxReplicas=2), head=pod()),
        [("head", 1, Resources()), ("bare", 2, Resources())],
        3,
        id="pods with no requests at all request nothing but still count as pods",
    ),
    pytest.param(
        rayjob(cluster_spec(group("small", SMALL, replicas=1, minReplicas=1, maxReplicas=5))),
        [("head", 1, HEAD_RES), ("small", 1, SMALL_RES), ("submitter", 1, SUBMITTER)],
        2,
        id="a RayJob adds KubeRay's default submitter pod, outside the gang",
    ),
    pytest.param(
        rayjob(
            cluster_spec(group("small", SMALL, replicas=1, maxReplicas=1)),
            submitterPodTemplate=pod({"cpu": "2", "memory": "1Gi"}, restartPolicy="Never"),
        ),
        [
            ("head", 1, HEAD_RES),
            ("small", 1, SMALL_RES),
            ("submitter", 1, res(cpu=2, memory="1Gi")),
        ],
        2,
        id="a submitterPodTemplate sizes the submitter pod",
    ),
    pytest.param(
        rayjob(cluster_spec(group("small", SMALL, replicas=1)), submissionMode="HTTPMode"),
        [("head", 1, HEAD_RES), ("small", 1, SMALL_RES)],
        2,
        id="HTTPMode submits from the operator and adds no pod",
    ),
    pytest.param(
        rayjob(cluster_spec(group("small", SMALL, replicas=1)), submissionMode="InteractiveMode"),
        [("head", 1, HEAD_RES), ("small", 1, SMALL_RES)],
        2,
        id="InteractiveMode adds no pod",
    ),
    pytest.param(
        rayjob(cluster_spec(group("small", SMALL, replicas=1)), submissionMode="SidecarMode"),
        [("head", 1, HEAD_RES + SUBMITTER), ("small", 1, SMALL_RES)],
        2,
        id="SidecarMode puts the submitter container into the head pod",
    ),
    pytest.param(
        rayjob(None, clusterSelector={"ray.io/cluster": "shared"}),
        [("submitter", 1, SUBMITTER)],
        1,
        id="a RayJob on an existing cluster needs only its submitter",
    ),
    pytest.param(
        rayjob(None, clusterSelector={"ray.io/cluster": "shared"}, submissionMode="HTTPMode"),
        [],
        0,
        id="a RayJob on an existing cluster in HTTPMode needs no pods",
    ),
]


@pytest.mark.parametrize(("obj", "roles", "min_member"), READS)
def test_ray_demand(obj, roles, min_member):
    workload = read_workload(obj)
    assert [(r.name, r.replicas, r.requests) for r in workload.roles] == roles
    assert workload.min_member == min_member
    assert workload.resizable is False


def test_kuberay_labels_give_the_queue_and_priority_hints():
    obj = raycluster(
        group("small", SMALL, replicas=1),
        labels={"volcano.sh/queue-name": "research", "ray.io/priority-class-name": "high"},
    )
    workload = read_workload(obj)
    assert (workload.queue, workload.priority_class_name) == ("research", "high")


def test_the_head_pod_priority_class_is_the_fallback():
    head = pod({"cpu": "1"}, priorityClassName="batch-low")
    workload = read_workload(rayjob(cluster_spec(head=head)))
    assert (workload.queue, workload.priority_class_name) == (None, "batch-low")


def broken(obj: dict, path: list[Any], value: Any) -> dict:
    obj = copy.deepcopy(obj)
    target = obj
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return obj


BASE = raycluster(group("small", SMALL, replicas=1, minReplicas=1, maxReplicas=2))
JOB = rayjob(cluster_spec(group("small", SMALL, replicas=1)))

MALFORMED = [
    pytest.param(
        broken(BASE, ["spec", "headGroupSpec"], {"rayStartParams": {}}),
        "spec.headGroupSpec.template",
        id="a head group without a template names the template",
    ),
    pytest.param(
        broken(BASE, ["spec", "workerGroupSpecs", 0, "groupName"], ""),
        "spec.workerGroupSpecs[0].groupName",
        id="a worker group without a name names groupName",
    ),
    pytest.param(
        broken(BASE, ["spec", "workerGroupSpecs"], [group("a", SMALL), group("a", SMALL)]),
        "spec.workerGroupSpecs[1].groupName",
        id="a duplicate group name names the second group",
    ),
    pytest.param(
        broken(BASE, ["spec", "workerGroupSpecs", 0, "minReplicas"], 3),
        "spec.workerGroupSpecs[0].minReplicas",
        id="minReplicas above maxReplicas names minReplicas",
    ),
    pytest.param(
        broken(BASE, ["spec", "workerGroupSpecs", 0, "numOfHosts"], 0),
        "spec.workerGroupSpecs[0].numOfHosts",
        id="zero numOfHosts is rejected",
    ),
    pytest.param(
        broken(BASE, ["spec", "workerGroupSpecs", 0, "replicas"], "2"),
        "spec.workerGroupSpecs[0].replicas",
        id="replicas given as a string names replicas",
    ),
    pytest.param(
        broken(BASE, ["spec", "workerGroupSpecs", 0, "suspend"], "yes"),
        "spec.workerGroupSpecs[0].suspend",
        id="a non-boolean suspend names suspend",
    ),
    pytest.param(
        broken(
            BASE,
            ["spec", "workerGroupSpecs", 0, "template"],
            pod({"cpu": "many"}),
        ),
        "spec.workerGroupSpecs[0].template.spec.containers[0].resources.requests.cpu",
        id="a bad worker quantity names the container field",
    ),
    pytest.param(
        broken(BASE, ["spec", "enableInTreeAutoscaling"], "true"),
        "spec.enableInTreeAutoscaling",
        id="autoscaling given as a string names enableInTreeAutoscaling",
    ),
    pytest.param(
        broken(BASE, ["spec", "workerGroupSpecs"], {"small": {}}),
        "spec.workerGroupSpecs",
        id="worker groups that are not a list name workerGroupSpecs",
    ),
    pytest.param(
        rayjob(None),
        "spec.rayClusterSpec",
        id="a RayJob with neither a cluster spec nor a selector names rayClusterSpec",
    ),
    pytest.param(
        broken(JOB, ["spec", "submissionMode"], "BatchMode"),
        "spec.submissionMode",
        id="an unknown submission mode names submissionMode",
    ),
    pytest.param(
        rayjob(None, clusterSelector={"ray.io/cluster": "x"}, submissionMode="SidecarMode"),
        "spec.clusterSelector",
        id="SidecarMode on an existing cluster names clusterSelector",
    ),
    pytest.param(
        broken(JOB, ["spec", "submitterPodTemplate"], pod({"memory": "1 Gi"})),
        "spec.submitterPodTemplate.spec.containers[0].resources.requests.memory",
        id="a bad submitter quantity names the submitter template field",
    ),
    pytest.param(
        broken(JOB, ["spec", "rayClusterSpec", "headGroupSpec"], None),
        "spec.rayClusterSpec.headGroupSpec.template",
        id="a RayJob cluster without a head names the head template",
    ),
]


@pytest.mark.parametrize(("obj", "path"), MALFORMED)
def test_malformed_ray_objects_name_the_field(obj, path):
    with pytest.raises(DemandError) as caught:
        read_workload(obj)
    assert caught.value.path == path
