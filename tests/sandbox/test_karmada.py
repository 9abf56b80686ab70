"""Karmada's part of the sandbox, driven through the real ``kubernetes`` client.

Controllers run one deterministic pass at a time (``run_once``) on a fake clock; one test runs
them on their thread against real time.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from kubernetes.client import CustomObjectsApi
from kubernetes.client.rest import ApiException

from engine.fleet.bindings import is_finished
from engine.fleet.frozen import FrozenDict
from engine.members import ClusterSpec, Fleet, FleetSpec, NodeGroup
from engine.workloads.registry import known_kinds
from sandbox.admission import AdmissionRequest
from sandbox.karmada import KarmadaControllers, Timings
from sandbox.karmada.names import DURATION_ANNOTATION, work_name
from sandbox.server import Sandbox
from tests.sandbox.builders import pytorchjob

KUBEFLOW = ("kubeflow.org", "v1", "pytorchjobs")
POLICY = ("policy.karmada.io", "v1alpha1", "propagationpolicies")
RB = ("work.karmada.io", "v1alpha2", "resourcebindings")
WORKS = ("work.karmada.io", "v1alpha1", "works")
CLUSTERS = ("cluster.karmada.io", "v1alpha1", "clusters")
NODE = {"cpu": 96, "memory": 2**40, "nvidia.com/gpu": 8}
T0 = datetime(2026, 1, 1, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> datetime:
        self.now += timedelta(seconds=seconds)
        return self.now


def member(name: str, nodes: int, **labels: str) -> ClusterSpec:
    return ClusterSpec(
        name,
        labels=FrozenDict(labels),
        kinds=tuple(known_kinds()),
        nodes=(NodeGroup.of(nodes, NODE),),
    )


def fleet() -> Fleet:
    clusters = (member("gpu-small", 2, tier="small"), member("gpu-large", 4, tier="large"))
    return Fleet(FleetSpec(clusters, job_duration=timedelta(minutes=1)), T0)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def karmada(sandbox: Sandbox, clock: Clock) -> Iterator[KarmadaControllers]:
    controllers = KarmadaControllers(sandbox.store, fleet(), clock)
    controllers.run_once()
    yield controllers
    controllers.stop()


def policy(name: str = "pp", **placement: Any) -> dict[str, Any]:
    return {
        "apiVersion": "policy.karmada.io/v1alpha1",
        "kind": "PropagationPolicy",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "resourceSelectors": [{"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob"}],
            "placement": placement,
        },
    }


def create(custom: CustomObjectsApi, what: tuple[str, str, str], body: dict[str, Any]) -> Any:
    return custom.create_namespaced_custom_object(*what[:2], "default", what[2], body)


def get(custom: CustomObjectsApi, what: tuple[str, str, str], name: str, ns: str = "default"):
    return custom.get_namespaced_custom_object(*what[:2], ns, what[2], name)


def works(custom: CustomObjectsApi) -> dict[str, dict[str, Any]]:
    """Works by execution namespace."""
    items = custom.list_cluster_custom_object(*WORKS)["items"]
    return {w["metadata"]["namespace"]: w for w in items}


def submit(custom: CustomObjectsApi, name: str = "train", **annotations: str) -> dict[str, Any]:
    job = pytorchjob(name)
    job["metadata"]["annotations"] = annotations
    return create(custom, KUBEFLOW, job)


def test_detector_to_completion(custom: CustomObjectsApi, karmada, clock: Clock):
    pp = create(custom, POLICY, policy())
    job = submit(custom)
    karmada.run_once()

    rb = get(custom, RB, "train-pytorchjob")
    pp = get(custom, POLICY, "pp")
    pp_id = pp["metadata"]["labels"]["propagationpolicy.karmada.io/permanent-id"]
    assert rb["metadata"]["labels"]["propagationpolicy.karmada.io/permanent-id"] == pp_id
    assert rb["metadata"]["annotations"]["propagationpolicy.karmada.io/name"] == "pp"
    assert rb["metadata"]["ownerReferences"][0]["uid"] == job["metadata"]["uid"]
    assert rb["metadata"]["finalizers"] == ["karmada.io/binding-controller"]
    template = get(custom, KUBEFLOW, "train")
    assert template["metadata"]["labels"]["propagationpolicy.karmada.io/permanent-id"] == pp_id
    # no fleetgate webhook: not suspended, so the scheduler places it on the most free GPUs
    assert "suspension" not in rb["spec"]
    assert rb["spec"]["clusters"] == [{"name": "gpu-large"}]
    scheduled = {c["type"]: c for c in rb["status"]["conditions"]}["Scheduled"]
    assert (scheduled["status"], scheduled["reason"]) == ("True", "Success")
    assert rb["status"]["schedulerObservedGeneration"] == rb["metadata"]["generation"]
    assert rb["status"]["lastScheduledTime"] == "2026-01-01T00:00:00Z"

    work = works(custom)["karmada-es-gpu-large"]
    assert work["metadata"]["name"] == work_name("PyTorchJob", "train", "default")
    manifest = work["spec"]["workload"]["manifests"][0]
    assert manifest["kind"] == "PyTorchJob" and "status" not in manifest
    assert "uid" not in manifest["metadata"]

    (item,) = rb["status"]["aggregatedStatus"]
    assert (item["clusterName"], item["applied"], item["health"]) == ("gpu-large", True, "Healthy")
    assert {c["type"] for c in item["status"]["conditions"]} == {"Created", "Running"}
    assert not is_finished(item["status"])
    assert {c["type"]: c["status"] for c in rb["status"]["conditions"]}["FullyApplied"] == "True"

    karmada.run_once(clock.advance(59))
    assert not is_finished(
        get(custom, RB, "train-pytorchjob")["status"]["aggregatedStatus"][0]["status"]
    )
    karmada.run_once(clock.advance(1))
    rb = get(custom, RB, "train-pytorchjob")
    status = rb["status"]["aggregatedStatus"][0]["status"]
    assert is_finished(status)
    assert {c["type"]: c["status"] for c in status["conditions"]}["Succeeded"] == "True"
    assert get(custom, KUBEFLOW, "train")["status"] == status


def test_running_at_names_the_templates_a_member_runs_until_their_end(custom, karmada, clock):
    create(custom, POLICY, policy())
    submit(custom)
    started = clock.advance(0)
    karmada.run_once(started)
    assert karmada.running_at("gpu-large", started) == {("default", "train")}
    assert karmada.running_at("gpu-small", started) == set()
    # at its end (60 s here) it runs no more, before any pass has said so
    assert karmada.running_at("gpu-large", clock.advance(60)) == set()


def test_a_pass_twice_writes_nothing(sandbox: Sandbox, custom, karmada, clock):
    create(custom, POLICY, policy())
    submit(custom)
    karmada.run_once()
    karmada.run_once()
    before = sandbox.store.resource_version
    karmada.run_once()
    assert sandbox.store.resource_version == before


class Suspending:
    """fleetgate's webhook in outline: every new binding is suspended."""

    def mutate(self, request: AdmissionRequest) -> dict[str, Any] | None:
        obj = request.object
        if obj is None or obj.get("kind") != "ResourceBinding" or request.operation != "CREATE":
            return None
        obj["spec"].setdefault("suspension", {})["scheduling"] = True
        return obj

    def validate(self, request: AdmissionRequest) -> None:
        return None


