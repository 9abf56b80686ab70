"""Karmada's part of the sandbox, in process: names, job statuses, detector details."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from engine.fleet.bindings import is_finished
from engine.members import ClusterSpec, Fleet, FleetSpec, JobState, NodeGroup, Phase, load_fleet
from engine.workloads.registry import known_kinds
from sandbox.karmada import KarmadaControllers
from sandbox.karmada.execution import parse_duration
from sandbox.karmada.jobstatus import SERVICE_KINDS, health, operator_status
from sandbox.karmada.names import work_name
from sandbox.store import Store
from tests.sandbox.builders import pytorchjob

PENDING, RUNNING, SUCCEEDED, FAILED = Phase.PENDING, Phase.RUNNING, Phase.SUCCEEDED, Phase.FAILED
T0 = datetime(2026, 1, 1, tzinfo=UTC)
GPU_NODE = {"cpu": 96, "memory": 2**40, "nvidia.com/gpu": 8}
RB = "resourcebindings.work.karmada.io"
PP = "propagationpolicies.policy.karmada.io"


def test_work_name_is_karmadas():
    assert work_name("Deployment", "nginx", "default") == "nginx-687f7fb96f"  # Karmada's docs
    assert work_name("ClusterRole", "system:tom", "").startswith("system.tom-")


def state(phase: Phase) -> JobState:
    started = T0 if phase != PENDING else None
    finished = T0 + timedelta(seconds=5) if phase in (SUCCEEDED, FAILED) else None
    bound = 0 if phase == PENDING else 2
    message = "boom" if phase == FAILED else ""
    return JobState("k", phase, bound, 2, T0, started, finished, message=message)


@pytest.mark.parametrize(
    ("api_version", "kind"), [k for k in known_kinds() if k[1] not in SERVICE_KINDS]
)
def test_operator_status_ends_where_is_finished_says(api_version: str, kind: str):
    for phase, finished in ((PENDING, False), (RUNNING, False), (SUCCEEDED, True), (FAILED, True)):
        status = operator_status(api_version, kind, state(phase))
        assert is_finished(status) is finished, (kind, phase, status)


def test_health():
    assert [health(None), health(state(PENDING))] == ["Unknown", "Unknown"]
    assert [health(state(RUNNING)), health(state(SUCCEEDED))] == ["Healthy", "Healthy"]
    assert health(state(FAILED)) == "Unhealthy"


def test_parse_duration():
    assert parse_duration("90") == timedelta(seconds=90)
    assert parse_duration("1h30m") == timedelta(minutes=90)
    assert parse_duration("0.5s") == timedelta(seconds=0.5)
    assert parse_duration("soon") is None


def deployment(replicas: int) -> dict[str, Any]:
    pod = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"replicas": replicas, "template": {"spec": pod}},
    }


def pp(kind: str, api_version: str, **placement: Any) -> dict[str, Any]:
    return {
        "apiVersion": "policy.karmada.io/v1alpha1",
        "kind": "PropagationPolicy",
        "metadata": {"name": "pp", "namespace": "default"},
        "spec": {
            "resourceSelectors": [{"apiVersion": api_version, "kind": kind}],
            "placement": placement,
        },
    }


@pytest.fixture
def karmada() -> KarmadaControllers:
    clusters = (
        ClusterSpec("a", kinds=tuple(known_kinds()), nodes=(NodeGroup.of(1, GPU_NODE),)),
        ClusterSpec("b", kinds=tuple(known_kinds()), nodes=(NodeGroup.of(2, GPU_NODE),)),
        ClusterSpec("c", nodes=(NodeGroup.of(8, GPU_NODE),)),  # no job CRDs
    )
    controllers = KarmadaControllers(Store(), Fleet(FleetSpec(clusters), T0), lambda: T0)
    controllers.run_once()
    return controllers


def test_a_divisible_kind_gets_its_replicas(karmada: KarmadaControllers):
    store = karmada.store
    store.create(PP, pp("Deployment", "apps/v1"))
    store.create("deployments.apps", deployment(3))
    karmada.run_once()
    rb = store.get(RB, "web-deployment", namespace="default")
    assert rb["spec"]["replicas"] == 3
    assert rb["spec"]["clusters"] == [{"name": "c", "replicas": 3}]  # the most free cpu
    (work,) = store.list("works.work.karmada.io")["items"]
    assert work["spec"]["workload"]["manifests"][0]["spec"]["replicas"] == 3
    status = store.get("deployments.apps", "web", namespace="default")["status"]
    assert status["readyReplicas"] == 3


def test_a_deleted_policy_releases_the_template(karmada: KarmadaControllers):
    store = karmada.store
    store.create(PP, pp("PyTorchJob", "kubeflow.org/v1"))
    store.create("pytorchjobs.kubeflow.org", pytorchjob("train"))
    karmada.run_once()
    store.delete(PP, "pp", namespace="default")
    karmada.run_once()
    labels = store.get("pytorchjobs.kubeflow.org", "train", namespace="default")["metadata"]
    assert "propagationpolicy.karmada.io/permanent-id" not in (labels.get("labels") or {})
    assert "propagationpolicy.karmada.io/name" not in (labels.get("annotations") or {})
    # Karmada keeps the binding (and what runs) when its policy goes
    assert store.get(RB, "train-pytorchjob", namespace="default")["spec"]["clusters"]


def test_placement_changes_reach_the_binding_but_not_its_clusters(karmada: KarmadaControllers):
    store = karmada.store
    store.create(PP, pp("PyTorchJob", "kubeflow.org/v1"))
    store.create("pytorchjobs.kubeflow.org", pytorchjob("train"))
    karmada.run_once()
    store.patch(
        PP,
        "pp",
        {"spec": {"placement": {"clusterAffinity": {"clusterNames": ["a"]}}}},
        namespace="default",
    )
    karmada.run_once()
    rb = store.get(RB, "train-pytorchjob", namespace="default")
    assert rb["spec"]["placement"] == {"clusterAffinity": {"clusterNames": ["a"]}}
    assert rb["spec"]["clusters"] == [{"name": "b"}]  # rescheduling is not modelled


def test_a_kind_the_member_does_not_serve_is_not_applied(karmada: KarmadaControllers):
    store = karmada.store
    store.create(PP, pp("PyTorchJob", "kubeflow.org/v1", clusterAffinity={"clusterNames": ["c"]}))
    store.create("pytorchjobs.kubeflow.org", pytorchjob("train"))
    karmada.run_once()
    rb = store.get(RB, "train-pytorchjob", namespace="default")
    assert "did not have the API resource" in rb["status"]["conditions"][0]["message"]
    # placed anyway (bind mode, or a stale Cluster status): the Work is not applied
    patch = {"spec": {"clusters": [{"name": "c"}]}}
    store.patch(RB, "train-pytorchjob", patch, namespace="default")
    karmada.run_once()
    item = store.get(RB, "train-pytorchjob", namespace="default")["status"]["aggregatedStatus"][0]
    assert item["applied"] is False
    assert "no matches for kind" in item["appliedMessage"]


def test_the_example_fleet_file_becomes_clusters():
    fleet = Fleet(load_fleet("examples/fleet.yaml"), T0)
    controllers = KarmadaControllers(Store(), fleet, lambda: T0)
    controllers.run_once()
    clusters = controllers.store.list("clusters.cluster.karmada.io")["items"]
    assert sorted(c["metadata"]["name"] for c in clusters) == sorted(fleet.members)
    for cluster in clusters:
        ready = {c["type"]: c["status"] for c in cluster["status"]["conditions"]}
        assert ready["Ready"] == "True"
        assert cluster["status"]["resourceSummary"]["allocatable"]
    assert controllers.clusters.period == fleet.spec.status_period


def test_a_binding_with_no_clusters_gets_no_status_written(karmada: KarmadaControllers):
    store = karmada.store
    policy = pp("PyTorchJob", "kubeflow.org/v1")
    policy["spec"]["suspension"] = {"scheduling": True}  # held: never placed
    store.create(PP, policy)
    store.create("pytorchjobs.kubeflow.org", pytorchjob("held"))
    karmada.run_once()
    karmada.run_once()
    rb = store.get(RB, "held-pytorchjob", namespace="default")
    assert not rb["spec"].get("clusters")
    # Karmada's aggregatedStatus is omitempty: nothing to aggregate, nothing written
    assert "aggregatedStatus" not in (rb.get("status") or {})
