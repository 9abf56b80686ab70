"""JobSet demand: replicated jobs × the pods each Job runs at once; the gang is every pod."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from engine.resources import Resources
from engine.workloads.model import DemandError
from engine.workloads.registry import read_workload
from tests.workloads.builders import res


def job_template(requests: dict | None = None, limits: dict | None = None, **job: Any) -> dict:
    resources: dict[str, Any] = {}
    if requests is not None:
        resources["requests"] = requests
    if limits is not None:
        resources["limits"] = limits
    return {
        "spec": {
            **job,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "busybox", "resources": resources}],
                }
            },
        }
    }


def replicated(name: str, template: dict, replicas: Any = None) -> dict:
    body = {"name": name, "template": template}
    if replicas is not None:
        body["replicas"] = replicas
    return body


def jobset(*jobs: dict) -> dict:
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "train", "namespace": "ml"},
        "spec": {"replicatedJobs": list(jobs)},
    }


CPU = {"cpu": "1", "memory": "1Gi"}

READS = [
    pytest.param(
        jobset(
            replicated("leader", job_template(CPU), 1),
            replicated("workers", job_template(CPU, parallelism=4, completions=4), 2),
        ),
        [("leader", 1, res(cpu=1, memory="1Gi")), ("workers", 8, res(cpu=1, memory="1Gi"))],
        id="each replicated job runs replicas times parallelism pods",
    ),
    pytest.param(
        jobset(replicated("solo", job_template(CPU))),
        [("solo", 1, res(cpu=1, memory="1Gi"))],
        id="missing replicas and parallelism both default to one",
    ),
    pytest.param(
        jobset(replicated("w", job_template(CPU, parallelism=4, completions=2), 3)),
        [("w", 6, res(cpu=1, memory="1Gi"))],
        id="completions below parallelism cap the pods a Job runs at once",
    ),
    pytest.param(
        jobset(replicated("w", job_template(CPU, parallelism=2, completions=10), 1)),
        [("w", 2, res(cpu=1, memory="1Gi"))],
        id="completions above parallelism make the Job longer, not wider",
    ),
    pytest.param(
        jobset(replicated("w", job_template({"cpu": "4"}, {"nvidia.com/gpu": 8}), 2)),
        [("w", 2, res(cpu=4, nvidia_com_gpu=8))],
        id="gpus given only as limits are requested",
    ),
    pytest.param(
        jobset(replicated("w", job_template({"memory": "512M"}, parallelism=2), 1)),
        [("w", 2, Resources({"memory": 512 * 10**6}))],
        id="decimal M in a pod template is powers of ten",
    ),
    pytest.param(
        jobset(replicated("w", job_template(), 2)),
        [("w", 2, Resources())],
        id="pods with no requests count as pods with empty requests",
    ),
    pytest.param(
        jobset(replicated("w", job_template(CPU, parallelism=0), 2)),
        [("w", 0, res(cpu=1, memory="1Gi"))],
        id="parallelism zero runs no pods",
    ),
]


@pytest.mark.parametrize(("obj", "roles"), READS)
def test_jobset_demand(obj, roles):
    workload = read_workload(obj)
    assert [(r.name, r.replicas, r.requests) for r in workload.roles] == roles
    assert workload.min_member == sum(replicas for _, replicas, _ in roles)
    assert workload.resizable is False
    assert workload.queue is None


def test_priority_class_comes_from_the_first_template_that_names_one():
    obj = jobset(replicated("a", job_template(CPU)), replicated("b", job_template(CPU)))
    obj["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"][
        "priorityClassName"
    ] = "high"
    assert read_workload(obj).priority_class_name == "high"


def broken(path: list[Any], value: Any) -> dict:
    obj = jobset(replicated("w", job_template(CPU, parallelism=2), 2))
    obj = copy.deepcopy(obj)
    target = obj
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return obj


MALFORMED = [
    pytest.param(
        broken(["spec", "replicatedJobs"], []),
        "spec.replicatedJobs",
        id="a JobSet without replicated jobs names replicatedJobs",
    ),
    pytest.param(
        broken(["spec", "replicatedJobs", 0, "name"], None),
        "spec.replicatedJobs[0].name",
        id="a replicated job without a name names it",
    ),
    pytest.param(
        jobset(replicated("w", job_template(CPU)), replicated("w", job_template(CPU))),
        "spec.replicatedJobs[1].name",
        id="a duplicate replicated job name names the second one",
    ),
    pytest.param(
        broken(["spec", "replicatedJobs", 0, "replicas"], -2),
        "spec.replicatedJobs[0].replicas",
        id="negative replicas name replicas",
    ),
    pytest.param(
        broken(["spec", "replicatedJobs", 0, "template", "spec", "parallelism"], "4"),
        "spec.replicatedJobs[0].template.spec.parallelism",
        id="parallelism given as a string names parallelism",
    ),
    pytest.param(
        broken(["spec", "replicatedJobs", 0, "template", "spec", "completions"], 1.5),
        "spec.replicatedJobs[0].template.spec.completions",
        id="fractional completions name completions",
    ),
    pytest.param(
        broken(["spec", "replicatedJobs", 0, "template", "spec"], {"parallelism": 1}),
        "spec.replicatedJobs[0].template.spec.template",
        id="a Job template without a pod template names it",
    ),
    pytest.param(
        broken(
            ["spec", "replicatedJobs", 0, "template", "spec", "template", "spec", "containers"],
            [{"name": "m", "resources": {"limits": {"nvidia.com/gpu": "two"}}}],
        ),
        'spec.replicatedJobs[0].template.spec.template.spec.containers[0].resources.limits["nvidia.com/gpu"]',
        id="a bad gpu limit names the container field",
    ),
    pytest.param(
        broken(["spec"], ["x"]),
        "spec",
        id="a spec that is not an object names spec",
    ),
]


@pytest.mark.parametrize(("obj", "path"), MALFORMED)
def test_malformed_jobset_names_the_field(obj, path):
    with pytest.raises(DemandError) as caught:
        read_workload(obj)
    assert caught.value.path == path
