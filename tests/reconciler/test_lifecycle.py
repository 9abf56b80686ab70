"""The lifecycle review (engine.enforce.lifecycle) and its write plans, exactly: no HTTP.

Bindings, clusters and templates are plain objects, read by the snapshot builder as the
reconciler reads its caches; the requeue settings are a SchedulingPolicy's (startupTimeout 10m,
backoffBase 30s, backoffMax 4m, maxAttempts 3, clusterNotReadyGrace 5m).
"""

from __future__ import annotations

import copy
import datetime as dt
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from engine import annotations as ann
from engine.cycle import CycleResult, Decision, run_cycle
from engine.cycle.reasons import Action, Reason
from engine.enforce import plan_pass
from engine.enforce.lifecycle import Confirm, Reclaim, Review, Started, Trigger, review
from engine.enforce.memberstatus import status_says_running
from engine.enforce.plan import Plan, plan, plan_transition
from engine.fleet.snapshot import build_snapshot
from engine.policy.policyset import PolicySet, load_policy_set

NOW = dt.datetime(2026, 3, 10, 12, 0, tzinfo=dt.UTC)
ADMITTED = NOW - dt.timedelta(minutes=3)
REF = "team/train-pytorchjob"
RUNNING = {"conditions": [{"type": "Running", "status": "True"}]}
CREATED = {"conditions": [{"type": "Created", "status": "True"}]}
FAILED = {
    "conditions": [
        {"type": "Running", "status": "False"},
        {"type": "Failed", "status": "True", "message": "NCCL timeout on rank 3"},
    ]
}
SUCCEEDED = {"conditions": [{"type": "Succeeded", "status": "True"}]}


def stamp(moment: dt.datetime) -> str:
    return ann.format_time(moment)


@pytest.fixture(scope="module")
def policies(tmp_path_factory: pytest.TempPathFactory) -> PolicySet:
    folder = tmp_path_factory.mktemp("policies")
    documents = [
        {"kind": "Queue", "metadata": {"name": "q"}, "spec": {"weight": 1}},
        {
            "kind": "SchedulingPolicy",
            "metadata": {"name": "default"},
            "spec": {
                "queue": '"q"',
                "requeue": {
                    "startupTimeout": "10m",
                    "backoffBase": "30s",
                    "backoffMax": "4m",
                    "maxAttempts": 3,
                    "clusterNotReadyGrace": "5m",
                },
            },
        },
    ]
    for i, doc in enumerate(documents):
        text = yaml.safe_dump({"apiVersion": "fleetgate.io/v1alpha1", **doc})
        (Path(folder) / f"{i:02}.yaml").write_text(text)
    return load_policy_set([folder])


def cluster(name: str, ready: bool = True, since: dt.datetime = NOW - dt.timedelta(days=1)):
    return {
        "apiVersion": "cluster.karmada.io/v1alpha1",
        "kind": "Cluster",
        "metadata": {"name": name},
        "spec": {},
        "status": {
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True" if ready else "False",
                    "lastTransitionTime": stamp(since),
                }
            ],
            "resourceSummary": {
                "allocatable": {
                    "cpu": "256",
                    "memory": "2Ti",
                    "nvidia.com/gpu": "32",
                    "pods": "440",
                }
            },
        },
    }


def template() -> dict[str, Any]:
    pod = {
        "replicas": 1,
        "template": {
            "spec": {
                "containers": [
                    {"name": "c", "resources": {"requests": {"cpu": "4", "nvidia.com/gpu": "8"}}}
                ]
            }
        },
    }
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "train", "namespace": "team", "uid": "u-train"},
        "spec": {"pytorchReplicaSpecs": {"Master": pod, "Worker": copy.deepcopy(pod)}},
    }


