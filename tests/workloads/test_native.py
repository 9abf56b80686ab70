"""Kubernetes built-ins: Job, Deployment, ReplicaSet, StatefulSet and Pod demand."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from engine.quantity import parse_quantity
from engine.resources import Resources
from engine.workloads.model import DemandError
from engine.workloads.registry import read_workload
from tests.workloads.builders import res


def pod_spec(requests: dict | None = None, limits: dict | None = None, **spec: Any) -> dict:
    resources: dict[str, Any] = {}
    if requests is not None:
        resources["requests"] = requests
    if limits is not None:
        resources["limits"] = limits
    return {"containers": [{"name": "main", "image": "busybox", "resources": resources}], **spec}


def obj(
    api_version: str,
    kind: str,
    spec: dict,
    labels: dict | None = None,
    annotations: dict | None = None,
) -> dict:
    return {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {
            "name": "x",
            "namespace": "default",
            "labels": labels or {},
            "annotations": annotations or {},
        },
        "spec": spec,
    }


def job(pod: dict, annotations: dict | None = None, **spec: Any) -> dict:
    body = {**spec, "template": {"spec": {"restartPolicy": "Never", **pod}}}
    return obj("batch/v1", "Job", body, annotations=annotations)


def replicated(kind: str, pod: dict, **spec: Any) -> dict:
    return obj("apps/v1", kind, {**spec, "template": {"spec": pod}})


CPU = {"cpu": "1", "memory": "200Mi"}

READS = [
    pytest.param(
        job(pod_spec(CPU), parallelism=3, completions=3),
        3,
        res(cpu=1, memory="200Mi"),
        3,
        True,
        id="a Job runs parallelism pods and its gang is all of them",
    ),
    pytest.param(
        job(pod_spec(CPU)),
        1,
        res(cpu=1, memory="200Mi"),
        1,
        True,
        id="a Job without parallelism runs one pod",
    ),
    pytest.param(
        job(pod_spec(CPU), parallelism=5, completions=2),
        2,
        res(cpu=1, memory="200Mi"),
        2,
        True,
        id="a Job never runs more pods than completions",
    ),
    pytest.param(
        job(
            pod_spec(CPU),
            annotations={"kueue.x-k8s.io/job-min-parallelism": "2"},
            parallelism=5,
        ),
        5,
        res(cpu=1, memory="200Mi"),
        2,
        True,
        id="Kueue's job-min-parallelism annotation lowers a Job's gang minimum",
    ),
    pytest.param(
        job(pod_spec({"cpu": "2"}, {"nvidia.com/gpu": 1, "cpu": "4"}), parallelism=2),
        2,
        res(cpu=2, nvidia_com_gpu=1),
        2,
        True,
        id="a gpu given only as a limit is requested and a cpu request beats its limit",
    ),
    pytest.param(
        replicated("Deployment", pod_spec({"cpu": "250m", "memory": "64M"})),
        1,
        Resources({"cpu": parse_quantity("250m"), "memory": 64 * 10**6}),
        1,
        True,
        id="a Deployment without replicas runs one pod and 64M is decimal",
    ),
    pytest.param(
        replicated("Deployment", pod_spec({"memory": "64Mi"}), replicas=4),
        4,
        res(memory="64Mi"),
        1,
        True,
        id="a Deployment's gang minimum is one pod",
    ),
    pytest.param(
        replicated("Deployment", pod_spec(CPU), replicas=0),
        0,
        res(cpu=1, memory="200Mi"),
        0,
        True,
        id="a Deployment scaled to zero needs nothing",
    ),
    pytest.param(
        replicated("StatefulSet", pod_spec(CPU), replicas=3),
        3,
        res(cpu=1, memory="200Mi"),
        1,
        True,
        id="a StatefulSet runs replicas pods",
    ),
    pytest.param(
        replicated("ReplicaSet", pod_spec(), replicas=2),
        2,
        Resources(),
        1,
        True,
        id="a ReplicaSet whose pods request nothing still counts its pods",
    ),
    pytest.param(
        obj(
            "v1",
            "Pod",
            pod_spec(
                {"cpu": "1", "memory": "1Gi"},
                initContainers=[
                    {"name": "init", "resources": {"requests": {"cpu": "3"}}},
                    {
                        "name": "proxy",
                        "restartPolicy": "Always",
                        "resources": {"requests": {"cpu": "100m", "memory": "50Mi"}},
                    },
                ],
                overhead={"cpu": "250m"},
            ),
        ),
        1,
        Resources(
            {
                "cpu": parse_quantity("3.25"),
                "memory": parse_quantity("1Gi") + parse_quantity("50Mi"),
            }
        ),
        1,
        False,
        id="a Pod counts init containers, sidecars and overhead by the Kubernetes rules",
    ),
]


@pytest.mark.parametrize(("manifest", "pods", "requests", "min_member", "resizable"), READS)
def test_native_demand(manifest, pods, requests, min_member, resizable):
    workload = read_workload(manifest)
    assert [(r.name, r.replicas, r.requests) for r in workload.roles] == [("pod", pods, requests)]
    assert workload.min_member == min_member
    assert workload.resizable is resizable


def test_kueue_queue_label_is_left_to_the_mapping_and_priority_comes_from_the_template():
    manifest = job(pod_spec(CPU, priorityClassName="high"), parallelism=3)
    manifest["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "user-queue"
    workload = read_workload(manifest)
    assert (workload.queue, workload.priority_class_name) == (None, "high")
    assert workload.labels["kueue.x-k8s.io/queue-name"] == "user-queue"


def test_a_pod_priority_class_is_read_from_its_spec():
    workload = read_workload(obj("v1", "Pod", pod_spec(CPU, priorityClassName="low")))
    assert workload.priority_class_name == "low"


def broken(manifest: dict, path: list[Any], value: Any) -> dict:
    manifest = copy.deepcopy(manifest)
    target = manifest
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return manifest


JOB = job(pod_spec(CPU), parallelism=3)
DEPLOYMENT = replicated("Deployment", pod_spec(CPU), replicas=2)
MIN_PARALLELISM = 'metadata.annotations["kueue.x-k8s.io/job-min-parallelism"]'

MALFORMED = [
    pytest.param(
        broken(JOB, ["spec", "parallelism"], "3"),
        "spec.parallelism",
        id="a Job parallelism given as a string names parallelism",
    ),
    pytest.param(
        broken(JOB, ["spec", "completions"], -1),
        "spec.completions",
        id="negative completions name completions",
    ),
    pytest.param(
        broken(JOB, ["metadata", "annotations"], {"kueue.x-k8s.io/job-min-parallelism": "9"}),
        MIN_PARALLELISM,
        id="a min-parallelism above parallelism names the annotation",
    ),
    pytest.param(
        broken(JOB, ["metadata", "annotations"], {"kueue.x-k8s.io/job-min-parallelism": "two"}),
        MIN_PARALLELISM,
        id="a min-parallelism that is not a number names the annotation",
    ),
    pytest.param(
        broken(JOB, ["spec", "template", "spec", "containers", 0, "resources"], {"requests": []}),
        "spec.template.spec.containers[0].resources.requests",
        id="requests that are not a map name the requests field",
    ),
    pytest.param(
        broken(DEPLOYMENT, ["spec", "replicas"], -1),
        "spec.replicas",
        id="negative Deployment replicas name replicas",
    ),
    pytest.param(
        obj("apps/v1", "StatefulSet", {"replicas": 2}),
        "spec.template",
        id="a StatefulSet without a template names the template",
    ),
    pytest.param(
        obj("v1", "Pod", {"containers": {"name": "main"}}),
        "spec.containers",
        id="pod containers that are not a list name containers",
    ),
    pytest.param(
        obj("v1", "Pod", pod_spec({"memory": "1 Gi"})),
        "spec.containers[0].resources.requests.memory",
        id="a bad pod quantity names the container field",
    ),
    pytest.param(
        broken(DEPLOYMENT, ["metadata", "name"], ""),
        "metadata.name",
        id="an object without a name names metadata.name",
    ),
]


@pytest.mark.parametrize(("manifest", "path"), MALFORMED)
def test_malformed_native_objects_name_the_field(manifest, path):
    with pytest.raises(DemandError) as caught:
        read_workload(manifest)
    assert caught.value.path == path
