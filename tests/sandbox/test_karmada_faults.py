"""Faults read by Karmada's controllers: clusters down or unreachable, member jobs that fail.

Driven through the ``kubernetes`` client, one ``run_once`` pass at a time on a fake clock.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes.client import CustomObjectsApi

from engine.fleet.bindings import is_finished
from sandbox.faults import Faults
from sandbox.karmada import KarmadaControllers
from sandbox.karmada.names import work_name
from sandbox.server import Sandbox
from tests.sandbox.test_karmada import (
    CLUSTERS,
    KUBEFLOW,
    POLICY,
    RB,
    Clock,
    create,
    fleet,
    get,
    policy,
    submit,
    works,
)

JOB_ON_LARGE = "karmada-es-gpu-large/" + work_name("PyTorchJob", "train", "default")


@pytest.fixture
def faults(sandbox: Sandbox) -> Faults:
    return Faults(seed=1).attach(sandbox)


@pytest.fixture
def karmada(sandbox: Sandbox, clock: Clock, faults: Faults) -> Iterator[KarmadaControllers]:
    controllers = KarmadaControllers(sandbox.store, fleet(), clock, faults=faults)
    controllers.run_once()
    yield controllers
    controllers.stop()


@pytest.fixture
def clock() -> Clock:
    return Clock()


def ready(custom: CustomObjectsApi, cluster: str) -> dict[str, Any]:
    obj = custom.get_cluster_custom_object(*CLUSTERS, cluster)
    return {c["type"]: c for c in obj["status"]["conditions"]}["Ready"]


def allocated_gpus(custom: CustomObjectsApi, cluster: str) -> str:
    obj = custom.get_cluster_custom_object(*CLUSTERS, cluster)
    return obj["status"]["resourceSummary"]["allocated"].get("nvidia.com/gpu", "0")


def test_a_cluster_down_turns_not_ready_at_the_next_refresh_and_is_avoided(
    custom, karmada, faults, clock
):
    create(custom, POLICY, policy())
    faults.cluster_down("gpu-large")
    karmada.run_once(clock.advance(5))
    assert ready(custom, "gpu-large")["status"] == "True"  # stale until the next refresh
    karmada.run_once(clock.advance(5))
    down = ready(custom, "gpu-large")
    assert (down["status"], down["reason"]) == ("False", "ClusterNotReachable")
    assert down["lastTransitionTime"] == "2026-01-01T00:00:10Z"

    submit(custom)  # gpu-large has the most free GPUs, but it is not ready
    karmada.run_once(clock.advance(1))
    assert get(custom, RB, "train-pytorchjob")["spec"]["clusters"] == [{"name": "gpu-small"}]
    assert list(works(custom)) == ["karmada-es-gpu-small"]

    faults.cluster_up("gpu-large")
    karmada.run_once(clock.advance(9))
    up = ready(custom, "gpu-large")
    assert (up["status"], up["reason"]) == ("True", "ClusterReady")
    assert up["lastTransitionTime"] == "2026-01-01T00:00:20Z"
    submit(custom, "second")
    karmada.run_once(clock.advance(1))
    assert get(custom, RB, "second-pytorchjob")["spec"]["clusters"] == [{"name": "gpu-large"}]


def test_works_wait_while_their_cluster_is_not_ready(custom, karmada, faults, clock):
    faults.cluster_down("gpu-small")
    karmada.run_once(clock.advance(10))
    create(custom, POLICY, policy(clusterAffinity={"clusterNames": ["gpu-small"]}))
    submit(custom)
    karmada.run_once(clock.advance(1))
    rb = get(custom, RB, "train-pytorchjob")
    assert "clusters" not in rb["spec"]
    assert "were not ready" in rb["status"]["conditions"][0]["message"]

    faults.cluster_up("gpu-small")
    karmada.run_once(clock.advance(10))
    karmada.run_once(clock.advance(1))
    rb = get(custom, RB, "train-pytorchjob")
    assert rb["spec"]["clusters"] == [{"name": "gpu-small"}]
    assert rb["status"]["aggregatedStatus"][0]["health"] == "Healthy"


def test_an_unreachable_cluster_goes_stale_then_unknown_after_the_grace_period(
    custom, karmada, faults, clock
):
    create(custom, POLICY, policy())
    submit(custom)
    karmada.run_once(clock.advance(1))
    karmada.run_once(clock.advance(9))  # a refresh: the job's 8 GPUs are allocated
    assert allocated_gpus(custom, "gpu-large") == "8"
    before = custom.get_cluster_custom_object(*CLUSTERS, "gpu-large")["status"]

    faults.cluster_down("gpu-large", unreachable=True)
    custom.delete_namespaced_custom_object(*KUBEFLOW[:2], "default", KUBEFLOW[2], "train")
    karmada.run_once(clock.advance(1))
    assert works(custom) == {}  # the Work is gone, but not from the unreachable member
    assert karmada.member("gpu-large").job_state(JOB_ON_LARGE).phase == "Running"
    karmada.run_once(clock.advance(38))  # 39 s since the last status: still as it was
    assert custom.get_cluster_custom_object(*CLUSTERS, "gpu-large")["status"] == before

    karmada.run_once(clock.advance(1))  # 40 s: the cluster monitor's grace period
    status = custom.get_cluster_custom_object(*CLUSTERS, "gpu-large")["status"]
    unknown = {c["type"]: c for c in status["conditions"]}["Ready"]
    assert (unknown["status"], unknown["reason"]) == ("Unknown", "ClusterStatusUnknown")
    assert unknown["message"] == "Cluster status controller stopped posting cluster status."
    assert status["resourceSummary"] == before["resourceSummary"]  # stale data stays

    submit(custom, "second")
    karmada.run_once(clock.advance(1))
    assert get(custom, RB, "second-pytorchjob")["spec"]["clusters"] == [{"name": "gpu-small"}]

    faults.cluster_up("gpu-large")
    karmada.run_once(clock.advance(1))  # reachable: the Work's removal reaches the member
    assert karmada.member("gpu-large").job_state(JOB_ON_LARGE) is None
    assert ready(custom, "gpu-large")["status"] == "True"
    karmada.run_once(clock.advance(10))  # the next refresh shows the freed GPUs
    assert allocated_gpus(custom, "gpu-large") == "0"


def test_a_job_failure_fails_the_member_job_binding_and_template(custom, karmada, faults, clock):
    create(custom, POLICY, policy())
    submit(custom)
    karmada.run_once(clock.advance(1))
    faults.fail_job("default", "train", "OOMKilled")
    karmada.run_once(clock.advance(2))

    state = karmada.member("gpu-large").job_state(JOB_ON_LARGE)
    assert (state.phase, state.message) == ("Failed", "OOMKilled")
    rb = get(custom, RB, "train-pytorchjob")
    (item,) = rb["status"]["aggregatedStatus"]
    assert (item["clusterName"], item["applied"], item["health"]) == (
        "gpu-large",
        True,
        "Unhealthy",
    )
    assert is_finished(item["status"])
    failed = {c["type"]: c for c in item["status"]["conditions"]}["Failed"]
    assert (failed["status"], failed["message"]) == ("True", "OOMKilled")
    template = get(custom, KUBEFLOW, "train")
    assert template["status"] == item["status"]

    faults.clear_job("default", "train")  # a failed job stays failed
    karmada.run_once(clock.advance(120))
    assert get(custom, RB, "train-pytorchjob")["status"]["aggregatedStatus"][0]["health"] == (
        "Unhealthy"
    )


def test_a_fault_wakes_the_started_controllers(sandbox: Sandbox, faults: Faults):
    controllers = KarmadaControllers(sandbox.store, fleet(), faults=faults)
    woken: list[bool] = []
    controllers._wake.clear()
    faults.cluster_down("gpu-small")
    woken.append(controllers._wake.is_set())
    assert woken == [True]