@pytest.fixture
def suspending(sandbox: Sandbox) -> Iterator[None]:
    previous = sandbox.store.admission
    sandbox.store.admission = Suspending()
    yield
    sandbox.store.admission = previous


def bind(custom: CustomObjectsApi, *clusters: str) -> None:
    """What fleetgate's reconciler does in bind mode: a merge patch of spec.clusters."""
    patch = {"spec": {"clusters": [{"name": c} for c in clusters]}}
    custom.patch_namespaced_custom_object(*RB[:2], "default", RB[2], "train-pytorchjob", patch)


def test_suspended_binding_waits_for_bind_mode(custom, karmada, suspending, clock):
    create(custom, POLICY, policy())
    submit(custom)
    for _ in range(3):
        karmada.run_once(clock.advance(5))
    rb = get(custom, RB, "train-pytorchjob")
    assert rb["spec"]["suspension"] == {"scheduling": True}
    assert "clusters" not in rb["spec"]
    assert "conditions" not in rb.get("status", {})
    assert works(custom) == {}

    bind(custom, "gpu-small")
    karmada.run_once(clock.advance(1))
    assert list(works(custom)) == ["karmada-es-gpu-small"]
    rb = get(custom, RB, "train-pytorchjob")
    assert rb["spec"]["suspension"] == {"scheduling": True}  # the detector keeps it
    assert rb["status"]["aggregatedStatus"][0]["health"] == "Healthy"
    assert karmada.member("gpu-small").job_state(
        "karmada-es-gpu-small/" + work_name("PyTorchJob", "train", "default")
    )