def placed(
    *members: tuple[str, Mapping[str, Any] | None, str],
    notes: Mapping[str, str] | None = None,
    managed: bool = True,
) -> dict[str, Any]:
    """A binding placed on each ``(cluster, member job status, health)``; admitted at
    ADMITTED unless ``notes`` say otherwise."""
    annotations = {ann.ADMITTED_AT: stamp(ADMITTED), ann.QUEUED_AT: stamp(ADMITTED)}
    annotations.update(notes or {})
    aggregated = [
        {"clusterName": name, "applied": True, "health": health}
        | ({"status": dict(status)} if status is not None else {})
        for name, status, health in members
    ]
    return {
        "apiVersion": "work.karmada.io/v1alpha2",
        "kind": "ResourceBinding",
        "metadata": {
            "name": "train-pytorchjob",
            "namespace": "team",
            "uid": "u-rb",
            "resourceVersion": "7",
            "generation": 1,
            "labels": {ann.MANAGED: "true"} if managed else {},
            "annotations": {k: v for k, v in annotations.items() if v},
        },
        "spec": {
            "resource": {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "train"},
            "suspension": {"scheduling": True},
            "clusters": [{"name": name} for name, _, _ in members],
        },
        # the Applier wrote Scheduled=True with the admission (see Confirm for when it did not)
        "status": {
            "aggregatedStatus": aggregated,
            "conditions": [{"type": "Scheduled", "status": "True", "reason": "FleetgateAdmitted"}],
        },
    }


def decide(
    policies: PolicySet,
    binding: dict[str, Any],
    now: dt.datetime = NOW,
    clusters: tuple[dict[str, Any], ...] = (),
):
    world = clusters or (cluster("east"), cluster("west"))
    snapshot = build_snapshot([("t", o) for o in (*world, binding, template())])
    assert not snapshot.errors, snapshot.errors
    return review(snapshot, policies, now, lambda ref: binding if ref == REF else None)


def only_reclaim(policies: PolicySet, binding: dict[str, Any], **kw: Any) -> Reclaim:
    result = decide(policies, binding, **kw)
    assert result.started == ()
    (found,) = result.reclaims
    return found


def merged(binding: dict[str, Any], written: Plan) -> dict[str, Any]:
    """``binding`` after the plan's merge patch (a JSON merge patch: None deletes)."""

    def merge(target: dict[str, Any], patch: Mapping[str, Any]) -> None:
        for key, value in patch.items():
            if value is None:
                target.pop(key, None)
            elif isinstance(value, Mapping):
                merge(target.setdefault(key, {}), value)
            else:
                target[key] = value

    result = copy.deepcopy(binding)
    assert written.patch is not None
    merge(result, written.patch)
    result["metadata"]["resourceVersion"] = "8"
    result.pop("status", None)  # Karmada drops the status of clusters no longer bound
    return result


# -- running ----------------------------------------------------------------------------------


def test_a_job_running_everywhere_is_recorded_once_and_never_reclaimed(policies):
    binding = placed(("east", RUNNING, "Healthy"))
    result = decide(policies, binding, now=ADMITTED + dt.timedelta(hours=1))
    assert result.reclaims == ()
    (started,) = result.started
    assert started == Started(REF, ADMITTED + dt.timedelta(hours=1), ("east",))
    written = plan_transition(started, binding, "bind", NOW)
    assert written.patch == {
        "metadata": {
            "resourceVersion": "7",
            "annotations": {ann.RUNNING_SINCE: stamp(ADMITTED + dt.timedelta(hours=1))},
        }
    }
    assert written.event is not None and written.event.reason == "Running"
    recorded = placed(("east", RUNNING, "Healthy"), notes={ann.RUNNING_SINCE: stamp(NOW)})
    # nothing to write; the one moment ahead: the cycle stops reserving its room itself
    assert decide(policies, recorded) == Review(due=NOW + dt.timedelta(seconds=20))


