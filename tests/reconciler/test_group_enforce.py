"""Co-admission groups enforced by the reconciler (issue 21, item 3; engine/enforce/groupplan.py):
a group stays placed at least ``min`` strong, or leaves whole.

Pure tests of the record an admission writes and of ``groupplan.rollbacks``; then end to end
through the HTTPS sandbox (the fixtures of test_requeue_e2e.py): a group of two bound in one
pass, a reconciler dying between the members' writes (completed, or rolled back by a fresh
reconciler's first pass), and a member failing on its cluster requeueing the whole group.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import itertools
import re
from typing import Any

import kubernetes

from engine import annotations as ann
from engine.cycle.model import ClusterAssignment, Decision, GroupState
from engine.cycle.reasons import Action, Reason
from engine.enforce import groupplan
from engine.enforce.plan import plan
from engine.fleet.frozen import FrozenDict
from engine.fleet.model import Snapshot
from engine.policy.reload import PolicyHolder
from reconciler.loop import Reconciler
from reconciler.settings import ReconcilerSettings
from sandbox import errors
from sandbox.karmada.names import DURATION_ANNOTATION
from tests.conftest import REPO
from tests.cycle import builders
from tests.reconciler import test_requeue_e2e as e2e
from tests.reconciler.test_loop import KUBEFLOW, NS, RB, binding, caught_up
from tests.sandbox.test_webhooks import pytorchjob

# the sandbox fixtures of test_requeue_e2e.py
bounded, clock, core, custom, faults, karmada, rec = (
    e2e.bounded, e2e.clock, e2e.core, e2e.custom, e2e.faults, e2e.karmada, e2e.rec
)  # fmt: skip
clusters_of, events, notes_of, step = e2e.clusters_of, e2e.events, e2e.notes_of, e2e.step

NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
GROUP = "group/research/pair"

# -- pure ------------------------------------------------------------------------------------


def member(name: str, placed: bool, group: str | None = GROUP, minimum: int = 2, **notes: str):
    view, _ = builders.job({"name": name, "namespace": "research", "pods": 1})
    record = {ann.ADMITTED_GROUP: group, ann.ADMITTED_GROUP_MIN: str(minimum)} if group else {}
    return dataclasses.replace(
        view,
        clusters=(("east", 1),) if placed else (),
        labels=FrozenDict({ann.MANAGED: "true"}),
        annotations=FrozenDict({**view.annotations, **record, **notes}),
    )


def world(*bindings) -> Snapshot:
    return dataclasses.replace(builders.snapshot({"clusters": []}), bindings=tuple(bindings))


def decision(
    name: str, action: Action = Action.ADMIT, size: int = 2, grouped: bool = True
) -> Decision:
    return Decision(
        binding=f"research/{name}-pytorchjob",
        workload=f"PyTorchJob/research/{name}",
        queue="q",
        tenant="t",
        priority=0,
        action=action,
        reason={Action.ADMIT: Reason.ADMITTED, Action.PREEMPT: Reason.PREEMPTED}.get(
            action, Reason.WAITING_FOR_GROUP
        ),
        message="m",
        clusters=(ClusterAssignment("east", 1),) if action == Action.ADMIT else (),
        group=GroupState(GROUP, size, size, size, "Admitted") if grouped else None,
    )


def test_an_admission_of_a_group_member_records_the_group_and_its_minimum():
    held = {
        "metadata": {"name": "a", "namespace": "research", "resourceVersion": "7"},
        "spec": {"suspension": {"scheduling": True}, "resource": {"kind": "PyTorchJob"}},
    }
    notes = plan(decision("a"), held, "bind", NOW).patch["metadata"]["annotations"]
    assert (notes[ann.ADMITTED_GROUP], notes[ann.ADMITTED_GROUP_MIN]) == (GROUP, "2")


def test_a_group_placed_whole_or_completed_this_pass_is_left_alone():
    assert groupplan.rollbacks(world(member("a", True), member("b", True)), (), ()) == ()
    half = world(member("a", True), member("b", False))
    assert groupplan.rollbacks(half, (), [decision("b")]) == ()  # completed by the cycle now
    assert groupplan.rollbacks(world(member("c", True, group=None)), (), ()) == ()


def test_a_half_admitted_group_not_completed_this_pass_is_rolled_back():
    half = world(member("a", True), member("b", False))
    (found,) = groupplan.rollbacks(half, (), [decision("b", Action.PENDING)])
    assert (found.binding, found.group, found.minimum, found.remaining) == (
        "research/a-pytorchjob",
        GROUP,
        2,
        1,
    )


def test_a_member_whose_binding_is_gone_is_no_reason_to_stop_the_others():
    # a finished member deleted: nothing says the group is short of a member now
    assert groupplan.rollbacks(world(member("a", True)), (), ()) == ()


def test_a_member_reclaimed_or_preempted_takes_the_rest_when_fewer_than_min_remain():
    three = [member(n, True, minimum=2) for n in ("a", "b", "c")]
    failed = ["research/a-pytorchjob"]
    assert groupplan.rollbacks(world(*three), failed, ()) == ()  # 2 remain: enough
    gone = groupplan.rollbacks(world(*three), failed, [decision("b", Action.PREEMPT)])
    assert [r.binding for r in gone] == ["research/c-pytorchjob"]
    # as a pass enforces it, the victim's decision naming no group (a preemption victim's
    # need not) among thousands of others that name none either
    others = [decision(f"w{i}", Action.PENDING, grouped=False) for i in range(50)]
    victim = decision("b", Action.PREEMPT, grouped=False)
    found = groupplan.enforcement(world(*three), failed, [*others, victim], "v1", NOW)
    assert [r.binding for r in found.rollbacks] == ["research/c-pytorchjob"]


def test_the_rollback_plan_unbinds_without_counting_an_attempt():
    held = {
        "metadata": {
            "name": "a",
            "namespace": "research",
            "resourceVersion": "9",
            "annotations": {
                ann.ADMITTED_GROUP: GROUP,
                ann.ADMITTED_GROUP_MIN: "2",
                ann.ATTEMPTS: "1",
            },
        },
        "spec": {"clusters": [{"name": "east"}], "suspension": {"scheduling": True}},
    }
    change = groupplan.GroupRollback("research/a-pytorchjob", GROUP, 2, 1)
    written = groupplan.plan_rollback(change, held, "bind", NOW)
    notes = written.patch["metadata"]["annotations"]
    assert written.patch["spec"]["clusters"] is None
    assert written.patch["metadata"]["resourceVersion"] == "9"
    assert notes[ann.ADMITTED_GROUP] is None and ann.ATTEMPTS not in notes
    assert notes[ann.PENDING].startswith("WaitingForGroup: ")
    assert written.event is not None and written.event.reason == groupplan.ROLLED_BACK
    gone = {**held, "spec": {"suspension": {"scheduling": True}}}
    assert groupplan.plan_rollback(change, gone, "bind", NOW).patch is None


# -- end to end through the sandbox ----------------------------------------------------------


def submit_member(custom, name: str) -> None:
    """A PyTorchJob of 2 pods of 8 GPUs, a member of the group ``pair`` of size 2."""
    job = pytorchjob(1)
    job["metadata"]["name"] = name
    job["metadata"]["annotations"] = {
        DURATION_ANNOTATION: "1h",
        ann.GROUP: "pair",
        ann.GROUP_SIZE: "2",
    }
    job["spec"]["runPolicy"]["schedulingPolicy"]["minAvailable"] = 2
    for role in job["spec"]["pytorchReplicaSpecs"].values():
        resources = role["template"]["spec"]["containers"][0]["resources"]
        resources["requests"]["memory"] = resources["limits"]["memory"] = "400Gi"
    custom.create_namespaced_custom_object(*KUBEFLOW, job)


def bound(custom) -> list[bool]:
    return [bool(clusters_of(custom, name)) for name in ("a", "b")]


def fresh(api_client: kubernetes.client.ApiClient, clock) -> Reconciler:
    """Another reconciler over the same API, as after a restart: nothing kept in memory."""
    holder = PolicyHolder.for_paths([REPO / "policies"])
    assert holder.reload(), holder.status.errors
    started = Reconciler(api_client, holder, ReconcilerSettings(request_timeout=10), clock=clock)
    started.start(loop=False)
    assert started.wait_synced(15)
    return started


def test_a_group_of_two_is_bound_in_one_pass_with_its_record(custom, karmada, rec, clock):
    submit_member(custom, "a")
    submit_member(custom, "b")
    step(karmada, rec, custom, clock)
    assert bound(custom) == [True, True]
    for name in ("a", "b"):
        notes = notes_of(custom, name)
        assert (notes[ann.ADMITTED_GROUP], notes[ann.ADMITTED_GROUP_MIN]) == (GROUP, "2")


def fail_patch(sandbox, job: str, *nth: int) -> None:
    """The ``nth`` spec patches (counted from 1) of ``job``'s binding answer 500, as the
    writes of a dying reconciler would never have been sent; the others go through. The first
    patch of a group member in a pass is its plan (phase 1), the second its Admit (phase 2)."""
    seen = itertools.count(1)
    path = re.compile(f"/resourcebindings/{job}-pytorchjob$")

    def hook(method: str, where: str, _query: dict[str, str]) -> None:
        if method == "PATCH" and path.search(where) and next(seen) in nth:
            raise errors.StatusError(errors.status(500, "InternalError", "injected: died"))

    sandbox.request_hooks.append(hook)


def crash_between_members(custom, karmada, rec, clock, sandbox) -> None:
    """The group's pass dies after member a's Admit: both plans were written (phase 1), b's
    Admit fails as a dying reconciler's would never have been sent."""
    submit_member(custom, "a")
    submit_member(custom, "b")
    karmada.run_once(clock())
    caught_up(rec, custom)  # bindings and templates
    fail_patch(sandbox, "b", 2)
    summary = rec.run_once()
    assert summary.errors == 1, summary
    assert bound(custom) == [True, False]
    assert notes_of(custom, "a")[ann.ADMITTED_GROUP] == GROUP


