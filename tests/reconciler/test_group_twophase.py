"""Two-phase binding of a co-admission group (issue 21; engine/enforce/groupphase.py): a plan on
every member first, then the members bound; a plan half-applied is completed on its clusters
or rolled back whole. Also: a ``spec.groups`` group seen short while a member backs off, and
rollbacks counted as evictions.

Pure tests of ``groupphase.stage``, then faults injected at the HTTPS sandbox (the fixtures of
test_requeue_e2e.py): a pass dying between the phases or between two members' Admits, a plan
write meeting a 409, a plan of an older policy, a plan whose clusters no longer fit.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import shutil
from pathlib import Path
from typing import Any

import kubernetes

from engine import annotations as ann
from engine.cycle.model import ClusterAssignment, Decision
from engine.cycle.reasons import Action, Reason
from engine.enforce import groupphase, groupplan
from engine.enforce.groupphase import MemberPlan, Unplan
from engine.enforce.plan import plan
from engine.fleet.frozen import FrozenDict
from engine.policy.reload import PolicyHolder
from reconciler.loop import Reconciler
from reconciler.metrics import ReconcilerMetrics
from reconciler.settings import ReconcilerSettings
from sandbox.karmada.names import DURATION_ANNOTATION
from tests.conftest import REPO
from tests.reconciler import test_group_enforce as enforce
from tests.reconciler import test_requeue_e2e as e2e
from tests.reconciler.test_loop import KUBEFLOW, NS, RB, binding, caught_up
from tests.reconciler.test_metrics import samples
from tests.sandbox.test_webhooks import pytorchjob

# the sandbox fixtures of test_requeue_e2e.py
bounded, clock, core, custom, faults, karmada, rec = (
    e2e.bounded, e2e.clock, e2e.core, e2e.custom, e2e.faults, e2e.karmada, e2e.rec
)  # fmt: skip
clusters_of, notes_of, step = e2e.clusters_of, e2e.notes_of, e2e.step
bound, fail_patch, fresh, submit_member = (
    enforce.bound, enforce.fail_patch, enforce.fresh, enforce.submit_member
)  # fmt: skip

NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
GROUP = enforce.GROUP
VERSION = "v1"

# -- pure ------------------------------------------------------------------------------------


def admit(name: str, cluster: str = "east", action: Action = Action.ADMIT) -> Decision:
    return enforce.decision(name, action)._replace(
        clusters=(ClusterAssignment(cluster, 1),) if action == Action.ADMIT else ()
    )


def planned(name: str, placed: bool, plan_id: str = "p1", cluster: str = "east", **kw: Any):
    """A member carrying a plan; ``placed``: bound under it (on ``cluster``)."""
    size, minimum = kw.pop("size", 2), kw.pop("minimum", 2)
    text = MemberPlan(GROUP, plan_id, (cluster,), minimum, size, kw.pop("version", VERSION)).text()
    view = enforce.member(name, placed, group=GROUP if placed else None)
    return dataclasses.replace(
        view,
        clusters=((cluster, 1),) if placed else (),
        annotations=FrozenDict({**view.annotations, ann.GROUP_PLAN: text}),
    )


def test_every_member_admitted_with_a_group_gets_one_plan_with_its_own_clusters():
    staged = groupphase.stage(
        enforce.world(), [admit("a", "east"), admit("b", "west")], VERSION, NOW
    )
    a, b = staged.plans["research/a-pytorchjob"], staged.plans["research/b-pytorchjob"]
    assert a.id == b.id and (a.clusters, b.clusters) == (("east",), ("west",))
    assert (a.group, a.min, a.size, a.version) == (GROUP, 2, 2, VERSION)
    assert groupphase.read_plan({ann.GROUP_PLAN: a.text()}) == a
    assert not staged.rolled_back and not staged.held
    later = groupphase.stage(
        enforce.world(), [admit("a"), admit("b")], VERSION, NOW.replace(hour=1)
    )
    assert later.plans["research/a-pytorchjob"].id != a.id  # a new plan supersedes an old one


def test_a_half_applied_plan_is_completed_under_its_id_on_its_clusters():
    half = enforce.world(planned("a", True), planned("b", False, cluster="west"))
    staged = groupphase.stage(half, [admit("b", "west")], VERSION, NOW)
    assert staged.plans["research/b-pytorchjob"] == MemberPlan(
        GROUP, "p1", ("west",), 2, 2, VERSION
    )
    assert not staged.rolled_back and not staged.unplanned and not staged.held


def rolled_back_whole(staged: groupphase.Staged) -> None:
    assert staged.rolled_back == ("research/a-pytorchjob",)
    assert staged.unplanned == ()  # b keeps the plan until a is off its clusters
    assert staged.plans == {}
    assert {"research/a-pytorchjob", "research/b-pytorchjob"} <= staged.held


def test_a_half_applied_plan_of_an_older_policy_is_rolled_back():
    half = enforce.world(planned("a", True, version="v0"), planned("b", False, version="v0"))
    rolled_back_whole(groupphase.stage(half, [admit("b")], VERSION, NOW))


def test_a_half_applied_plan_the_cycle_places_elsewhere_or_not_at_all_is_rolled_back():
    half = enforce.world(planned("a", True), planned("b", False))
    rolled_back_whole(groupphase.stage(half, [admit("b", "west")], VERSION, NOW))
    rolled_back_whole(groupphase.stage(half, [admit("b", action=Action.PENDING)], VERSION, NOW))


def test_a_half_applied_plan_with_its_minimum_bound_stands_and_the_rest_are_decided_afresh():
    # catches: a group bound at its minimum at once taken off its clusters because a member
    # beyond the minimum could not complete (the kill test's "rolled back with its group at its
    # min", seen when a leader's writes stopped at its lease deadline mid-plan)
    three = {"size": 3, "minimum": 2}
    half = enforce.world(
        planned("a", True, **three), planned("b", True, **three), planned("c", False, **three)
    )
    staged = groupphase.stage(half, [admit("c", action=Action.PENDING)], VERSION, NOW)
    assert staged.rolled_back == () and staged.plans == {}
    assert [u.binding for u in staged.unplanned] == ["research/c-pytorchjob"]
    assert not {"research/a-pytorchjob", "research/b-pytorchjob"} & staged.held
    short = enforce.world(planned("a", True, **three), planned("c", False, **three))
    staged = groupphase.stage(short, [admit("c", action=Action.PENDING)], VERSION, NOW)
    assert staged.rolled_back == ("research/a-pytorchjob",)  # below its minimum: rolled back


def test_a_plan_nobody_is_bound_under_is_superseded_or_removed_and_a_complete_one_kept():
    written = enforce.world(planned("a", False), planned("b", False))  # died after phase 1
    staged = groupphase.stage(written, [admit("a"), admit("b")], VERSION, NOW)
    assert staged.plans["research/a-pytorchjob"].id != "p1" and not staged.rolled_back
    assert staged.unplanned == ()  # both planned again: the new plan is written over it
    waiting = [admit("a", action=Action.PENDING), admit("b", action=Action.PENDING)]
    staged = groupphase.stage(written, waiting, VERSION, NOW)
    assert [u.binding for u in staged.unplanned] == [
        "research/a-pytorchjob",
        "research/b-pytorchjob",
    ]
    assert staged.held == {"research/a-pytorchjob", "research/b-pytorchjob"}
    whole = enforce.world(planned("a", True), planned("b", True))
    assert groupphase.stage(whole, [], VERSION, NOW) == groupphase.Staged()


def test_enforcement_rolls_a_member_back_once_and_holds_the_groups_decisions():
    half = enforce.world(planned("a", True), planned("b", False))
    waiting = [admit("b", action=Action.PENDING)]
    found = groupplan.enforcement(half, (), waiting, VERSION, NOW)
    assert [(type(r).__name__, r.binding) for r in found.rollbacks] == [
        ("GroupRollback", "research/a-pytorchjob")
    ]
    assert found.held == {"research/a-pytorchjob", "research/b-pytorchjob"}
    after = enforce.world(enforce.member("a", False, group=None), planned("b", False))
    found = groupplan.enforcement(after, (), waiting, VERSION, NOW)
    assert found.rollbacks == (Unplan("research/b-pytorchjob", GROUP, "p1"),)


def test_a_group_rolled_back_for_being_short_is_not_admitted_in_the_same_pass():
    three = enforce.world(
        enforce.member("a", True, minimum=3),
        enforce.member("b", True, minimum=3),
        enforce.member("c", False, minimum=3),
    )
    leaving = ["research/a-pytorchjob"]  # reclaimed now; the cycle counted it as placed
    found = groupplan.enforcement(three, leaving, [admit("c")], VERSION, NOW)
    assert [r.binding for r in found.rollbacks] == ["research/b-pytorchjob"]
    assert "research/c-pytorchjob" in found.held and found.plans == {}


def test_the_rollback_and_the_plan_removal_write_only_what_is_theirs():
    text = MemberPlan(GROUP, "p1", ("east",), 2, 2, VERSION).text()
    meta = {"name": "b", "namespace": "research", "resourceVersion": "4"}
    held = {
        "metadata": {**meta, "annotations": {ann.GROUP_PLAN: text}},
        "spec": {"suspension": {"scheduling": True}},
    }
    undo = Unplan("research/b-pytorchjob", GROUP, "p1")
    patch = groupplan.plan_rollback(undo, held, "bind", NOW).patch
    assert patch == {"metadata": {"resourceVersion": "4", "annotations": {ann.GROUP_PLAN: None}}}
    replanned = Unplan("research/b-pytorchjob", GROUP, "p0")  # planned again since
    assert groupplan.plan_rollback(replanned, held, "bind", NOW).patch is None
    placed = {**held, "spec": {"clusters": [{"name": "east"}]}}
    change = groupplan.GroupRollback("research/b-pytorchjob", GROUP, 0, 0, "plan p1 stale")
    notes = groupplan.plan_rollback(change, placed, "bind", NOW).patch["metadata"]["annotations"]
    assert notes[ann.GROUP_PLAN] is None and "plan p1 stale" in notes[ann.PENDING]


def test_an_admission_outside_a_group_drops_a_stale_plan():
    text = MemberPlan(GROUP, "p1", ("east",), 2, 2, VERSION).text()
    held = {
        "metadata": {"name": "a", "namespace": "research", "resourceVersion": "7"},
        "spec": {"suspension": {"scheduling": True}, "resource": {"kind": "PyTorchJob"}},
    }
    held["metadata"]["annotations"] = {ann.GROUP_PLAN: text}
    alone = admit("a")._replace(group=None)
    assert plan(alone, held, "bind", NOW).patch["metadata"]["annotations"][ann.GROUP_PLAN] is None
    grouped = plan(admit("a"), held, "bind", NOW).patch["metadata"]["annotations"]
    assert ann.GROUP_PLAN not in grouped  # kept: the member is bound under it


# -- end to end through the sandbox ----------------------------------------------------------


def plan_of(custom, name: str) -> MemberPlan:
    found = groupphase.read_plan(notes_of(custom, name))
    assert found is not None, notes_of(custom, name)
    return found


def arrive(custom, karmada, rec, clock) -> None:
    submit_member(custom, "a")
    submit_member(custom, "b")
    karmada.run_once(clock())
    caught_up(rec, custom)


def test_a_pass_dying_between_the_phases_binds_nothing_and_the_next_plans_again(
    api_client, custom, karmada, rec, clock, sandbox
):
    arrive(custom, karmada, rec, clock)
    fail_patch(sandbox, "a", 2)
    fail_patch(sandbox, "b", 2)
    summary = rec.run_once()
    assert summary.errors == 2, summary
    assert bound(custom) == [False, False]
    first = plan_of(custom, "a")
    assert plan_of(custom, "b").id == first.id and first.group == GROUP
    rec.stop()
    clock.advance(5)
    restarted = fresh(api_client, clock)
    try:
        step(karmada, restarted, custom, clock)
        assert bound(custom) == [True, True]
        a, b = plan_of(custom, "a"), plan_of(custom, "b")
        assert a.id == b.id != first.id  # the old plan superseded, never half of each
        assert (tuple(clusters_of(custom, "a")), tuple(clusters_of(custom, "b"))) == (
            a.clusters,
            b.clusters,
        )
    finally:
        restarted.stop()


def test_a_plan_write_that_conflicts_binds_no_member_this_pass(custom, karmada, rec, clock, faults):
    arrive(custom, karmada, rec, clock)
    faults.fail_requests(409, method="PATCH", path="/resourcebindings/b-pytorchjob$", count=1)
    summary = rec.run_once()
    assert summary.conflicts == 1, summary
    assert bound(custom) == [False, False]  # a's plan went through, its Admit was not sent
    assert (f"{NS}/a-pytorchjob", groupphase.PLANNED) in summary.applied_to
    clock.advance(5)
    step(karmada, rec, custom, clock)
    assert bound(custom) == [True, True]
    assert plan_of(custom, "a").id == plan_of(custom, "b").id


def test_leadership_lost_between_the_phases_binds_no_member(custom, karmada, rec, clock, sandbox):
    arrive(custom, karmada, rec, clock)
    patched: list[str] = []  # the gate closes once the two plans are written

    def hook(method: str, where: str, _query: dict[str, str]) -> None:
        if method == "PATCH" and "/resourcebindings/" in where:
            patched.append(where)

    sandbox.request_hooks.append(hook)
    rec.gate = rec.applier.gate = lambda: len(patched) < 2
    summary = rec.run_once()
    assert len(patched) == 2 and summary.skipped >= 2, summary
    assert bound(custom) == [False, False]
    assert plan_of(custom, "a").id == plan_of(custom, "b").id
    rec.gate = rec.applier.gate = None  # leading again
    clock.advance(5)
    step(karmada, rec, custom, clock)
    assert bound(custom) == [True, True]


def crash_after_a(custom, karmada, rec, clock, sandbox) -> MemberPlan:
    """A pass that dies after binding a: both carry the plan, b is not bound."""
    arrive(custom, karmada, rec, clock)
    fail_patch(sandbox, "b", 2)
    assert rec.run_once().errors == 1
    assert bound(custom) == [True, False]
    rec.stop()
    return plan_of(custom, "b")


def test_a_restarted_reconciler_completes_a_half_applied_plan_on_its_clusters(
    api_client, custom, karmada, rec, clock, sandbox
):
    meant = crash_after_a(custom, karmada, rec, clock, sandbox)
    restarted = fresh(api_client, clock)
    try:
        summary = step(karmada, restarted, custom, clock)
        assert (f"{NS}/b-pytorchjob", str(Action.ADMIT)) in summary.applied_to, summary
        assert bound(custom) == [True, True]
        assert tuple(clusters_of(custom, "b")) == meant.clusters
        assert plan_of(custom, "b") == meant and plan_of(custom, "a").id == meant.id
    finally:
        restarted.stop()


def rewrite_plans(custom, edit) -> None:
    for name in ("a", "b"):
        found = json.loads(notes_of(custom, name)[ann.GROUP_PLAN])
        edit(found)
        patch = {"metadata": {"annotations": {ann.GROUP_PLAN: json.dumps(found)}}}
        custom.patch_namespaced_custom_object(*RB, f"{name}-pytorchjob", patch)


def rolled_back(custom, summary, meant: MemberPlan) -> None:
    """a taken off its clusters; b keeps the plan until a is off (removed or superseded next)."""
    assert (f"{NS}/a-pytorchjob", groupplan.ROLLED_BACK) in summary.applied_to, summary
    assert summary.conflicts == 0, summary
    assert bound(custom) == [False, False]
    assert ann.GROUP_PLAN not in notes_of(custom, "a")
    assert plan_of(custom, "b").id == meant.id
    assert ann.ATTEMPTS not in notes_of(custom, "a")


def planned_anew(custom, karmada, rec, clock, meant: MemberPlan) -> None:
    clock.advance(5)
    step(karmada, rec, custom, clock)
    assert bound(custom) == [True, True]
    a, b = plan_of(custom, "a"), plan_of(custom, "b")
    assert a.id == b.id != meant.id and tuple(clusters_of(custom, "b")) == b.clusters


def test_a_half_applied_plan_of_an_older_policy_is_rolled_back_then_planned_anew(
    api_client, custom, karmada, rec, clock, sandbox
):
    meant = crash_after_a(custom, karmada, rec, clock, sandbox)
    rewrite_plans(custom, lambda found: found.update(version="an-older-policy"))
    restarted = fresh(api_client, clock)
    try:
        rolled_back(custom, step(karmada, restarted, custom, clock), meant)
        planned_anew(custom, karmada, restarted, clock, meant)
        assert plan_of(custom, "a").version == restarted.last.policy_version
    finally:
        restarted.stop()


def test_a_half_applied_plan_whose_clusters_no_longer_fit_is_rolled_back(
    api_client, custom, karmada, rec, clock, sandbox
):
    meant = crash_after_a(custom, karmada, rec, clock, sandbox)
    # the plan placed b on a cluster that is gone now: it cannot be completed there
    rewrite_plans(custom, lambda found: found.update(clusters=["a-cluster-gone-since"]))
    restarted = fresh(api_client, clock)
    try:
        rolled_back(custom, step(karmada, restarted, custom, clock), meant)
        planned_anew(custom, karmada, restarted, clock, meant)
    finally:
        restarted.stop()


# -- a spec.groups group, a member backing off --------------------------------------------------

SWEEP = """  groups:
    name: '"sweep" in job.labels ? job.labels["sweep"] : ""'
    size: 'int(job.labels["sweep-size"])'
