"""Failure, requeue, give-up, preemption and scale-up end to end: the HTTPS sandbox with its
faults, fleetgate's real webhook, Karmada's controllers over examples/fleet.yaml, the real
``kubernetes`` client, and the reconciler with policies/ (requeue: backoffBase 1m,
backoffMax 30m, maxAttempts 4).

As in test_loop.py, Karmada's controllers and the reconciler run ``run_once`` on a shared fake
clock; only the informers and the webhook run on threads.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import kubernetes
import pytest

from engine import annotations as ann
from reconciler.loop import PassSummary, Reconciler
from sandbox.faults import Faults
from sandbox.karmada import KarmadaControllers
from sandbox.karmada.names import DURATION_ANNOTATION, execution_namespace, work_name
from sandbox.server import Sandbox
from tests.reconciler.conftest import time_limit
from tests.reconciler.test_loop import (
    KUBEFLOW,
    NS,
    RB,
    Clock,
    binding,
    caught_up,
    conditions,
    karmada_world,
    started_reconciler,
)
from tests.sandbox.test_webhooks import pytorchjob

TEST_SECONDS = 120
BACKOFF = timedelta(minutes=1)  # policies/scheduling.yaml requeue.backoffBase
EXCLUSION = timedelta(minutes=30)  # requeue.backoffMax: how long a failed cluster is excluded
GRACE = timedelta(minutes=5)  # requeue.clusterNotReadyGrace


@pytest.fixture(autouse=True)
def bounded() -> Iterator[None]:
    with time_limit(TEST_SECONDS):
        yield


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def custom(api_client: kubernetes.client.ApiClient) -> kubernetes.client.CustomObjectsApi:
    return kubernetes.client.CustomObjectsApi(api_client)


@pytest.fixture
def core(api_client: kubernetes.client.ApiClient) -> kubernetes.client.CoreV1Api:
    return kubernetes.client.CoreV1Api(api_client)


@pytest.fixture
def faults(sandbox: Sandbox) -> Faults:
    return Faults(seed=1).attach(sandbox)


@pytest.fixture
def karmada(
    sandbox: Sandbox,
    api_client: kubernetes.client.ApiClient,
    tmp_path: Path,
    clock: Clock,
    faults: Faults,
) -> Iterator[KarmadaControllers]:
    """The webhook, the research namespace and its policy, and Karmada's controllers reading
    ``faults`` (one pass done: Clusters exist)."""
    with karmada_world(sandbox, api_client, tmp_path, clock, faults) as controllers:
        yield controllers


@pytest.fixture
def rec(api_client: kubernetes.client.ApiClient, clock: Clock) -> Iterator[Reconciler]:
    with started_reconciler(api_client, clock) as reconciler:
        yield reconciler


def submit(
    custom, name: str, workers: int, priority_class: str = "research-high", runs: str = "5m"
) -> None:
    """A PyTorchJob of 1 + ``workers`` pods of 8 GPUs (and 400Gi, which a node of either GPU
    cluster's top grade holds) in research-training, running ``runs``."""
    job = pytorchjob(workers)
    job["metadata"]["name"] = name
    job["metadata"]["annotations"] = {DURATION_ANNOTATION: runs}
    job["spec"]["runPolicy"]["schedulingPolicy"]["priorityClass"] = priority_class
    job["spec"]["runPolicy"]["schedulingPolicy"]["minAvailable"] = 1 + workers
    for role in job["spec"]["pytorchReplicaSpecs"].values():  # small enough for either cluster
        resources = role["template"]["spec"]["containers"][0]["resources"]
        resources["requests"]["memory"] = resources["limits"]["memory"] = "400Gi"
    custom.create_namespaced_custom_object(*KUBEFLOW, job)


def step(karmada: KarmadaControllers, rec: Reconciler, custom, clock: Clock) -> PassSummary:
    """Karmada's controllers, then (once its cache caught up) one reconciler pass."""
    karmada.run_once(clock())
    caught_up(rec, custom)
    summary = rec.run_once()
    assert summary.errors == 0, summary
    return summary


def clusters_of(custom, job: str) -> list[str]:
    return [c["name"] for c in binding(custom, job)["spec"].get("clusters") or []]


def notes_of(custom, job: str) -> dict[str, str]:
    return dict(binding(custom, job)["metadata"].get("annotations") or {})


def works_on(custom, cluster: str) -> list[str]:
    found = custom.list_namespaced_custom_object(
        "work.karmada.io", "v1alpha1", execution_namespace(cluster), "works"
    )["items"]
    return sorted(w["metadata"]["name"] for w in found)


def events(core, job: str) -> list[tuple[str, str]]:
    """(reason, message) of the binding's Events, oldest first."""
    found = core.list_namespaced_event(
        NS, field_selector=f"involvedObject.name={job}-pytorchjob"
    ).items
    found.sort(key=lambda e: int(e.metadata.resource_version))
    return [(e.reason, e.message) for e in found]


def reasons(core, job: str) -> list[str]:
    return [reason for reason, _ in events(core, job)]


def admitted_and_running(karmada, rec, custom, clock, job: str) -> str:
    """Admit ``job`` (already submitted and held), run it; its cluster."""
    step(karmada, rec, custom, clock)
    (where,) = clusters_of(custom, job)
    step(karmada, rec, custom, clock)  # the member runs it; the reconciler records it
    assert ann.RUNNING_SINCE in notes_of(custom, job)
    return where


def test_a_job_failing_on_one_cluster_is_requeued_and_bound_to_another_after_its_backoff(
    custom, core, karmada, rec, clock, faults
):
    submit(custom, "first", workers=2)
    first = admitted_and_running(karmada, rec, custom, clock, "first")
    other = next(n for n in ("gpu-east", "gpu-west") if n != first)

    faults.fail_job(NS, "first", "NCCL watchdog timeout")
    clock.advance(10)
    summary = step(karmada, rec, custom, clock)  # the member fails it; fleetgate reclaims it
    assert (summary.requeued, summary.gave_up) == (1, 0), summary
    held = binding(custom, "first")
    notes = held["metadata"]["annotations"]
    assert not held["spec"].get("clusters")
    assert held["spec"]["suspension"]["scheduling"] is True
    assert notes[ann.ATTEMPTS] == "1"
    assert notes[ann.BACKOFF_UNTIL] == ann.format_time(clock() + BACKOFF)
    assert ann.parse_exclusions(notes[ann.EXCLUDED_CLUSTERS]) == {first: clock() + EXCLUSION}
    assert notes[ann.QUEUED_AT] == ann.format_time(clock())
    assert ann.ADMITTED_AT not in notes and ann.RUNNING_SINCE not in notes
    assert conditions(held)["Scheduled"]["reason"] == "FleetgateRequeued"
    requeued = dict(events(core, "first"))["Requeued"]
    assert "FailedOnMember" in requeued and "NCCL watchdog timeout" in requeued

    faults.clear_job(NS, "first")
    karmada.run_once(clock())  # Karmada removes the Work of the cluster the job left
    assert works_on(custom, first) == []
    # and its status there: a later admission to that cluster starts from a clean slate
    assert not (binding(custom, "first").get("status") or {}).get("aggregatedStatus")
    clock.advance(BACKOFF.total_seconds() - 1)
    step(karmada, rec, custom, clock)  # still backing off
    assert clusters_of(custom, "first") == []
    decided = rec.last_result.decision(f"{NS}/first-pytorchjob")
    assert decided is not None and decided.reason == "Backoff"

    clock.advance(1)
    step(karmada, rec, custom, clock)
    assert clusters_of(custom, "first") == [other]  # the failed cluster is excluded
    step(karmada, rec, custom, clock)
    assert works_on(custom, other) and works_on(custom, first) == []
    assert ann.RUNNING_SINCE in notes_of(custom, "first")
    assert reasons(core, "first") == [
        "Admitted",  # at once: it was never Pending, so never Queued
        "Running",
        "Requeued",
        "Admitted",
        "Running",
    ]


@pytest.mark.parametrize(
    ("unreachable", "status"),
    [(False, "False"), (True, "Unknown")],
    ids=["not-ready", "unreachable"],
)
def test_a_job_on_a_cluster_not_ready_past_the_grace_is_rescheduled_elsewhere(
    custom, core, karmada, rec, clock, faults, unreachable, status
):
    submit(custom, "first", workers=1, runs="1h")
    first = admitted_and_running(karmada, rec, custom, clock, "first")
    other = next(n for n in ("gpu-east", "gpu-west") if n != first)

    faults.cluster_down(first, unreachable=unreachable)
    clock.advance(60)  # past Karmada's cluster monitor grace (40s) for an unreachable member
    step(karmada, rec, custom, clock)  # the Cluster is not Ready: within the grace, it stays
    ready = conditions(
        custom.get_cluster_custom_object("cluster.karmada.io", "v1alpha1", "clusters", first)
    )["Ready"]
    assert ready["status"] == status
    down_since = ann.parse_time(ready["lastTransitionTime"])
    assert down_since is not None
    clock.now = down_since + GRACE - timedelta(seconds=1)
    assert step(karmada, rec, custom, clock).requeued == 0
    assert clusters_of(custom, "first") == [first]
    assert rec.due == down_since + GRACE  # the loop wakes when the grace runs out

    clock.now = down_since + GRACE
    summary = step(karmada, rec, custom, clock)
    assert summary.requeued == 1, summary
    assert clusters_of(custom, "first") == []
    assert "ClusterNotReady" in dict(events(core, "first"))["Requeued"]
    assert first in ann.parse_exclusions(notes_of(custom, "first")[ann.EXCLUDED_CLUSTERS])

    clock.advance(BACKOFF.total_seconds())
    step(karmada, rec, custom, clock)
    assert clusters_of(custom, "first") == [other]


def first_chance(notes: dict[str, str]):
    """When a requeued job may run again: after its backoff, on a GPU cluster not excluded."""
    after = ann.parse_time(notes[ann.BACKOFF_UNTIL])
    assert after is not None
    excluded = ann.parse_exclusions(notes.get(ann.EXCLUDED_CLUSTERS, ""))
    free = [excluded.get(name, after) for name in ("gpu-east", "gpu-west")]
    return max(after, min(free)) + timedelta(seconds=1)


def test_a_job_that_keeps_failing_is_given_up_after_max_attempts(
    custom, core, karmada, rec, clock, faults
):
    faults.fail_job(NS, "doomed", "segfault in the data loader")
    submit(custom, "doomed", workers=1)
    seen: list[str] = []
    for attempt in range(1, 5):
        step(karmada, rec, custom, clock)  # admitted wherever it may go now
        (where,) = clusters_of(custom, "doomed")
        seen.append(where)
        summary = step(karmada, rec, custom, clock)  # fails there; reclaimed
        assert (summary.requeued, summary.gave_up) == ((1, 0) if attempt < 4 else (0, 1))
        notes = notes_of(custom, "doomed")
        assert notes[ann.ATTEMPTS] == str(attempt)
        if attempt < 4:
            assert notes[ann.BACKOFF_UNTIL] == ann.format_time(
                clock() + BACKOFF * 2 ** (attempt - 1)
            )
            clock.now = first_chance(notes)
    # each attempt went where it had not just failed
    assert seen in (["gpu-east", "gpu-west"] * 2, ["gpu-west", "gpu-east"] * 2)

    notes = notes_of(custom, "doomed")
    assert notes[ann.GAVE_UP].startswith("gave up after 4 failed attempts")
    assert "segfault in the data loader" in notes[ann.GAVE_UP]
    assert ann.BACKOFF_UNTIL not in notes
    assert reasons(core, "doomed").count("Requeued") == 3
    assert reasons(core, "doomed")[-1] == "GaveUp"

    # it never runs again: the cycle rejects it, and writes nothing more
    summary = step(karmada, rec, custom, clock)
    assert clusters_of(custom, "doomed") == []
    decided = rec.last_result.decision(f"{NS}/doomed-pytorchjob")
    assert decided is not None and (decided.action, decided.reason) == ("Reject", "GaveUp")
    assert summary.applied == 0, summary

    # until a user removes the note: one more attempt
    custom.patch_namespaced_custom_object(
        *RB, "doomed-pytorchjob", {"metadata": {"annotations": {ann.GAVE_UP: None}}}
    )
    faults.clear_job(NS, "doomed")
    clock.advance(EXCLUSION.total_seconds() + 1)  # both clusters it failed on are allowed again
    step(karmada, rec, custom, clock)
    assert len(clusters_of(custom, "doomed")) == 1


def test_preemption_evicts_the_victim_and_requeues_it(custom, core, karmada, rec, clock):
    submit(custom, "victim", workers=3, priority_class="batch-low")  # 32 GPUs
    where = admitted_and_running(karmada, rec, custom, clock, "victim")
    assert works_on(custom, where) == [work_name("PyTorchJob", "victim", NS)]

    # 24 GPUs more would take research-training past its max of 48: the victim makes room
    submit(custom, "urgent", workers=2)
    step(karmada, rec, custom, clock)
    victim = binding(custom, "victim")
    assert not victim["spec"].get("clusters")
    notes = victim["metadata"]["annotations"]
    assert notes[ann.QUEUED_AT] == ann.format_time(clock())
    assert notes[ann.PENDING].startswith("Preempted: ")
    assert ann.ATTEMPTS not in notes and ann.BACKOFF_UNTIL not in notes  # not a failure
    assert ann.ADMITTED_AT not in notes and ann.RUNNING_SINCE not in notes
    assert reasons(core, "victim")[-1] == "Preempted"
    notes = notes_of(custom, "urgent")
    assert notes[ann.NOMINATED_CLUSTER] in ("gpu-east", "gpu-west")

    step(karmada, rec, custom, clock)  # Karmada removed the victim's Works: urgent is admitted
    victim_work = work_name("PyTorchJob", "victim", NS)
    assert all(victim_work not in works_on(custom, c) for c in ("gpu-east", "gpu-west"))
    assert clusters_of(custom, "urgent") == [notes[ann.NOMINATED_CLUSTER]]
    assert clusters_of(custom, "victim") == []
    assert reasons(core, "urgent") == ["Queued", "Admitted"]  # queued while its victim left
    decided = rec.last_result.decision(f"{NS}/victim-pytorchjob")
    assert decided is not None and decided.action == "Pending"


def batch_job(name: str, parallelism: int) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": NS,
            "annotations": {DURATION_ANNOTATION: "1h"},
        },
        "spec": {
            "parallelism": parallelism,
            "completions": 8,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {"name": "c", "image": "x", "resources": {"requests": {"cpu": "2"}}}
                    ],
                }
            },
        },
    }