def test_a_restarted_reconciler_completes_a_half_written_group_that_still_fits(
    api_client, custom, karmada, rec, clock, sandbox
):
    crash_between_members(custom, karmada, rec, clock, sandbox)
    rec.stop()
    restarted = fresh(api_client, clock)
    try:
        step(karmada, restarted, custom, clock)
        assert bound(custom) == [True, True]
        assert notes_of(custom, "b")[ann.ADMITTED_GROUP] == GROUP
    finally:
        restarted.stop()


def test_a_restarted_reconciler_rolls_back_a_half_written_group_that_cannot_complete(
    api_client, custom, core, karmada, rec, clock, sandbox
):
    crash_between_members(custom, karmada, rec, clock, sandbox)
    rec.stop()
    # b can no longer be considered now (a backoff written meanwhile): the group cannot complete
    later = ann.format_time(clock() + dt.timedelta(hours=1))
    patch: dict[str, Any] = {"metadata": {"annotations": {ann.BACKOFF_UNTIL: later}}}
    custom.patch_namespaced_custom_object(*RB, "b-pytorchjob", patch)
    restarted = fresh(api_client, clock)
    try:
        summary = step(karmada, restarted, custom, clock)
        assert (f"{NS}/a-pytorchjob", groupplan.ROLLED_BACK) in summary.applied_to, summary
        assert summary.conflicts == 0, summary  # no other write on a in the same pass
        assert bound(custom) == [False, False]
        notes = notes_of(custom, "a")
        assert ann.ADMITTED_GROUP not in notes and ann.ATTEMPTS not in notes
        assert groupplan.ROLLED_BACK in dict(events(core, "a"))
        assert ann.GROUP_PLAN in notes_of(custom, "b")  # kept until a is off its clusters
        summary = step(karmada, restarted, custom, clock)  # then b's plan is removed
        assert (f"{NS}/b-pytorchjob", groupplan.PLAN_CLEARED) in summary.applied_to, summary
        assert ann.GROUP_PLAN not in notes_of(custom, "b")
        step(karmada, restarted, custom, clock)  # level-triggered: nothing left to undo
        assert bound(custom) == [False, False]
    finally:
        restarted.stop()


def test_a_member_failing_requeues_the_whole_group_when_min_is_its_size(
    custom, karmada, rec, clock, faults
):
    submit_member(custom, "a")
    submit_member(custom, "b")
    step(karmada, rec, custom, clock)
    step(karmada, rec, custom, clock)  # both run
    assert ann.RUNNING_SINCE in notes_of(custom, "b")

    faults.fail_job(NS, "a", "NCCL watchdog timeout")
    clock.advance(10)
    summary = step(karmada, rec, custom, clock)
    assert summary.requeued == 1, summary
    assert (f"{NS}/b-pytorchjob", groupplan.ROLLED_BACK) in summary.applied_to, summary
    assert summary.conflicts == 0, summary
    assert bound(custom) == [False, False]
    assert notes_of(custom, "a")[ann.ATTEMPTS] == "1"
    held = binding(custom, "b")
    assert held["spec"]["suspension"]["scheduling"] is True
    assert ann.ATTEMPTS not in held["metadata"]["annotations"]  # b did not fail: no attempt