@pytest.mark.parametrize(
    ("health", "status"),
    [("Unknown", None), ("Healthy", CREATED), ("Healthy", None), ("Unknown", CREATED)],
    ids=["nothing-known", "status-not-running", "no-status-yet", "health-unknown-not-running"],
)
def test_running_needs_applied_not_unhealthy_and_the_kinds_own_word(policies, health, status):
    result = decide(policies, placed(("east", status, health)))
    # not running yet, within the startup timeout: looked at again when it runs out
    assert result == Review(due=ADMITTED + dt.timedelta(minutes=10))


def test_status_says_running_per_kind():
    assert status_says_running("kubeflow.org/v2beta1", "MPIJob", RUNNING) is True
    assert status_says_running("kubeflow.org/v1", "PyTorchJob", CREATED) is False
    assert status_says_running("batch.volcano.sh/v1alpha1", "Job", {"state": {"phase": "Running"}})
    assert not status_says_running(
        "batch.volcano.sh/v1alpha1", "Job", {"state": {"phase": "Pending"}}
    )
    assert status_says_running("batch/v1", "Job", {"active": 2}) is True
    assert status_says_running("batch/v1", "Job", {}) is False
    assert status_says_running("ray.io/v1", "RayJob", {"jobDeploymentStatus": "Running"})
    assert status_says_running(
        "sparkoperator.k8s.io/v1beta2",
        "SparkApplication",
        {"applicationState": {"state": "RUNNING"}},
    )
    assert status_says_running("apps/v1", "Deployment", {"readyReplicas": 1}) is True
    assert status_says_running("jobset.x-k8s.io/v1alpha2", "JobSet", {}) is None


# -- triggers ---------------------------------------------------------------------------------


def test_failed_on_member_requeues_with_backoff_exclusion_and_a_new_queue_time(policies):
    binding = placed(("east", FAILED, "Unhealthy"))
    found = only_reclaim(policies, binding)
    assert (found.trigger, found.clusters, found.attempts) == (
        Trigger.FAILED_ON_MEMBER,
        ("east",),
        1,
    )
    assert "NCCL timeout on rank 3" in found.message
    assert found.backoff_until == NOW + dt.timedelta(seconds=30)
    assert found.excluded == (("east", NOW + dt.timedelta(minutes=4)),)
    written = plan_transition(found, binding, "bind", NOW, "v9")
    assert written.patch == {
        "metadata": {
            "resourceVersion": "7",
            "annotations": {
                ann.ATTEMPTS: "1",
                ann.EXCLUDED_CLUSTERS: f"east={stamp(NOW + dt.timedelta(minutes=4))}",
                ann.QUEUED_AT: stamp(NOW),
                ann.ADMITTED_AT: None,
                ann.BACKOFF_UNTIL: stamp(NOW + dt.timedelta(seconds=30)),
                ann.PENDING: f"Backoff: requeued after attempt 1; not considered before "
                f"{stamp(NOW + dt.timedelta(seconds=30))}",
                ann.POLICY_VERSION: "v9",
            },
        },
        "spec": {"clusters": None, "suspension": {"scheduling": True}},
    }
    assert written.status is not None and written.status.reason == "FleetgateRequeued"
    assert written.event is not None
    assert (written.event.type, written.event.reason) == ("Warning", "Requeued")
    assert "FailedOnMember" in written.event.message and "attempt 1 of 3" in written.event.message
    assert plan_transition(found, merged(binding, written), "bind", NOW) == Plan()  # idempotent


def test_a_failure_on_one_cluster_of_a_split_job_reclaims_the_whole_job(policies):
    found = only_reclaim(
        policies, placed(("east", RUNNING, "Healthy"), ("west", FAILED, "Unhealthy"))
    )
    assert (found.trigger, found.clusters) == (Trigger.FAILED_ON_MEMBER, ("west",))


