"""Co-admission groups enforced across passes: a group is placed at least ``min`` strong, or
not at all (docs/multi-cluster-training.md, docs/reconciler.md "Groups").

The cycle decides a group whole (``engine.cycle.groups.formation``), but its members are separate
bindings, written one by one: a reconciler that dies between two members' writes, a member's
write that fails, a member that fails on its cluster, or a member preempted, can leave fewer
members placed than the group's minimum. The record of a group admission lives on each member
it binds (``engine.enforce.plan``: written with the Admit patch itself, so a member is never
placed without it): ``fleetgate.io/admitted-group`` (the group's name) and
``fleetgate.io/admitted-group-min`` (its minimum at the admission).

:func:`rollbacks` is the check after every pass's cycle (so also the first pass after a
restart), pure over the snapshot, the lifecycle's reclaims and the cycle's decisions: for each
group with members placed under that record, the members that stay placed this pass (not
reclaimed, not preempted) plus the members the cycle admits now are counted. Fewer than the
minimum, and more than none → every member that stays placed is taken off its clusters again
(:class:`GroupRollback`, planned by :func:`plan_rollback`): suspended, back in its queue
without counting an attempt (like a preemption; a member that failed carries its own attempt
and backoff). A member failing later requeues the group unless the members still running meet
the minimum. A waiting member of a group named only by the SchedulingPolicy's ``spec.groups``
is recognised through the cycle's record of it (``CycleResult.jobs``), so one in backoff says its
group is short too.

The admission itself is two-phase (``engine.enforce.groupphase``): a plan written on every member
first, then the Admit patches; a plan half-applied by a crash is completed on its clusters or
rolled back whole. :func:`enforcement` joins both checks for the loop.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from engine import annotations as ann
from engine.cycle import Action, Decision, JobRecord, Reason, group_label
from engine.enforce import groupphase
from engine.enforce.groupphase import MemberPlan, Unplan
from engine.enforce.lifecycle import binding_ref
from engine.enforce.plan import EventSpec, Mode, Plan, StatusUpdate, patch_of
from engine.fleet.model import Snapshot

ROLLED_BACK = "GroupRolledBack"  # what PassSummary.applied_to records for a rollback write
PLAN_CLEARED = "GroupPlanCleared"  # … for a rolled-back plan removed from an unbound member


@dataclass(frozen=True, slots=True)
class GroupRollback:
    """Take a placed member off its clusters: its group has fewer than ``minimum`` placed."""

    binding: str
    group: str
    minimum: int
    remaining: int  # members that would stay placed without the rollback
    why: str = ""  # set for a half-applied plan that cannot complete (engine.enforce.groupphase)

    def message(self) -> str:
        if self.why:
            return f"group {self.group}: {self.why}; the group is requeued whole"
        return (
            f"group {self.group}: {self.remaining} of at least {self.minimum} members placed; "
            "the group is requeued whole"
        )


@dataclass(frozen=True, slots=True)
class Enforcement:
    """What a pass writes to keep its groups whole: rollbacks and plan removals first, then
    the plan of each member admitted with a group (phase 1) before its Admit (phase 2)."""

    rollbacks: tuple[GroupRollback | Unplan, ...] = ()
    plans: Mapping[str, MemberPlan] = field(default_factory=dict)  # binding ref → its plan
    held: frozenset[str] = frozenset()  # bindings whose decisions are not enforced this pass


def enforcement(
    snapshot: Snapshot,
    leaving: Iterable[str],
    decisions: Iterable[Decision],
    version: str,
    now: dt.datetime,
    jobs: Mapping[str, JobRecord] | None = None,
) -> Enforcement:
    """:func:`rollbacks` and ``groupphase.stage`` for one pass, a member rolled back once."""
    # all that either reads: a decision with no group that preempts nobody is none of theirs
    decided = [d for d in decisions if d.group is not None or d.action == Action.PREEMPT]
    short = rollbacks(snapshot, leaving, decided, jobs)
    staged = groupphase.stage(snapshot, decided, version, now)
    seen = {r.binding for r in short}
    why = "a plan half-applied cannot be completed on its clusters under the current policy"
    planned = [
        GroupRollback(ref, staged.groups.get(ref, ""), 0, 0, why)
        for ref in staged.rolled_back
        if ref not in seen
    ]
    found: list[GroupRollback | Unplan] = [*short, *planned, *staged.unplanned]
    # a group rolled back for being short is not admitted in the same pass (the cycle counted
    # members that leave now): the next pass decides it whole
    leaving_groups = {r.group for r in short}
    held = staged.held | {r.binding for r in found}
    held |= {d.binding for d in decided if d.group is not None and d.group.name in leaving_groups}
    plans = {ref: p for ref, p in staged.plans.items() if p.group not in leaving_groups}
    return Enforcement(tuple(sorted(found, key=lambda r: r.binding)), plans, frozenset(held))


def rollbacks(
    snapshot: Snapshot,
    leaving: Iterable[str],
    decisions: Iterable[Decision],
    jobs: Mapping[str, JobRecord] | None = None,
) -> tuple[GroupRollback, ...]:
    """The members to take off their clusters this pass, in binding order. ``leaving``: the
    bindings the lifecycle reclaims this pass; the cycle's Preempt decisions leave too.

    Only a shortfall that is seen is acted on: a member leaving now, or one waiting (its binding
    unplaced: a template of the group, or the cycle's Pending or Rejected decision naming the
    group) while fewer than the minimum stay placed. A member whose binding is gone (a
    finished job deleted) is no reason to stop the others. ``jobs`` (the cycle's records,
    ``CycleResult.jobs``) names the group of a waiting member as the cycle read it, a group
    named only by the SchedulingPolicy's ``spec.groups`` too; without a record, its template
    names it or it is in none."""
    decided = list(decisions)
    gone = set(leaving) | {d.binding for d in decided if d.action == Action.PREEMPT}
    admitted: dict[str, int] = {}
    wanting: set[str] = set()  # groups a member of which is seen off its clusters now
    for d in decided:
        if d.group is None:
            continue
        if d.action == Action.ADMIT:
            admitted[d.group.name] = admitted.get(d.group.name, 0) + 1
        elif d.action in (Action.PENDING, Action.REJECT):
            wanting.add(d.group.name)
    staying: dict[str, list[str]] = {}
    minimum: dict[str, int] = {}
    for binding in snapshot.notable_bindings():  # the placed ones are among them
        name = binding.annotations.get(ann.ADMITTED_GROUP)
        if not name or not binding.clusters or binding.labels.get(ann.MANAGED) != "true":
            continue
        ref = binding_ref(binding)
        minimum[name] = max(minimum.get(name, 0), _int(binding.annotations, ann.ADMITTED_GROUP_MIN))
        if ref not in gone:  # a member re-admitted for a scale-up (READMIT) still runs
            staying.setdefault(name, []).append(ref)
        else:
            staying.setdefault(name, [])
            wanting.add(name)
    short = {n for n, r in staying.items() if r and len(r) + admitted.get(n, 0) < minimum[n]}
    records = jobs if jobs is not None else {}
    for binding in snapshot.bindings if short - wanting else ():
        # a member waiting (in backoff too) says the group is short
        if not binding.clusters and binding.labels.get(ann.MANAGED) == "true":
            record = records.get(binding_ref(binding))
            if record is not None:
                name = record.group
            else:
                name = group_label(snapshot.workload_for(binding))
            if name is not None:
                wanting.add(name)
    found: list[GroupRollback] = []
    for name in short & wanting:
        refs = staying[name]
        remaining = len(refs) + admitted.get(name, 0)
        found.extend(GroupRollback(ref, name, minimum[name], remaining) for ref in refs)
    return tuple(sorted(found, key=lambda r: r.binding))


def plan_rollback(
    rollback: GroupRollback | Unplan,
    binding: Mapping[str, Any],
    mode: Mode | str,
    now: dt.datetime,
    policy_version: str = "",
) -> Plan:
    """Off its clusters, suspended, back in its queue from ``now``; no attempt counted (an
    :class:`Unplan`: only the rolled-back plan removed, when the member still carries it)."""
    if isinstance(rollback, Unplan):
        return _unplan(rollback, binding)
    if not (binding.get("spec") or {}).get("clusters"):
        return Plan()
    message = rollback.message()
    notes: dict[str, Any] = {
        ann.ADMITTED_GROUP: None,
        ann.ADMITTED_GROUP_MIN: None,
        ann.GROUP_PLAN: None,
        ann.QUEUED_AT: ann.format_time(now),
        ann.ADMITTED_AT: None,
        ann.ADMITTED_TO: None,
        ann.RUNNING_SINCE: None,
        ann.QUEUE_POSITION: None,
        ann.NOMINATED_CLUSTER: None,
        ann.PENDING: f"{Reason.WAITING_FOR_GROUP}: {message}",
    }
    if policy_version:
        notes[ann.POLICY_VERSION] = policy_version
    status = (
        StatusUpdate("False", "FleetgateGroupRolledBack", message, scheduled=False)
        if Mode(mode) == Mode.BIND
        else None
    )
    return Plan(
        patch=patch_of(binding, notes, {"clusters": None, "suspension": {"scheduling": True}}),
        status=status,
        event=EventSpec("Warning", ROLLED_BACK, message),
    )


def _unplan(change: Unplan, binding: Mapping[str, Any]) -> Plan:
    notes = (binding.get("metadata") or {}).get("annotations") or {}
    plan = groupphase.read_plan(notes)
    if (binding.get("spec") or {}).get("clusters") or plan is None or plan.id != change.plan:
        return Plan()  # bound meanwhile, or planned again: not this plan's to remove
    return Plan(patch=patch_of(binding, {ann.GROUP_PLAN: None}, None))


def _int(notes: Mapping[str, str], key: str) -> int:
    try:
        return max(int(notes.get(key, "0")), 0)
    except ValueError:
        return 0  # a hand-edited record: no minimum to enforce