def test_removing_a_cluster_removes_its_work_and_job(custom, karmada, suspending, clock):
    create(custom, POLICY, policy())
    submit(custom)
    karmada.run_once()
    bind(custom, "gpu-small", "gpu-large")
    karmada.run_once(clock.advance(1))
    assert sorted(works(custom)) == ["karmada-es-gpu-large", "karmada-es-gpu-small"]
    job = "karmada-es-gpu-small/" + work_name("PyTorchJob", "train", "default")
    assert karmada.member("gpu-small").job_state(job).phase == "Running"

    bind(custom, "gpu-large")
    karmada.run_once(clock.advance(1))
    assert list(works(custom)) == ["karmada-es-gpu-large"]
    assert karmada.member("gpu-small").job_state(job) is None
    rb = get(custom, RB, "train-pytorchjob")
    assert [i["clusterName"] for i in rb["status"]["aggregatedStatus"]] == ["gpu-large"]


def test_deleting_the_template_removes_binding_works_and_jobs(custom, karmada, clock):
    create(custom, POLICY, policy())
    submit(custom)
    karmada.run_once()
    assert works(custom)
    custom.delete_namespaced_custom_object(*KUBEFLOW[:2], "default", KUBEFLOW[2], "train")
    karmada.run_once(clock.advance(1))
    with pytest.raises(ApiException) as gone:
        get(custom, RB, "train-pytorchjob")
    assert gone.value.status == 404
    assert works(custom) == {}
    assert all(not m.job_keys() for m in karmada.fleet.values())


def test_a_policy_created_later_claims_the_template(custom, karmada, clock):
    submit(custom)
    karmada.run_once()
    assert custom.list_namespaced_custom_object(*RB[:2], "default", RB[2])["items"] == []
    create(custom, POLICY, policy(clusterAffinity={"clusterNames": ["gpu-small"]}))
    karmada.run_once(clock.advance(1))
    assert get(custom, RB, "train-pytorchjob")["spec"]["clusters"] == [{"name": "gpu-small"}]


def test_placement_affinity_and_taints(custom, karmada, clock):
    cluster = custom.get_cluster_custom_object(*CLUSTERS, "gpu-large")
    cluster["spec"]["taints"] = [{"key": "maintenance", "effect": "NoSchedule"}]
    custom.replace_cluster_custom_object(*CLUSTERS, "gpu-large", cluster)
    create(
        custom,
        POLICY,
        policy(clusterAffinity={"labelSelector": {"matchLabels": {"tier": "large"}}}),
    )
    submit(custom)
    karmada.run_once()
    rb = get(custom, RB, "train-pytorchjob")
    assert "clusters" not in rb["spec"]
    scheduled = rb["status"]["conditions"][0]
    assert (scheduled["type"], scheduled["status"], scheduled["reason"]) == (
        "Scheduled",
        "False",
        "NoClusterFit",
    )
    assert "untolerated taint" in scheduled["message"]

    toleration = {"key": "maintenance", "operator": "Exists", "effect": "NoSchedule"}
    patch = {"spec": {"placement": {"clusterTolerations": [toleration]}}}
    custom.patch_namespaced_custom_object(*POLICY[:2], "default", POLICY[2], "pp", patch)
    karmada.run_once(clock.advance(1))
    assert get(custom, RB, "train-pytorchjob")["spec"]["clusters"] == [{"name": "gpu-large"}]