def test_unhealthy_on_a_member_after_it_ran_is_reclaimed(policies):
    ran = {ann.RUNNING_SINCE: stamp(ADMITTED)}
    found = only_reclaim(policies, placed(("east", RUNNING, "Unhealthy"), notes=ran))
    assert (found.trigger, found.clusters) == (Trigger.UNHEALTHY, ("east",))
    # before it ran, Unhealthy may be a job without a status yet: the startup timeout decides
    fresh = placed(("east", CREATED, "Unhealthy"))
    assert decide(policies, fresh).reclaims == ()
    timeout = ADMITTED + dt.timedelta(minutes=10)
    assert only_reclaim(policies, fresh, now=timeout).trigger == Trigger.STARTUP_TIMEOUT


def test_a_cluster_not_ready_past_the_grace_reclaims_its_jobs(policies):
    binding = placed(("east", RUNNING, "Healthy"), notes={ann.RUNNING_SINCE: stamp(ADMITTED)})
    down_at = NOW - dt.timedelta(minutes=5)
    found = only_reclaim(
        policies, binding, clusters=(cluster("east", False, down_at), cluster("west"))
    )
    assert (found.trigger, found.clusters) == (Trigger.CLUSTER_NOT_READY, ("east",))
    assert stamp(down_at) in found.message
    within = decide(
        policies, binding, clusters=(cluster("east", False, down_at + dt.timedelta(seconds=1)),)
    )
    assert within.reclaims == ()


def test_not_running_at_the_startup_timeout_is_reclaimed_and_not_before(policies):
    binding = placed(("east", CREATED, "Unknown"))
    timeout = ADMITTED + dt.timedelta(minutes=10)
    assert decide(policies, binding, now=timeout - dt.timedelta(seconds=1)).reclaims == ()
    found = only_reclaim(policies, binding, now=timeout)
    assert (found.trigger, found.clusters) == (Trigger.STARTUP_TIMEOUT, ("east",))
    assert "startupTimeout 10m" in found.message
    # once it ran, the startup timeout no longer applies to this admission
    ran = placed(("east", CREATED, "Unknown"), notes={ann.RUNNING_SINCE: stamp(ADMITTED)})
    assert decide(policies, ran, now=timeout + dt.timedelta(hours=1)).reclaims == ()


def test_an_adopted_job_is_timed_from_its_scheduled_condition(policies):
    """Placed by Karmada before fleetgate: no admitted-at, its Scheduled time counts."""
    binding = placed(("east", CREATED, "Unknown"), notes={ann.ADMITTED_AT: ""})
    scheduled = NOW - dt.timedelta(minutes=11)
    binding["status"]["conditions"] = [
        {"type": "Scheduled", "status": "True", "lastTransitionTime": stamp(scheduled)}
    ]
    assert only_reclaim(policies, binding).trigger == Trigger.STARTUP_TIMEOUT
    binding["status"]["conditions"][0]["lastTransitionTime"] = stamp(NOW)
    assert decide(policies, binding).reclaims == ()


def test_finished_unmanaged_readmitted_and_pending_jobs_are_left_alone(policies):
    succeeded = placed(("east", SUCCEEDED, "Healthy"))
    assert decide(policies, succeeded, now=NOW + dt.timedelta(hours=5)) == Review()
    assert decide(policies, placed(("east", FAILED, "Unhealthy"), managed=False)).reclaims == ()
    readmit = placed(("east", FAILED, "Unhealthy"), notes={ann.READMIT: stamp(NOW)})
    assert decide(policies, readmit).reclaims == ()
    pending = placed(("east", FAILED, "Unhealthy"))
    pending["spec"]["clusters"] = []
    assert decide(policies, pending).reclaims == ()


# -- backoff, exclusions, give-up -------------------------------------------------------------


@pytest.mark.parametrize(("before", "seconds"), [("0", 30), ("1", 60), ("", 30), ("junk", 30)])
def test_backoff_doubles_per_attempt(policies, before, seconds):
    found = only_reclaim(
        policies, placed(("east", FAILED, "Unhealthy"), notes={ann.ATTEMPTS: before})
    )
    assert found.backoff == dt.timedelta(seconds=seconds)
    assert found.backoff_until == NOW + found.backoff


