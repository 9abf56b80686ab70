"""Volcano Job demand: roles per task, exact requests, the gang minimum Volcano's webhook sets."""

from __future__ import annotations

from typing import Any

import pytest

from engine.workloads.model import DemandError
from engine.workloads.registry import read_workload
from tests.workloads.builders import container, res


def task(name: str | None, replicas: Any = None, *containers: dict, **extra: Any) -> dict:
    body: dict[str, Any] = {
        "template": {"spec": {"containers": list(containers) or [container()], **extra}}
    }
    if name is not None:
        body["name"] = name
    if replicas is not None:
        body["replicas"] = replicas
    return body


def vcjob(*tasks: dict, **spec: Any) -> dict:
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "job", "namespace": "team-a"},
        "spec": {"tasks": list(tasks), **spec},
    }


def with_task_field(job: dict, index: int, **fields: Any) -> dict:
    job["spec"]["tasks"][index].update(fields)
    return job


CPU1 = container({"cpu": "1", "memory": "1Gi"})

READS = [
    pytest.param(
        vcjob(task("ps", 1, CPU1), task("worker", 3, CPU1)),
        [("ps", 1, res(cpu=1, memory="1Gi")), ("worker", 3, res(cpu=1, memory="1Gi"))],
        4,
        id="with no minAvailable anywhere the gang minimum is every pod of every task",
    ),
    pytest.param(
        vcjob(task("ps", 1, CPU1), task("worker", 4, CPU1), minAvailable=3),
        [("ps", 1, res(cpu=1, memory="1Gi")), ("worker", 4, res(cpu=1, memory="1Gi"))],
        3,
        id="a job minAvailable below the pod count is the gang minimum",
    ),
    pytest.param(
        with_task_field(vcjob(task("ps", 1, CPU1), task("worker", 4, CPU1)), 1, minAvailable=2),
        [("ps", 1, res(cpu=1, memory="1Gi")), ("worker", 4, res(cpu=1, memory="1Gi"))],
        3,
        id="a task minAvailable lowers the default gang minimum to the sum of task minimums",
    ),
    pytest.param(
        vcjob(task("worker", 2, CPU1), minAvailable=0),
        [("worker", 2, res(cpu=1, memory="1Gi"))],
        2,
        id="minAvailable zero counts as unset the way Volcano's plain int field does",
    ),
    pytest.param(
        vcjob(task("gpu", 2, container({"cpu": "2"}, {"nvidia.com/gpu": 4}))),
        [("gpu", 2, res(cpu=2, nvidia_com_gpu=4))],
        2,
        id="GPUs given only as limits are counted as requests",
    ),
    pytest.param(
        vcjob(task("mem", 1, container({"memory": "1M"}), container({"memory": "1Mi"}))),
        [("mem", 1, res(memory=1_000_000 + 1_048_576))],
        1,
        id="decimal M and binary Mi memory add up exactly",
    ),
    pytest.param(
        vcjob(
            task(
                "init",
                1,
                container({"cpu": "500m"}),
                initContainers=[container({"cpu": "2", "memory": "64Mi"})],
            )
        ),
        [("init", 1, res(cpu=2, memory="64Mi"))],
        1,
        id="a heavy init container sets the pod's peak",
    ),
    pytest.param(
        vcjob(
            task(
                "sidecar",
                1,
                container({"cpu": "1"}),
                initContainers=[container({"cpu": "250m"}, restartPolicy="Always")],
            )
        ),
        [("sidecar", 1, res(cpu="1250m"))],
        1,
        id="a sidecar init container adds to the app containers for the pod's whole life",
    ),
    pytest.param(
        vcjob(task("bare", 3, {"name": "c", "image": "busybox"})),
        [("bare", 3, res())],
        3,
        id="pods with no requests at all still count as pods",
    ),
    pytest.param(
        vcjob(task("idle", None, CPU1), task("worker", 2, CPU1)),
        [("idle", 0, res(cpu=1, memory="1Gi")), ("worker", 2, res(cpu=1, memory="1Gi"))],
        2,
        id="a task without replicas runs no pods since Volcano does not default it",
    ),
    pytest.param(
        vcjob(task(None, 1, CPU1), task(None, 1, CPU1)),
        [("default0", 1, res(cpu=1, memory="1Gi")), ("default1", 1, res(cpu=1, memory="1Gi"))],
        2,
        id="tasks without a name are called default<index> like the webhook names them",
    ),
    pytest.param(
        vcjob(task("kata", 2, CPU1, overhead={"cpu": "250m", "memory": "120Mi"})),
        [("kata", 2, res(cpu="1250m", memory="1144Mi"))],
        2,
        id="pod overhead of a runtime class is added to every pod",
    ),
]


