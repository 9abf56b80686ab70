"""The write plan of each decision, exactly: no HTTP."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import annotations as ann
from engine.cycle.model import ClusterAssignment, Decision
from engine.cycle.reasons import Action, Reason
from engine.enforce.lifecycle import Reclaim, Trigger
from engine.enforce.plan import (
    BINDING_FIELDS,
    EventSpec,
    Mode,
    Plan,
    PlanError,
    StatusUpdate,
    plan,
    plan_transition,
    status_patch,
)
from reconciler.settled import writes_alike

NOW = dt.datetime(2026, 3, 10, 9, 10, tzinfo=dt.UTC)
STAMP = "2026-03-10T09:10:00Z"


def suspended(
    name: str = "train-pytorchjob",
    kind: str = "PyTorchJob",
    api_version: str = "kubeflow.org/v1",
    notes: dict[str, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    return {
        "apiVersion": "work.karmada.io/v1alpha2",
        "kind": "ResourceBinding",
        "metadata": {
            "name": name,
            "namespace": "team-a",
            "resourceVersion": "41",
            "generation": 2,
            "annotations": dict(notes or {}),
        },
        "spec": {
            "resource": {"apiVersion": api_version, "kind": kind, "name": "train"},
            "suspension": {"scheduling": True},
            **spec,
        },
    }


def decision(action: Action, reason: Reason, message: str = "m", **fields: Any) -> Decision:
    return Decision(
        binding="team-a/train-pytorchjob",
        workload="PyTorchJob/team-a/train",
        queue="q",
        tenant="t",
        priority=0,
        action=action,
        reason=reason,
        message=message,
        **fields,
    )


def admit(*clusters: tuple[str, int]) -> Decision:
    assignments = tuple(ClusterAssignment(n, r) for n, r in clusters)
    return decision(Action.ADMIT, Reason.ADMITTED, "fits", clusters=assignments)


def test_admit_bind_mode_writes_clusters_without_replicas_for_a_one_cluster_kind() -> None:
    notes = {ann.PENDING: "WaitingForQuota: x", ann.READMIT: STAMP, ann.QUEUE_POSITION: "3"}
    result = plan(admit(("gpu-a", 4)), suspended(notes=notes), "bind", NOW, "v7")
    assert result.patch == {
        "metadata": {
            "resourceVersion": "41",
            "annotations": {
                ann.ADMITTED_AT: STAMP,
                ann.ADMITTED_TO: "gpu-a",
                ann.PENDING: None,
                ann.QUEUE_POSITION: None,
                ann.READMIT: None,
                ann.POLICY_VERSION: "v7",
            },
        },
        "spec": {"clusters": [{"name": "gpu-a"}]},
    }
    assert "placement" not in result.patch["spec"]
    assert result.status == StatusUpdate(
        "True", "FleetgateAdmitted", "fleetgate admitted the binding to gpu-a: fits", True
    )
    assert result.event == EventSpec("Normal", "Admitted", "admitted to gpu-a: fits")


def test_admit_bind_mode_divides_replicas_for_a_resizable_kind() -> None:
    binding = suspended("web-deployment", "Deployment", "apps/v1")
    result = plan(admit(("a", 3), ("b", 2)), binding, Mode.BIND, NOW)
    assert result.patch is not None
    assert result.patch["spec"] == {
        "clusters": [{"name": "a", "replicas": 3}, {"name": "b", "replicas": 2}]
    }
    assert result.patch["metadata"]["annotations"][ann.ADMITTED_TO] == "a,b"
    one = plan(admit(("a", 5)), binding, Mode.BIND, NOW)
    assert one.patch is not None and one.patch["spec"]["clusters"] == [{"name": "a", "replicas": 5}]


def test_a_scaled_up_binding_waiting_for_readmission_is_bound_again_in_place() -> None:
    binding = suspended("web-deployment", "Deployment", "apps/v1", clusters=[{"name": "a"}])
    binding["metadata"]["annotations"] = {
        ann.READMIT: STAMP,
        ann.ADMITTED_TO: "a",
        ann.RUNNING_SINCE: STAMP,
    }
    result = plan(admit(("a", 2), ("b", 2)), binding, Mode.BIND, NOW)
    assert result.patch is not None
    assert result.patch["spec"]["clusters"] == [
        {"name": "a", "replicas": 2},
        {"name": "b", "replicas": 2},
    ]
    assert result.patch["metadata"]["annotations"][ann.READMIT] is None
    # the re-admission has a startup timeout of its own: the grown job must start again
    assert result.patch["metadata"]["annotations"][ann.RUNNING_SINCE] is None


def test_admit_release_mode_only_lifts_the_suspension() -> None:
    result = plan(admit(("gpu-a", 4)), suspended(), "release", NOW, "v7")
    assert result.patch == {
        "metadata": {
            "resourceVersion": "41",
            "annotations": {
                ann.ADMITTED_AT: STAMP,
                ann.ADMITTED_TO: "gpu-a",
                ann.POLICY_VERSION: "v7",
            },
        },
        "spec": {"suspension": {"scheduling": False}},
    }
    assert result.status is None
    assert result.event is not None and result.event.reason == "Admitted"


def test_admit_of_a_released_binding_in_release_mode_writes_nothing() -> None:
    binding = suspended()
    binding["spec"]["suspension"]["scheduling"] = False
    assert plan(admit(("gpu-a", 4)), binding, "release", NOW) == Plan()


@pytest.mark.parametrize(
    ("change", "words"),
    [({"clusters": [{"name": "x"}]}, "already placed"), ({"suspension": {}}, "not suspended")],
)
def test_admit_bind_mode_refuses_a_placed_or_unsuspended_binding(
    change: dict[str, Any], words: str
) -> None:
    with pytest.raises(PlanError, match=words):
        plan(admit(("gpu-a", 4)), suspended(**change), "bind", NOW)


QUOTA_NOTE = (
    "WaitingForQuota: queue q (or a queue above it) has too little unused quota for the job now"
)


def test_pending_writes_the_reason_without_live_numbers_then_nothing_while_it_holds() -> None:
    wait = decision(Action.PENDING, Reason.WAITING_FOR_QUOTA, "8 gpu more needed", position=2)
    first = plan(wait, suspended(), "bind", NOW, "v7")
    assert first == Plan(
        patch={
            "metadata": {
                "resourceVersion": "41",
                "annotations": {ann.PENDING: QUOTA_NOTE, ann.POLICY_VERSION: "v7"},
            }
        },
        # the first Pending decision written for the binding: it entered its queue; the Event
        # (written once) keeps the live message and the place
        event=EventSpec(
            "Normal", "Queued", "queued in q at position 2: WaitingForQuota: 8 gpu more needed"
        ),
    )
    notes = {ann.PENDING: QUOTA_NOTE}
    assert plan(wait, suspended(notes=notes), "bind", NOW, "v8") == Plan()
    # its queue moved and the fleet's usage changed: the binding is not rewritten
    moved = decision(Action.PENDING, Reason.WAITING_FOR_QUOTA, "2 gpu more needed", position=1)
    assert plan(moved, suspended(notes=notes), "bind", NOW) == Plan()
    # a new reason is written, with a Pending Event (the first Pending decision said Queued)
    fits = plan(
        decision(Action.PENDING, Reason.NO_CLUSTER_FITS, "none of 3 candidate clusters…"),
        suspended(notes=notes),
        "bind",
        NOW,
    )
    assert fits.patch is not None
    assert fits.patch["metadata"]["annotations"] == {
        ann.PENDING: "NoClusterFits: no candidate cluster has room for the job now"
    }
    assert fits.event == EventSpec(
        "Normal", "Pending", "NoClusterFits: none of 3 candidate clusters…"
    )
    # the same reason with another message is written (the note changed), without an Event
    now_fits = {
        **notes,
        ann.PENDING: "NoClusterFits: no candidate cluster has room for the job now",
    }
    other = decision(Action.PENDING, Reason.NO_CLUSTER_FITS, "why", note="another note")
    changed = plan(other, suspended(notes=now_fits), "bind", NOW)
    assert changed.patch is not None and changed.event is None


def test_pending_removes_a_queue_position_an_older_fleetgate_wrote() -> None:
    wait = decision(Action.PENDING, Reason.WAITING_FOR_QUOTA, "8 gpu more needed", position=2)
    result = plan(
        wait, suspended(notes={ann.PENDING: QUOTA_NOTE, ann.QUEUE_POSITION: "5"}), "bind", NOW
    )
    assert result.patch is not None
    assert result.patch["metadata"]["annotations"] == {ann.QUEUE_POSITION: None}


def test_preempting_names_its_nominated_cluster() -> None:
    wait = decision(
        Action.PENDING,
        Reason.PREEMPTING,
        "room on gpu-b",
        clusters=(ClusterAssignment("gpu-b", 4),),
        position=1,
    )
    result = plan(wait, suspended(), "bind", NOW)
    assert result.patch is not None
    assert result.patch["metadata"]["annotations"][ann.NOMINATED_CLUSTER] == "gpu-b"


def test_reject_writes_the_reason_and_an_event_once() -> None:
    never = decision(Action.REJECT, Reason.GANG_TOO_LARGE, "needs 64 gpu, largest has 32")
    result = plan(never, suspended(notes={ann.QUEUE_POSITION: "4"}), "bind", NOW)
    assert result.patch == {
        "metadata": {
            "resourceVersion": "41",
            "annotations": {
                ann.PENDING: "GangTooLarge: needs 64 gpu, largest has 32",
                ann.QUEUE_POSITION: None,
            },
        }
    }
    assert result.event == EventSpec(
        "Warning", "Rejected", "GangTooLarge: needs 64 gpu, largest has 32"
    )
    again = suspended(notes={ann.PENDING: "GangTooLarge: needs 64 gpu, largest has 32"})
    assert plan(never, again, "bind", NOW) == Plan()


@pytest.mark.parametrize("mode", ["bind", "release"])
def test_preempt_removes_clusters_resuspends_and_requeues_without_counting(mode: str) -> None:
    """Not counted as a failed attempt; counted as a preemption (``maxPerJob`` reads it)."""
    notes = {ann.ADMITTED_AT: "2026-03-10T08:00:00Z", ann.ADMITTED_TO: "gpu-a", ann.ATTEMPTS: "1"}
    victim = suspended(notes=notes, clusters=[{"name": "gpu-a"}])
    evict = decision(
        Action.PREEMPT,
        Reason.PREEMPTED,
        "priority 1 is below team-b/big's 10",
        clusters=(ClusterAssignment("gpu-a", 0),),
        preemptor="team-b/big-pytorchjob",
    )
    result = plan(evict, victim, mode, NOW)
    assert result.patch == {
        "metadata": {
            "resourceVersion": "41",
            "annotations": {
                ann.QUEUED_AT: STAMP,
                ann.ADMITTED_AT: None,
                ann.ADMITTED_TO: None,
                ann.PENDING: "Preempted: priority 1 is below team-b/big's 10",
                ann.PREEMPTIONS: "1",
            },
        },
        "spec": {"clusters": None, "suspension": {"scheduling": True}},
    }
    message = "preempted for team-b/big-pytorchjob: priority 1 is below team-b/big's 10"
    assert result.event == EventSpec("Warning", "Preempted", message)
    if mode == "bind":
        assert result.status == StatusUpdate("False", "FleetgatePreempted", message, False)
    else:
        assert result.status is None


def test_status_patch_keeps_other_conditions_and_replaces_scheduled_in_place() -> None:
    binding = suspended()
    binding["metadata"].update(resourceVersion="42", generation=3)
    other = {"type": "FullyApplied", "status": "False", "reason": "X", "message": ""}
    old = {"type": "Scheduled", "status": "False", "reason": "Y", "message": "", "x": 1}
    binding["status"] = {"conditions": [old, other], "aggregatedStatus": []}
    update = StatusUpdate("True", "FleetgateAdmitted", "admitted", True)
    assert status_patch(binding, update, NOW) == {
        "metadata": {"resourceVersion": "42"},
        "status": {
            "conditions": [
                {
                    "type": "Scheduled",
                    "status": "True",
                    "reason": "FleetgateAdmitted",
                    "message": "admitted",
                    "lastTransitionTime": STAMP,
                    "observedGeneration": 3,
                },
                other,
            ],
            "schedulerObservedGeneration": 3,
            "lastScheduledTime": STAMP,
        },
    }


def test_status_patch_keeps_the_transition_time_when_the_status_holds() -> None:
    binding = suspended()
    held = {"type": "Scheduled", "status": "True", "reason": "R", "message": ""}
    binding["status"] = {"conditions": [held | {"lastTransitionTime": "2026-01-01T00:00:00Z"}]}
    patch = status_patch(binding, StatusUpdate("True", "FleetgateAdmitted", "m", False), NOW)
    (condition,) = patch["status"]["conditions"]
    assert condition["lastTransitionTime"] == "2026-01-01T00:00:00Z"
    assert "schedulerObservedGeneration" not in patch["status"]


def test_the_admitted_event_says_where_once() -> None:
    said = {
        "admitted to gpu-a at cost 3.5": "admitted to gpu-a at cost 3.5",
        "split across gpu-a=3, gpu-b=2": "split across gpu-a=3, gpu-b=2",
        "fits": "admitted to gpu-a: fits",
        "": "admitted to gpu-a",
    }
    for message, event in said.items():
        gpu_a = (ClusterAssignment("gpu-a", 4),)
        admitted = decision(Action.ADMIT, Reason.ADMITTED, message, clusters=gpu_a)
        result = plan(admitted, suspended(), "bind", NOW, "v7")
        assert result.event == EventSpec("Normal", "Admitted", event), message


def test_a_requeued_or_given_up_group_member_says_its_group() -> None:
    def reclaim(attempts: int) -> Reclaim:
        last = attempts >= 3
        return Reclaim(
            binding="team-a/train-pytorchjob",
            trigger=Trigger.FAILED_ON_MEMBER,
            clusters=("gpu-a",),
            message="the job failed on gpu-a: OOMKilled",
            attempts=attempts,
            max_attempts=3,
            backoff=dt.timedelta(0 if last else 60),
            backoff_until=None if last else NOW + dt.timedelta(seconds=60),
            excluded=(),
            queued_at=NOW,
        )

    member = suspended(notes={ann.ADMITTED_GROUP: "group/team-a/pair"}, clusters=[{"name": "a"}])
    alone = suspended(clusters=[{"name": "a"}])
    for attempts, reason in ((1, "Requeued"), (3, "GaveUp")):
        told = plan_transition(reclaim(attempts), member, Mode.BIND, NOW).event
        assert told is not None and told.reason == reason
        assert told.message.endswith("(a member of group group/team-a/pair, admitted with it)")
        plain = plan_transition(reclaim(attempts), alone, Mode.BIND, NOW).event
        assert plain is not None and "group" not in plain.message


def test_each_preemption_adds_one_to_the_jobs_count() -> None:
    notes = {ann.ADMITTED_AT: "2026-03-10T08:00:00Z", ann.ADMITTED_TO: "gpu-a"}
    evict = decision(Action.PREEMPT, Reason.PREEMPTED, "reclaimed")
    for before, after in (("2", "3"), ("", "1"), ("garbage", "1")):
        victim = suspended(notes={**notes, ann.PREEMPTIONS: before}, clusters=[{"name": "gpu-a"}])
        annotations = plan(evict, victim, "bind", NOW).patch["metadata"]["annotations"]
        assert annotations[ann.PREEMPTIONS] == after


def _leaves(value: Any, path: str = "") -> set[str]:
    """The dotted paths of a patch's values (``[]`` for any list item)."""
    if isinstance(value, dict) and value:
        return {leaf for k, v in value.items() for leaf in _leaves(v, f"{path}.{k}".lstrip("."))}
    if isinstance(value, list) and value:
        return {leaf for item in value for leaf in _leaves(item, f"{path}[]")}
    return {path}


