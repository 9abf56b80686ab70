"""The Applier through the real ``kubernetes`` client against the HTTPS sandbox."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

import kubernetes
import pytest

from engine import annotations as ann
from engine.cycle.model import ClusterAssignment, Decision
from engine.cycle.reasons import Action, Reason
from engine.enforce.lifecycle import Reclaim, Started, Trigger
from engine.enforce.plan import PlanError
from reconciler.apply import Applier, ApplyError, Outcome
from sandbox.errors import StatusError, status
from sandbox.schema import load_schemas
from sandbox.server import Sandbox
from tests.reconciler.conftest import time_limit
from tests.sandbox.builders import RB_PLURAL, WORK, binding

NOW = dt.datetime(2026, 3, 10, 9, 10, tzinfo=dt.UTC)
STAMP = "2026-03-10T09:10:00Z"
NS = "default"
REF = f"{NS}/train-pytorchjob"
TEST_SECONDS = 30


@pytest.fixture(autouse=True)
def bounded() -> Iterator[None]:
    """Every test here ends within TEST_SECONDS, passing or not."""

    with time_limit(TEST_SECONDS):
        yield


@pytest.fixture
def custom(api_client: kubernetes.client.ApiClient) -> kubernetes.client.CustomObjectsApi:
    return kubernetes.client.CustomObjectsApi(api_client)


@pytest.fixture
def core(api_client: kubernetes.client.ApiClient) -> kubernetes.client.CoreV1Api:
    return kubernetes.client.CoreV1Api(api_client)


@pytest.fixture
def applier(api_client: kubernetes.client.ApiClient) -> Applier:
    return Applier(api_client, "bind", clock=lambda: NOW, request_timeout=10)


@pytest.fixture
def writes(sandbox: Sandbox) -> list[str]:
    """Every write request (method path) the sandbox serves to a binding."""
    seen: list[str] = []

    def record(method: str, path: str, query: dict[str, str]) -> None:
        if method in ("PATCH", "PUT", "POST") and f"/{RB_PLURAL}" in path:
            seen.append(f"{method} {path}")

    sandbox.request_hooks.insert(0, record)
    return seen


def create(custom: kubernetes.client.CustomObjectsApi, **spec: Any) -> dict[str, Any]:
    body = binding("train", NS, suspension={"scheduling": True, "dispatching": False}, **spec)
    return dict(custom.create_namespaced_custom_object(*WORK, NS, RB_PLURAL, body))


def read(custom: kubernetes.client.CustomObjectsApi) -> dict[str, Any]:
    return dict(custom.get_namespaced_custom_object(*WORK, NS, RB_PLURAL, "train-pytorchjob"))


def decision(action: Action, reason: Reason, message: str, **fields: Any) -> Decision:
    return Decision(REF, "PyTorchJob/default/train", "q", "t", 0, action, reason, message, **fields)


ADMIT = decision(
    Action.ADMIT, Reason.ADMITTED, "fits on gpu-a", clusters=(ClusterAssignment("gpu-a", 4),)
)


def events(core: kubernetes.client.CoreV1Api) -> list[tuple[str, str, str]]:
    """(type, reason, message) of the binding's Events, oldest first as ``kubectl describe``
    lists them (the API lists by name, and Event names end in a random suffix)."""
    found = core.list_namespaced_event(
        NS, field_selector="involvedObject.name=train-pytorchjob"
    ).items
    found.sort(key=lambda e: int(e.metadata.resource_version))
    return [(e.type, e.reason, e.message) for e in found]


def test_admit_in_bind_mode_binds_the_still_suspended_binding(
    custom: kubernetes.client.CustomObjectsApi,
    core: kubernetes.client.CoreV1Api,
    applier: Applier,
) -> None:
    created = create(custom)
    other = {
        "type": "FullyApplied",
        "status": "False",
        "reason": "NotApplied",
        "message": "no works yet",
        "lastTransitionTime": "2026-03-10T09:00:00Z",
    }
    start = dict(
        custom.patch_namespaced_custom_object_status(
            *WORK,
            NS,
            RB_PLURAL,
            "train-pytorchjob",
            {"status": {"conditions": [other]}},
        )
    )
    assert applier.apply(ADMIT, start, policy_version="v7") == Outcome.APPLIED
    bound = read(custom)
    assert bound["spec"]["clusters"] == [{"name": "gpu-a"}]
    assert bound["spec"]["suspension"] == {"scheduling": True, "dispatching": False}
    assert "placement" not in bound["spec"]
    notes = bound["metadata"]["annotations"]
    assert notes[ann.ADMITTED_AT] == STAMP
    assert notes[ann.ADMITTED_TO] == "gpu-a"
    assert notes[ann.POLICY_VERSION] == "v7"
    status = bound["status"]
    generation = bound["metadata"]["generation"]
    assert generation > created["metadata"]["generation"]
    assert status["schedulerObservedGeneration"] == generation
    assert status["lastScheduledTime"] == STAMP
    scheduled = next(c for c in status["conditions"] if c["type"] == "Scheduled")
    assert (scheduled["status"], scheduled["reason"]) == ("True", "FleetgateAdmitted")
    assert "gpu-a" in scheduled["message"]
    assert other in status["conditions"]
    load_schemas().validate(bound, "work.karmada.io")
    assert events(core) == [("Normal", "Admitted", "admitted to gpu-a: fits on gpu-a")]
    involved = core.list_namespaced_event(NS).items[0].involved_object
    assert (involved.kind, involved.uid) == ("ResourceBinding", created["metadata"]["uid"])
    assert involved.resource_version == bound["metadata"]["resourceVersion"]


def test_admit_in_release_mode_only_lifts_the_suspension(
    api_client: kubernetes.client.ApiClient, custom: kubernetes.client.CustomObjectsApi
) -> None:
    created = create(custom)
    releaser = Applier(api_client, "release", clock=lambda: NOW, request_timeout=10)
    assert releaser.apply(ADMIT, created) == Outcome.APPLIED
    released = read(custom)
    assert released["spec"]["suspension"] == {"scheduling": False, "dispatching": False}
    assert "clusters" not in released["spec"]
    assert released["metadata"]["annotations"][ann.ADMITTED_TO] == "gpu-a"
    assert "status" not in released or "conditions" not in released["status"]


def test_pending_twice_with_the_same_reason_writes_once(
    custom: kubernetes.client.CustomObjectsApi, applier: Applier, writes: list[str]
) -> None:
    create(custom)
    writes.clear()
    wait = decision(Action.PENDING, Reason.WAITING_FOR_QUOTA, "8 gpu more needed", position=2)
    assert applier.apply(wait, read(custom)) == Outcome.APPLIED
    after_first = read(custom)
    assert applier.apply(wait, after_first) == Outcome.UNCHANGED
    assert len(writes) == 1
    assert read(custom)["metadata"]["resourceVersion"] == after_first["metadata"]["resourceVersion"]
    notes = after_first["metadata"]["annotations"]
    assert notes[ann.PENDING].startswith("WaitingForQuota: queue q ")
    assert ann.QUEUE_POSITION not in notes  # the position is the API's, never written
    # the queue moved and the usage changed: still nothing to write
    moved = decision(Action.PENDING, Reason.WAITING_FOR_QUOTA, "2 gpu more needed", position=1)
    assert applier.apply(moved, after_first) == Outcome.UNCHANGED
    assert len(writes) == 1


def test_a_stale_resource_version_is_a_conflict_and_writes_nothing(
    custom: kubernetes.client.CustomObjectsApi,
    core: kubernetes.client.CoreV1Api,
    applier: Applier,
) -> None:
    stale = create(custom)
    custom.patch_namespaced_custom_object(
        *WORK, NS, RB_PLURAL, "train-pytorchjob", {"metadata": {"labels": {"someone": "else"}}}
    )
    before = read(custom)
    assert applier.apply(ADMIT, stale) == Outcome.CONFLICT
    after = read(custom)
    assert after == before
    assert events(core) == []


def test_a_deleted_binding_is_gone(
    custom: kubernetes.client.CustomObjectsApi, applier: Applier
) -> None:
    created = create(custom)
    custom.delete_namespaced_custom_object(*WORK, NS, RB_PLURAL, "train-pytorchjob")
    assert applier.apply(ADMIT, created) == Outcome.GONE


def test_preempt_removes_the_clusters_and_requeues_the_victim(
    custom: kubernetes.client.CustomObjectsApi,
    core: kubernetes.client.CoreV1Api,
    applier: Applier,
) -> None:
    create(custom)
    assert applier.apply(ADMIT, read(custom)) == Outcome.APPLIED
    later = dt.datetime(2026, 3, 10, 10, 0, tzinfo=dt.UTC)
    applier.clock = lambda: later
    evict = decision(
        Action.PREEMPT,
        Reason.PREEMPTED,
        "priority 0 is below default/big-pytorchjob's 10",
        clusters=(ClusterAssignment("gpu-a", 0),),
        preemptor="default/big-pytorchjob",
    )
    assert applier.apply(evict, read(custom)) == Outcome.APPLIED
    victim = read(custom)
    assert "clusters" not in victim["spec"]
    assert victim["spec"]["suspension"]["scheduling"] is True
    notes = victim["metadata"]["annotations"]
    assert notes[ann.QUEUED_AT] == "2026-03-10T10:00:00Z"
    assert ann.ADMITTED_AT not in notes and ann.ADMITTED_TO not in notes
    assert ann.ATTEMPTS not in notes
    assert notes[ann.PENDING] == "Preempted: priority 0 is below default/big-pytorchjob's 10"
    scheduled = next(c for c in victim["status"]["conditions"] if c["type"] == "Scheduled")
    assert (scheduled["status"], scheduled["reason"]) == ("False", "FleetgatePreempted")
    load_schemas().validate(victim, "work.karmada.io")
    assert [reason for _, reason, _ in events(core)] == ["Admitted", "Preempted"]


def test_reject_records_the_reason_and_one_event(
    custom: kubernetes.client.CustomObjectsApi,
    core: kubernetes.client.CoreV1Api,
    applier: Applier,
) -> None:
    create(custom)
    never = decision(Action.REJECT, Reason.GANG_TOO_LARGE, "needs 64 gpu, largest has 32")
    assert applier.apply(never, read(custom)) == Outcome.APPLIED
    assert applier.apply(never, read(custom)) == Outcome.UNCHANGED
    rejected = read(custom)
    assert "clusters" not in rejected["spec"]
    assert rejected["metadata"]["annotations"][ann.PENDING].startswith("GangTooLarge: ")
    assert events(core) == [("Warning", "Rejected", "GangTooLarge: needs 64 gpu, largest has 32")]


def test_an_event_failure_does_not_fail_the_apply(
    sandbox: Sandbox, custom: kubernetes.client.CustomObjectsApi, applier: Applier
) -> None:
    def refuse_events(method: str, path: str, query: dict[str, str]) -> None:
        if method == "POST" and path.endswith("/events"):
            raise StatusError(status(500, "InternalError", "events are down"))

    create(custom)
    sandbox.request_hooks.append(refuse_events)
    assert applier.apply(ADMIT, read(custom)) == Outcome.APPLIED
    assert read(custom)["spec"]["clusters"] == [{"name": "gpu-a"}]


def fail_once(sandbox: Sandbox, code: int, reason: str, path_end: str) -> list[str]:
    """Answer the first PATCH whose path ends with ``path_end`` with ``code``."""
    failed: list[str] = []

    def hook(method: str, path: str, query: dict[str, str]) -> None:
        if method == "PATCH" and path.endswith(path_end) and not failed:
            failed.append(path)
            raise StatusError(status(code, reason, "injected"))

    sandbox.request_hooks.append(hook)
    return failed


def test_a_conflict_on_the_status_write_rereads_and_keeps_our_admission(
    sandbox: Sandbox, custom: kubernetes.client.CustomObjectsApi, applier: Applier
) -> None:
    create(custom)
    failed = fail_once(sandbox, 409, "Conflict", "/train-pytorchjob/status")
    assert applier.apply(ADMIT, read(custom)) == Outcome.APPLIED
    assert failed
    bound = read(custom)
    assert bound["status"]["schedulerObservedGeneration"] == bound["metadata"]["generation"]


def test_other_errors_raise_naming_the_binding(
    sandbox: Sandbox, custom: kubernetes.client.CustomObjectsApi, applier: Applier
) -> None:
    create(custom)
    fail_once(sandbox, 500, "InternalError", "/train-pytorchjob")
    with pytest.raises(ApplyError, match=f"{REF}: patch failed: HTTP 500") as raised:
        applier.apply(ADMIT, read(custom))
    assert raised.value.binding == REF and raised.value.status == 500
    assert "clusters" not in read(custom)["spec"]


def reclaim_of(attempts: int, max_attempts: int = 3) -> Reclaim:
    later = NOW + dt.timedelta(minutes=20)
    gave_up = attempts >= max_attempts
    return Reclaim(
        binding=REF,
        trigger=Trigger.FAILED_ON_MEMBER,
        clusters=("gpu-a",),
        message="the job failed on gpu-a: OOMKilled",
        attempts=attempts,
        max_attempts=max_attempts,
        backoff=dt.timedelta(0 if gave_up else 60),
        backoff_until=None if gave_up else later + dt.timedelta(seconds=60),
        excluded=(("gpu-a", later + dt.timedelta(minutes=30)),),
        queued_at=later,
    )


def test_a_requeue_takes_the_job_off_its_clusters_with_backoff_and_an_event(
    custom: kubernetes.client.CustomObjectsApi,
    core: kubernetes.client.CoreV1Api,
    applier: Applier,
) -> None:
    create(custom)
    assert applier.apply(ADMIT, read(custom)) == Outcome.APPLIED
    assert applier.transition(Started(REF, NOW, ("gpu-a",)), read(custom)) == Outcome.APPLIED
    assert read(custom)["metadata"]["annotations"][ann.RUNNING_SINCE] == STAMP

    assert applier.transition(reclaim_of(1), read(custom), "v3") == Outcome.APPLIED
    requeued = read(custom)
    assert "clusters" not in requeued["spec"]
    assert requeued["spec"]["suspension"]["scheduling"] is True
    notes = requeued["metadata"]["annotations"]
    assert (notes[ann.ATTEMPTS], notes[ann.BACKOFF_UNTIL]) == ("1", "2026-03-10T09:31:00Z")
    assert notes[ann.EXCLUDED_CLUSTERS] == "gpu-a=2026-03-10T10:00:00Z"
    assert ann.ADMITTED_AT not in notes and ann.RUNNING_SINCE not in notes
    scheduled = next(c for c in requeued["status"]["conditions"] if c["type"] == "Scheduled")
    assert (scheduled["status"], scheduled["reason"]) == ("False", "FleetgateRequeued")
    load_schemas().validate(requeued, "work.karmada.io")
    assert [reason for _, reason, _ in events(core)] == ["Admitted", "Running", "Requeued"]
    # level-triggered: the same transition on the new version writes nothing
    assert applier.transition(reclaim_of(1), requeued) == Outcome.UNCHANGED


def test_a_transition_on_a_stale_version_is_a_conflict(
    custom: kubernetes.client.CustomObjectsApi, applier: Applier
) -> None:
    create(custom)
    assert applier.apply(ADMIT, read(custom)) == Outcome.APPLIED
    stale = read(custom)
    custom.patch_namespaced_custom_object(
        *WORK, NS, RB_PLURAL, "train-pytorchjob", {"metadata": {"labels": {"someone": "else"}}}
    )
    before = read(custom)
    assert applier.transition(reclaim_of(3), stale) == Outcome.CONFLICT
    assert read(custom) == before
    with pytest.raises(PlanError, match="other/binding"):
        applier.transition(Started("other/binding", NOW, ("gpu-a",)), before)