def test_backoff_is_capped_at_backoff_max(tmp_path):
    folder = tmp_path / "p"
    folder.mkdir()
    doc = {
        "apiVersion": "fleetgate.io/v1alpha1",
        "kind": "SchedulingPolicy",
        "metadata": {"name": "default"},
        "spec": {"requeue": {"backoffBase": "1m", "backoffMax": "5m", "maxAttempts": 10}},
    }
    (folder / "s.yaml").write_text(yaml.safe_dump(doc))
    many = load_policy_set([folder])
    delays = [
        only_reclaim(
            many, placed(("east", FAILED, "Unhealthy"), notes={ann.ATTEMPTS: str(n)})
        ).backoff
        for n in range(5)
    ]
    assert delays == [dt.timedelta(minutes=m) for m in (1, 2, 4, 5, 5)]


def test_exclusions_merge_keep_the_later_time_and_drop_expired_ones(policies):
    notes = {
        ann.ATTEMPTS: "1",
        ann.EXCLUDED_CLUSTERS: f"gone={stamp(NOW - dt.timedelta(seconds=1))},"
        f"west={stamp(NOW + dt.timedelta(minutes=2))},"
        f"east={stamp(NOW + dt.timedelta(hours=1))}",
    }
    found = only_reclaim(policies, placed(("east", FAILED, "Unhealthy"), notes=notes))
    assert found.excluded == (
        ("east", NOW + dt.timedelta(hours=1)),
        ("west", NOW + dt.timedelta(minutes=2)),
    )


def test_the_last_attempt_gives_up_and_the_cycle_rejects_it_until_the_note_is_removed(policies):
    binding = placed(("east", FAILED, "Unhealthy"), notes={ann.ATTEMPTS: "2"})
    found = only_reclaim(policies, binding)
    assert found.gave_up and found.attempts == 3 and found.backoff_until is None
    written = plan_transition(found, binding, "bind", NOW, "v9")
    notes = written.patch["metadata"]["annotations"]
    assert notes[ann.GAVE_UP].startswith("gave up after 3 failed attempts (requeue.maxAttempts 3)")
    assert notes[ann.PENDING] == f"GaveUp: {notes[ann.GAVE_UP]}"
    assert ann.BACKOFF_UNTIL not in notes  # it had none: nothing to delete
    assert written.patch["spec"] == {"clusters": None, "suspension": {"scheduling": True}}
    assert written.event is not None
    assert (written.event.type, written.event.reason) == ("Warning", "GaveUp")
    assert written.status is not None and written.status.reason == "FleetgateGaveUp"

    after = merged(binding, written)
    snapshot = build_snapshot(
        [("t", o) for o in (cluster("east"), cluster("west"), after, template())]
    )
    result = run_cycle(snapshot, policies, NOW + dt.timedelta(days=1))
    decision = result.decision(REF)
    assert decision is not None
    assert (decision.action, decision.reason) == (Action.REJECT, Reason.GAVE_UP)
    assert decision.message == notes[ann.GAVE_UP]
    assert plan(decision, after, "bind", NOW, "v9") == Plan()  # its reason is already written

    del after["metadata"]["annotations"][ann.GAVE_UP]
    snapshot = build_snapshot(
        [("t", o) for o in (cluster("east"), cluster("west"), after, template())]
    )
    retried = run_cycle(snapshot, policies, NOW + dt.timedelta(days=1)).decision(REF)
    assert retried is not None and retried.action == Action.ADMIT