def test_the_plans_write_only_the_binding_fields_preflight_checks() -> None:
    written: set[str] = set()
    deployment = suspended(kind="Deployment", api_version="apps/v1", replicas=4)
    placed = suspended(clusters=[{"name": "gpu-a"}])
    for result in (
        plan(admit(("gpu-a", 4)), suspended(), "bind", NOW, "v7"),
        plan(admit(("gpu-a", 3), ("gpu-b", 1)), deployment, "bind", NOW, "v7"),
        plan(admit(("gpu-a", 4)), suspended(), "release", NOW, "v7"),
        plan(decision(Action.PREEMPT, Reason.PREEMPTED), placed, "bind", NOW, "v7"),
    ):
        written |= _leaves(result.patch)
        if result.status is not None:
            written |= _leaves(status_patch(placed, result.status, NOW))
    assert "spec.clusters[].replicas" in written and "status.lastScheduledTime" in written
    for path in (p for p in written if not p.startswith("metadata.")):
        # a field itself, or one emptied whole (spec.clusters: null) that holds fields
        assert any(f == path or f.startswith((f"{path}.", f"{path}[]")) for f in BINDING_FIELDS)


WAITING = st.builds(
    lambda action, reason, message, position, note, where: decision(
        action,
        reason,
        message,
        position=position,
        note=note,
        clusters=(ClusterAssignment(where, 1),) if where else (),
        victims=("team-b/old",) if reason == Reason.PREEMPTING else (),
    ),
    st.sampled_from([Action.PENDING, Action.REJECT]),
    st.sampled_from(
        [Reason.WAITING_FOR_QUOTA, Reason.NO_CLUSTER_FITS, Reason.PREEMPTING, Reason.NEVER_FITS]
    ),
    st.sampled_from(["m", "2 gpu more needed", "8 gpu more needed"]),
    st.sampled_from([None, 1, 7]),
    st.sampled_from(["", "a note"]),
    st.sampled_from(["", "gpu-east", "gpu-west"]),
)