@pytest.mark.parametrize(("obj", "roles", "min_member"), READS)
def test_reads_roles_and_gang_minimum(obj, roles, min_member):
    got = read_workload(obj)
    assert [(r.name, r.replicas, r.requests) for r in got.roles] == roles
    assert got.min_member == min_member
    assert got.pods == sum(r[1] for r in roles)
    assert got.resizable is False


def test_task_minimums_are_kept_per_role():
    obj = with_task_field(vcjob(task("ps", 1, CPU1), task("worker", 4, CPU1)), 1, minAvailable=2)
    assert [r.min_available for r in read_workload(obj).roles] == [1, 2]


def test_total_counts_every_pod_and_the_pods_resource():
    obj = vcjob(
        task("ps", 1, CPU1), task("worker", 3, container({"cpu": "2"}, {"nvidia.com/gpu": 1}))
    )
    assert read_workload(obj).total == res(cpu=7, memory="1Gi", nvidia_com_gpu=3, pods=4)


def test_queue_and_priority_class_come_from_the_spec():
    obj = vcjob(task("w", 1, CPU1), queue="research", priorityClassName="high")
    got = read_workload(obj)
    assert (got.queue, got.priority_class_name) == ("research", "high")
    assert got.to_json()["queue"] == "research"


def test_no_queue_hint_is_none():
    got = read_workload(vcjob(task("w", 1, CPU1)))
    assert (got.queue, got.priority_class_name) == (None, None)


def bad_quantity() -> dict:
    return vcjob(task("w", 1, container({"cpu": "2x"})))


ERRORS = [
    pytest.param(
        vcjob(task("w", "two", CPU1)), "spec.tasks[0].replicas", id="replicas given as a word"
    ),
    pytest.param(vcjob(task("w", -1, CPU1)), "spec.tasks[0].replicas", id="negative replicas"),
    pytest.param(vcjob(task("w", 1.5, CPU1)), "spec.tasks[0].replicas", id="fractional replicas"),
    pytest.param(
        bad_quantity(),
        "spec.tasks[0].template.spec.containers[0].resources.requests.cpu",
        id="a cpu quantity like 2x",
    ),
    pytest.param(
        vcjob(task("w", 1, container(limits={"nvidia.com/gpu": "one"}))),
        'spec.tasks[0].template.spec.containers[0].resources.limits["nvidia.com/gpu"]',
        id="a GPU limit that is not a quantity",
    ),
    pytest.param(
        vcjob({"name": "w", "replicas": 1, "template": ["not", "a", "mapping"]}),
        "spec.tasks[0].template",
        id="a template that is not a mapping",
    ),
    pytest.param(
        vcjob({"name": "w", "replicas": 1}), "spec.tasks[0].template", id="a task without template"
    ),
    pytest.param(
        vcjob({"name": "w", "replicas": 1, "template": {"spec": {"containers": []}}}),
        "spec.tasks[0].template.spec.containers",
        id="a pod template without containers",
    ),
    pytest.param(vcjob(), "spec.tasks", id="a job without tasks"),
    pytest.param(
        {**vcjob(), "spec": {"tasks": {"w": {}}}}, "spec.tasks", id="tasks given as a mapping"
    ),
    pytest.param({**vcjob(), "spec": "nope"}, "spec", id="a spec that is not a mapping"),
    pytest.param(vcjob("worker"), "spec.tasks[0]", id="a task that is a bare string"),
    pytest.param(
        with_task_field(vcjob(task("w", 2, CPU1)), 0, minAvailable=3),
        "spec.tasks[0].minAvailable",
        id="a task minAvailable above its replicas",
    ),
    pytest.param(
        vcjob(task("w", 2, CPU1), minAvailable=5),
        "spec.minAvailable",
        id="a job minAvailable above the pod count",
    ),
    pytest.param(
        vcjob(task("w", 2, CPU1), minAvailable="all"),
        "spec.minAvailable",
        id="a job minAvailable given as a word",
    ),
    pytest.param(
        vcjob(task("w", 1, CPU1), task("w", 1, CPU1)),
        "spec.tasks[1].name",
        id="two tasks with the same name",
    ),
    pytest.param(vcjob(task("w", 1, CPU1), queue=7), "spec.queue", id="a queue that is a number"),
    pytest.param(
        {**vcjob(task("w", 1, CPU1)), "metadata": {}}, "metadata.name", id="a job without a name"
    ),
]


@pytest.mark.parametrize(("obj", "path"), ERRORS)
def test_malformed_jobs_name_the_bad_field(obj, path):
    with pytest.raises(DemandError) as info:
        read_workload(obj)
    assert info.value.path == path