def test_cluster_status_refreshes_every_period(custom, karmada, clock):
    def allocated_gpus() -> str:
        cluster = custom.get_cluster_custom_object(*CLUSTERS, "gpu-large")
        return cluster["status"]["resourceSummary"]["allocated"].get("nvidia.com/gpu", "0")

    cluster = custom.get_cluster_custom_object(*CLUSTERS, "gpu-large")
    ready = {c["type"]: c for c in cluster["status"]["conditions"]}["Ready"]
    assert ready["status"] == "True"
    assert cluster["status"]["resourceSummary"]["allocatable"]["nvidia.com/gpu"] == "32"
    assert {
        "groupVersion": "kubeflow.org/v1",
        "resources": [
            {"name": "jaxjobs", "kind": "JAXJob"},
            {"name": "mpijobs", "kind": "MPIJob"},
            {"name": "paddlejobs", "kind": "PaddleJob"},
            {"name": "pytorchjobs", "kind": "PyTorchJob"},
            {"name": "tfjobs", "kind": "TFJob"},
            {"name": "xgboostjobs", "kind": "XGBoostJob"},
        ],
    } in cluster["status"]["apiEnablements"]

    create(custom, POLICY, policy())
    submit(custom)
    karmada.run_once(clock.advance(1))
    assert allocated_gpus() == "0"  # stale until the next refresh
    karmada.run_once(clock.advance(8.9))
    assert allocated_gpus() == "0"
    karmada.run_once(clock.advance(0.1))
    assert allocated_gpus() == "8"
    cluster = custom.get_cluster_custom_object(*CLUSTERS, "gpu-large")
    assert {c["type"]: c for c in cluster["status"]["conditions"]}["Ready"] == ready


def test_a_failed_member_job_is_unhealthy(custom, karmada, clock):
    create(custom, POLICY, policy())
    submit(custom)
    karmada.run_once()
    job = "karmada-es-gpu-large/" + work_name("PyTorchJob", "train", "default")
    karmada.member("gpu-large").fail(job, clock.advance(2), "OOMKilled")
    karmada.run_once()
    item = get(custom, RB, "train-pytorchjob")["status"]["aggregatedStatus"][0]
    assert item["health"] == "Unhealthy"
    assert is_finished(item["status"])
    failed = {c["type"]: c for c in item["status"]["conditions"]}["Failed"]
    assert failed["message"] == "OOMKilled"


def wait_for(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_started_controllers_follow_changes(sandbox: Sandbox, custom: CustomObjectsApi):
    controllers = KarmadaControllers(sandbox.store, fleet(), timings=Timings(tick=0.05))
    with controllers:
        create(custom, POLICY, policy())
        submit(custom, **{DURATION_ANNOTATION: "0.3s"})

        def succeeded() -> bool:
            status = get(custom, KUBEFLOW, "train").get("status") or {}
            return any(c["type"] == "Succeeded" for c in status.get("conditions", []))

        wait_for(succeeded)
    assert controllers._thread is None


def test_incremental_passes_follow_events_alone(custom: CustomObjectsApi, karmada, clock):
    """Without a resync, the events queued by the API writes drive the whole loop."""
    create(custom, POLICY, policy())
    submit(custom, **{DURATION_ANNOTATION: "30s"})
    for _ in range(4):
        karmada.run_once(clock.advance(1), full=False)
    rb = get(custom, RB, "train-pytorchjob")
    assert rb["spec"]["clusters"] == [{"name": "gpu-large"}]
    assert rb["status"]["aggregatedStatus"][0]["health"] == "Healthy"
    karmada.run_once(clock.advance(30), full=False)
    karmada.run_once(clock.advance(1), full=False)
    assert is_finished(get(custom, KUBEFLOW, "train")["status"])