@settings(max_examples=300, deadline=None, database=None)
@given(first=WAITING, second=WAITING)
def test_decisions_that_write_alike_find_each_others_binding_written(
    first: Decision, second: Decision
) -> None:
    """``reconciler.settled.writes_alike`` (what lets a pass skip planning a waiting job whose
    decision changed only in its live message or position) never says so of a decision whose
    plan would write something on a binding the other's plan left as it wants it."""
    binding = suspended()
    patch = plan(first, binding, "bind", NOW).patch
    notes = ((patch or {}).get("metadata") or {}).get("annotations") or {}
    written = suspended(notes={k: v for k, v in notes.items() if v is not None})
    assert plan(first, written, "bind", NOW) == Plan()
    if writes_alike(first, second):
        assert plan(second, written, "bind", NOW) == Plan()


@settings(max_examples=100, deadline=None, database=None)
@given(first=WAITING, position=st.sampled_from([None, 1, 2, 9000]))
def test_a_waiting_job_that_only_moved_in_its_queue_writes_alike(
    first: Decision, position: int | None
) -> None:
    """A job arriving ahead of thousands of waiting ones changes each one's position alone:
    ``writes_alike`` says so (a pass then plans none of them), and the plan agrees."""
    moved = first.with_position(position)
    assert writes_alike(first, moved)
    patch = plan(first, suspended(), "bind", NOW).patch
    notes = ((patch or {}).get("metadata") or {}).get("annotations") or {}
    written = suspended(notes={k: v for k, v in notes.items() if v is not None})
    assert plan(moved, written, "bind", NOW) == Plan()


def test_an_admission_is_never_taken_for_a_decision_already_written() -> None:
    one = admit(("gpu-a", 4))
    assert not writes_alike(one, one.with_position(3))
    assert not writes_alike(one, one)