"""


def swept_policies(tmp_path: Path) -> Path:
    """policies/ with a ``spec.groups`` that groups jobs by their ``sweep`` label."""
    copy = tmp_path / "swept-policies"
    shutil.copytree(REPO / "policies", copy)
    scheduling = copy / "scheduling.yaml"
    text = scheduling.read_text()
    scheduling.write_text(text.replace("spec:\n", "spec:\n" + SWEEP, 1))
    return copy


def submit_swept(custom, name: str) -> None:
    """A member of the CEL group ``pair`` (labels only: no fleetgate.io/group annotation)."""
    job = pytorchjob(1)
    job["metadata"]["name"] = name
    job["metadata"].setdefault("labels", {}).update({"sweep": "pair", "sweep-size": "2"})
    job["metadata"]["annotations"] = {DURATION_ANNOTATION: "1h"}
    job["spec"]["runPolicy"]["schedulingPolicy"]["minAvailable"] = 2
    for role in job["spec"]["pytorchReplicaSpecs"].values():
        resources = role["template"]["spec"]["containers"][0]["resources"]
        resources["requests"]["memory"] = resources["limits"]["memory"] = "400Gi"
    custom.create_namespaced_custom_object(*KUBEFLOW, job)


def swept_reconciler(api_client: kubernetes.client.ApiClient, clock, policies: Path) -> Reconciler:
    holder = PolicyHolder.for_paths([policies])
    assert holder.reload(), holder.status.errors
    started = Reconciler(api_client, holder, ReconcilerSettings(request_timeout=10), clock=clock)
    started.start(loop=False)
    assert started.wait_synced(15)
    return started


def test_a_policy_group_is_rolled_back_while_a_member_backs_off_after_a_crash(
    api_client, custom, karmada, rec, clock, faults, tmp_path
):
    rec.stop()
    policies = swept_policies(tmp_path)
    first = swept_reconciler(api_client, clock, policies)
    try:
        submit_swept(custom, "a")
        submit_swept(custom, "b")
        step(karmada, first, custom, clock)
        step(karmada, first, custom, clock)  # both run
        assert bound(custom) == [True, True]
        assert notes_of(custom, "a")[ann.ADMITTED_GROUP] == "group/research/pair"
        faults.fail_job(NS, "b", "NCCL watchdog timeout")
        clock.advance(10)
        # b is requeued (backoff); the pass dies before a's rollback is written
        faults.fail_requests(500, method="PATCH", path="/resourcebindings/a-pytorchjob$", count=1)
        karmada.run_once(clock())
        caught_up(first, custom)
        summary = first.run_once()
        assert summary.requeued == 1 and summary.errors == 1, summary
        assert bound(custom) == [True, False]
        assert ann.BACKOFF_UNTIL in notes_of(custom, "b")
    finally:
        first.stop()
    restarted = swept_reconciler(api_client, clock, policies)
    try:
        metrics = ReconcilerMetrics().attach(restarted)
        summary = step(karmada, restarted, custom, clock)
        assert (f"{NS}/a-pytorchjob", groupplan.ROLLED_BACK) in summary.applied_to, summary
        assert bound(custom) == [False, False]
        held = binding(custom, "a")
        assert ann.ATTEMPTS not in held["metadata"]["annotations"]  # a did not fail
        evicted = samples(metrics, "fleetgate_evicted_jobs_total")
        assert evicted == {(("queue", "research-training"), ("reason", "GroupRolledBack")): 1.0}
    finally:
        restarted.stop()


def test_a_member_rolled_back_is_counted_as_evicted_under_its_queue(
    custom, karmada, rec, clock, faults
):
    metrics = ReconcilerMetrics().attach(rec)
    submit_member(custom, "a")
    submit_member(custom, "b")
    step(karmada, rec, custom, clock)
    step(karmada, rec, custom, clock)
    faults.fail_job(NS, "a", "NCCL watchdog timeout")
    clock.advance(10)
    summary = step(karmada, rec, custom, clock)
    assert (f"{NS}/b-pytorchjob", groupplan.ROLLED_BACK) in summary.applied_to, summary
    evicted = samples(metrics, "fleetgate_evicted_jobs_total")
    assert evicted[(("queue", "research-training"), ("reason", "GroupRolledBack"))] == 1.0
    rolled = {k: v for k, v in evicted.items() if ("reason", "GroupRolledBack") in k}
    assert rolled == {(("queue", "research-training"), ("reason", "GroupRolledBack")): 1.0}
    step(karmada, rec, custom, clock)  # nothing rolled back again: counted once
    assert samples(metrics, "fleetgate_evicted_jobs_total") == evicted
    assert Reason.WAITING_FOR_GROUP in notes_of(custom, "b")[ann.PENDING]
