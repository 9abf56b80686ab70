"""mpi-operator v2 MPIJob: launcher + workers, PodGroup minMember workers + 1, priority fallback."""

from __future__ import annotations

from typing import Any

import pytest

from engine.workloads.model import DemandError
from engine.workloads.registry import read_workload
from tests.workloads.builders import container, replica, res

L = "spec.mpiReplicaSpecs.Launcher"
W = "spec.mpiReplicaSpecs.Worker"


def mpijob(replicas: dict, **spec: Any) -> dict:
    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": "pi", "namespace": "hpc"},
        "spec": {"slotsPerWorker": 1, "mpiReplicaSpecs": replicas, **spec},
    }


def scheduling(**policy: Any) -> dict:
    return {"runPolicy": {"cleanPodPolicy": "Running", "schedulingPolicy": policy}}


LAUNCHER = container({"cpu": "1", "memory": "1Gi"})
LAUNCHER_REQ = res(cpu=1, memory="1Gi")
WORKER = container({"cpu": "8", "memory": "64Gi"}, {"nvidia.com/gpu": 8})
WORKER_REQ = res(cpu=8, memory="64Gi", nvidia_com_gpu=8)

READS = [
    pytest.param(
        mpijob({"Launcher": replica(1, LAUNCHER), "Worker": replica(4, WORKER)}),
        [("Launcher", 1, LAUNCHER_REQ), ("Worker", 4, WORKER_REQ)],
        5,
        id="the gang minimum is workers plus one like mpi-operator's PodGroup",
    ),
    pytest.param(
        mpijob({"Launcher": replica(None, LAUNCHER), "Worker": replica(2, WORKER)}),
        [("Launcher", 1, LAUNCHER_REQ), ("Worker", 2, WORKER_REQ)],
        3,
        id="a launcher without replicas has one",
    ),
    pytest.param(
        mpijob(
            {"Launcher": replica(1, LAUNCHER), "Worker": replica(4, WORKER)},
            **scheduling(minAvailable=3),
        ),
        [("Launcher", 1, LAUNCHER_REQ), ("Worker", 4, WORKER_REQ)],
        3,
        id="schedulingPolicy minAvailable below the pod count overrides workers plus one",
    ),
    pytest.param(
        mpijob(
            {"Launcher": replica(1, LAUNCHER), "Worker": replica(2, WORKER)},
            runLauncherAsWorker=True,
        ),
        [("Launcher", 1, LAUNCHER_REQ), ("Worker", 2, WORKER_REQ)],
        3,
        id="runLauncherAsWorker adds no pod and leaves the gang minimum at workers plus one",
    ),
    pytest.param(
        mpijob({"Launcher": replica(1, WORKER)}, runLauncherAsWorker=True),
        [("Launcher", 1, WORKER_REQ)],
        1,
        id="a launcher-only job that runs its ranks in the launcher is one pod",
    ),
    pytest.param(
        mpijob(
            {
                "Launcher": replica(1, container(limits={"cpu": "500m", "memory": "512M"})),
                "Worker": replica(2, container(limits={"nvidia.com/gpu": 2})),
            }
        ),
        [
            ("Launcher", 1, res(cpu="500m", memory=512 * 10**6)),
            ("Worker", 2, res(nvidia_com_gpu=2)),
        ],
        3,
        id="limits without requests are counted as requests",
    ),
    pytest.param(
        mpijob(
            {
                "Launcher": replica(1, {"name": "mpi", "image": "mpi-pi"}),
                "Worker": replica(
                    2,
                    container({"cpu": "2"}),
                    initContainers=[container({"cpu": "4", "memory": "1Mi"})],
                ),
            }
        ),
        [("Launcher", 1, res()), ("Worker", 2, res(cpu=4, memory="1Mi"))],
        3,
        id="a launcher with no requests and workers whose init container peaks higher",
    ),
]


@pytest.mark.parametrize(("obj", "roles", "min_member"), READS)
def test_reads_roles_and_gang_minimum(obj, roles, min_member):
    got = read_workload(obj)
    assert [(r.name, r.replicas, r.requests) for r in got.roles] == roles
    assert got.min_member == min_member
    assert got.resizable is False