def test_the_backoff_note_is_what_the_cycle_says_so_it_writes_nothing_more(policies):
    binding = placed(("east", FAILED, "Unhealthy"))
    found = only_reclaim(policies, binding)
    after = merged(binding, plan_transition(found, binding, "bind", NOW))
    snapshot = build_snapshot(
        [("t", o) for o in (cluster("east"), cluster("west"), after, template())]
    )
    waiting = run_cycle(snapshot, policies, NOW + dt.timedelta(seconds=29)).decision(REF)
    assert waiting is not None and waiting.reason == Reason.BACKOFF
    pending = after["metadata"]["annotations"][ann.PENDING]
    assert pending == f"{waiting.reason}: {waiting.message}"
    # after the backoff: east is still excluded, west takes it
    ready = run_cycle(snapshot, policies, NOW + dt.timedelta(seconds=30)).decision(REF)
    assert ready is not None and ready.action == Action.ADMIT
    assert [c.name for c in ready.clusters] == ["west"]


def test_release_mode_writes_no_status(policies):
    binding = placed(("east", FAILED, "Unhealthy"))
    written = plan_transition(only_reclaim(policies, binding), binding, "release", NOW)
    assert written.status is None and written.patch is not None


def test_due_is_the_next_moment_time_alone_changes_a_decision(policies):
    down_at = NOW - dt.timedelta(minutes=2)
    running = placed(("east", RUNNING, "Healthy"), notes={ann.RUNNING_SINCE: stamp(ADMITTED)})
    world = (cluster("east", False, down_at), cluster("west"))
    assert decide(policies, running, clusters=world).due == down_at + dt.timedelta(minutes=5)
    waiting = placed(
        ("east", None, "Unknown"),
        notes={
            ann.ADMITTED_AT: "",
            ann.BACKOFF_UNTIL: stamp(NOW + dt.timedelta(seconds=40)),
            ann.EXCLUDED_CLUSTERS: f"east={stamp(NOW + dt.timedelta(seconds=20))},"
            f"west={stamp(NOW - dt.timedelta(seconds=20))}",
        },
    )
    waiting["spec"]["clusters"] = []
    assert decide(policies, waiting).due == NOW + dt.timedelta(seconds=20)
    # its backoff over and its note gone, the exclusion of east still ends with time
    del waiting["metadata"]["annotations"][ann.BACKOFF_UNTIL]
    assert decide(policies, waiting).due == NOW + dt.timedelta(seconds=20)
    # a waiting binding with neither: nothing changes with time alone
    del waiting["metadata"]["annotations"][ann.EXCLUDED_CLUSTERS]
    assert decide(policies, waiting).due is None
    # with a backoff alone, its end
    waiting["metadata"]["annotations"][ann.BACKOFF_UNTIL] = stamp(NOW + dt.timedelta(seconds=40))
    assert decide(policies, waiting).due == NOW + dt.timedelta(seconds=40)


def test_unknown_health_does_not_hide_a_job_its_status_shows_running(policies):
    """Karmada reports Unknown for a kind it has no health interpreter for."""
    (started,) = decide(policies, placed(("east", RUNNING, "Unknown"))).started
    assert started.clusters == ("east",)
    jobset = placed(("east", {}, "Unknown"))
    jobset["spec"]["resource"] = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "name": "train",
    }
    # no running signal in a JobSet's status: its health decides (its template is not in
    # this snapshot: the lifecycle does not need it)
    snapshot = build_snapshot([("t", o) for o in (cluster("east"), jobset)])
    assert review(snapshot, policies, NOW, lambda ref: jobset).started == ()
    jobset["status"]["aggregatedStatus"][0]["health"] = "Healthy"
    snapshot = build_snapshot([("t", o) for o in (cluster("east"), jobset)])
    assert len(review(snapshot, policies, NOW, lambda ref: jobset).started) == 1


# -- an admission whose status write did not go through -----------------------------------------