def test_a_scaled_up_job_is_suspended_again_and_readmitted(
    api_client, custom, core, karmada, rec, clock
):
    custom.create_namespaced_custom_object(
        "policy.karmada.io",
        "v1alpha1",
        NS,
        "propagationpolicies",
        {
            "apiVersion": "policy.karmada.io/v1alpha1",
            "kind": "PropagationPolicy",
            "metadata": {"name": "batch-jobs", "namespace": NS},
            "spec": {
                "resourceSelectors": [{"apiVersion": "batch/v1", "kind": "Job"}],
                "placement": {"clusterAffinity": {"clusterNames": ["cpu-spot", "gpu-east"]}},
            },
        },
    )
    batch = kubernetes.client.BatchV1Api(api_client)
    batch.create_namespaced_job(NS, batch_job("etl", 2))
    step(karmada, rec, custom, clock)
    name = "etl-job"
    first = dict(custom.get_namespaced_custom_object(*RB, name))
    assert sum(c.get("replicas", 0) for c in first["spec"]["clusters"]) == 2
    admitted_at = first["metadata"]["annotations"][ann.ADMITTED_AT]
    step(karmada, rec, custom, clock)  # it runs (batch/v1 Job: status.active)
    assert (
        ann.RUNNING_SINCE
        in custom.get_namespaced_custom_object(*RB, name)["metadata"]["annotations"]
    )

    clock.advance(60)
    batch.patch_namespaced_job("etl", NS, {"spec": {"parallelism": 4}})
    karmada.run_once(clock())  # the detector updates the binding; the webhook holds it again
    grown = dict(custom.get_namespaced_custom_object(*RB, name))
    assert grown["spec"]["replicas"] == 4
    assert ann.READMIT in grown["metadata"]["annotations"]  # stamped on the webhook's clock
    assert grown["spec"]["suspension"]["scheduling"] is True

    caught_up(rec, custom)
    rec.run_once()
    again = dict(custom.get_namespaced_custom_object(*RB, name))
    notes = again["metadata"]["annotations"]
    assert ann.READMIT not in notes
    assert ann.RUNNING_SINCE not in notes  # the grown job must start again
    assert notes[ann.ADMITTED_AT] == ann.format_time(clock()) != admitted_at
    assert sum(c.get("replicas", 0) for c in again["spec"]["clusters"]) == 4
    admitted = [
        e
        for e in core.list_namespaced_event(NS, field_selector=f"involvedObject.name={name}").items
        if e.reason == "Admitted"
    ]
    assert len(admitted) == 2