PRIORITY = [
    pytest.param(
        mpijob(
            {
                "Launcher": replica(1, LAUNCHER, priorityClassName="launcher-pc"),
                "Worker": replica(1, WORKER, priorityClassName="worker-pc"),
            },
            **scheduling(priorityClass="policy-pc"),
        ),
        "policy-pc",
        id="the scheduling policy's priority class comes first",
    ),
    pytest.param(
        mpijob(
            {
                "Launcher": replica(1, LAUNCHER, priorityClassName="launcher-pc"),
                "Worker": replica(1, WORKER, priorityClassName="worker-pc"),
            }
        ),
        "launcher-pc",
        id="then the launcher pod template's priority class",
    ),
    pytest.param(
        mpijob(
            {
                "Launcher": replica(1, LAUNCHER),
                "Worker": replica(1, WORKER, priorityClassName="worker-pc"),
            }
        ),
        "worker-pc",
        id="then the worker pod template's priority class",
    ),
    pytest.param(
        mpijob({"Launcher": replica(1, LAUNCHER), "Worker": replica(1, WORKER)}),
        None,
        id="and none when nobody names one",
    ),
]


@pytest.mark.parametrize(("obj", "priority_class"), PRIORITY)
def test_priority_class_follows_mpi_operator_order(obj, priority_class):
    assert read_workload(obj).priority_class_name == priority_class


def test_queue_hint_comes_from_the_scheduling_policy():
    obj = mpijob(
        {"Launcher": replica(1, LAUNCHER), "Worker": replica(1, WORKER)},
        **scheduling(queue="hpc"),
    )
    assert read_workload(obj).queue == "hpc"


def test_total_counts_launcher_and_workers():
    obj = mpijob({"Launcher": replica(1, LAUNCHER), "Worker": replica(2, WORKER)})
    assert read_workload(obj).total == res(cpu=17, memory="129Gi", nvidia_com_gpu=16, pods=3)


ERRORS = [
    pytest.param(
        mpijob({"Launcher": replica(1, LAUNCHER), "Worker": replica(None, WORKER)}),
        f"{W}.replicas",
        id="a worker without replicas which mpi-operator would default to 0 and reject",
    ),
    pytest.param(
        mpijob({"Launcher": replica(1, LAUNCHER), "Worker": replica(0, WORKER)}),
        f"{W}.replicas",
        id="a worker with zero replicas",
    ),
    pytest.param(
        mpijob({"Launcher": replica(1, LAUNCHER), "Worker": replica("two", WORKER)}),
        f"{W}.replicas",
        id="worker replicas as a word",
    ),
    pytest.param(
        mpijob({"Launcher": replica(2, LAUNCHER), "Worker": replica(1, WORKER)}),
        f"{L}.replicas",
        id="two launchers",
    ),
    pytest.param(mpijob({"Worker": replica(2, WORKER)}), L, id="no launcher at all"),
    pytest.param(
        mpijob({"Launcher": replica(1, LAUNCHER), "worker": replica(2, WORKER)}),
        "spec.mpiReplicaSpecs.worker",
        id="a replica type in the wrong case",
    ),
    pytest.param(
        mpijob({"Launcher": replica(1, container({"memory": "2x"}))}),
        f"{L}.template.spec.containers[0].resources.requests.memory",
        id="a memory quantity like 2x",
    ),
    pytest.param(
        mpijob({"Launcher": {"replicas": 1, "template": 42}}),
        f"{L}.template",
        id="a template that is not a mapping",
    ),
    pytest.param(
        mpijob({"Launcher": replica(1, LAUNCHER)}, runLauncherAsWorker="yes"),
        "spec.runLauncherAsWorker",
        id="runLauncherAsWorker as a string",
    ),
    pytest.param(
        mpijob(
            {"Launcher": replica(1, LAUNCHER), "Worker": replica(2, WORKER)},
            **scheduling(minAvailable=4),
        ),
        "spec.runPolicy.schedulingPolicy.minAvailable",
        id="minAvailable above the pod count",
    ),
    pytest.param(
        mpijob({"Launcher": replica(1, LAUNCHER, priorityClassName=5)}),
        f"{L}.template.spec.priorityClassName",
        id="a pod priority class that is a number",
    ),
    pytest.param(
        {**mpijob({}), "spec": {"mpiReplicaSpecs": "Launcher"}},
        "spec.mpiReplicaSpecs",
        id="replica specs given as a string",
    ),
]


@pytest.mark.parametrize(("obj", "path"), ERRORS)
def test_malformed_jobs_name_the_bad_field(obj, path):
    with pytest.raises(DemandError) as info:
        read_workload(obj)
    assert info.value.path == path