def test_an_admission_without_its_scheduled_condition_is_confirmed_once(policies):
    """The spec patch of an admission went through but its status write met 409s (or the
    reconciler died in between): the next pass writes Scheduled=True and the Admitted Event,
    and nothing once the condition is there."""
    binding = placed(("east", RUNNING, "Healthy"), notes={ann.RUNNING_SINCE: stamp(ADMITTED)})
    del binding["status"]["conditions"]
    result = decide(policies, binding)
    assert result.confirms == (Confirm(REF, ("east",)),)
    assert result.transitions() == (Confirm(REF, ("east",)),)
    written = plan_transition(result.confirms[0], binding, "bind", NOW)
    assert written.status is not None and written.status.reason == "FleetgateAdmitted"
    assert written.event is not None and written.event.reason == "Admitted"
    assert plan_transition(result.confirms[0], binding, "release", NOW) == Plan()
    binding["status"]["conditions"] = [{"type": "Scheduled", "status": "True"}]
    assert decide(policies, binding).confirms == ()
    assert plan_transition(Confirm(REF, ("east",)), binding, "bind", NOW) == Plan()


def test_a_confirm_goes_before_a_started_of_the_same_binding_which_waits_a_pass(policies):
    binding = placed(("east", RUNNING, "Healthy"))
    del binding["status"]["conditions"]
    result = decide(policies, binding)
    assert [type(t) for t in result.started] == [Started]
    assert result.transitions() == (Confirm(REF, ("east",)),)  # one write per binding and pass


# -- the pass's plan ----------------------------------------------------------------------------


def test_a_pass_plans_the_reclaim_before_the_cycles_decisions_and_keeps_its_order(policies):
    failed = placed(("east", FAILED, "Unhealthy"))
    waiting = copy.deepcopy(failed)
    waiting["metadata"].update(name="next-pytorchjob", uid="u-next")
    waiting["metadata"]["annotations"] = {ann.QUEUED_AT: stamp(ADMITTED)}
    waiting["spec"]["clusters"] = []
    waiting["spec"]["resource"]["name"] = "next"
    waiting.pop("status")
    second = template()
    second["metadata"].update(name="next", uid="u-next-t")
    objects = [cluster("east"), cluster("west"), failed, waiting, template(), second]
    snapshot = build_snapshot([("t", o) for o in objects])
    assert not snapshot.errors, snapshot.errors
    result = run_cycle(snapshot, policies, NOW)
    lookup = {REF: failed, "team/next-pytorchjob": waiting}.get
    todo = plan_pass(snapshot, policies, result, NOW, lookup)
    (reclaim,) = todo.transitions
    assert isinstance(reclaim, Reclaim) and reclaim.binding == REF
    assert [(d.binding, d.action) for d in todo.decisions] == [
        ("team/next-pytorchjob", Action.ADMIT)
    ]
    assert (todo.rollbacks, dict(todo.plans), todo.held) == ((), {}, 0)
    # the next moment time alone changes a decision, as this snapshot shows it (the requeue's
    # backoff comes with the next pass's snapshot)
    assert todo.due == ADMITTED + dt.timedelta(minutes=10)


def test_a_job_found_running_that_the_cycle_preempts_is_not_marked_started_this_pass(policies):
    running = placed(("east", RUNNING, "Healthy"))
    snapshot = build_snapshot([("t", o) for o in (cluster("east"), running, template())])
    assert not snapshot.errors, snapshot.errors
    lookup = {REF: running}.get
    waiting = [
        Decision(f"team/w{i}", "PyTorchJob/team/w", "q", "t", 0, Action.PENDING,
                 Reason.WAITING_FOR_QUOTA, "m")
        for i in range(20)
    ]  # fmt: skip
    result = CycleResult("v1", NOW, tuple(waiting), ())
    (started,) = plan_pass(snapshot, policies, result, NOW, lookup).transitions
    assert isinstance(started, Started) and started.binding == REF
    victim = Decision(REF, "PyTorchJob/team/train", "q", "t", 0, Action.PREEMPT,
                      Reason.PREEMPTED, "m", preemptor="team/w0")  # fmt: skip
    result = CycleResult("v1", NOW, (*waiting, victim), ())
    todo = plan_pass(snapshot, policies, result, NOW, lookup)
    assert todo.transitions == ()  # the preemption is written; Started waits for a later pass
    assert todo.decisions[-1] == victim
