"""Co-admission groups enforced across passes: a group is placed at least ``min`` strong, or
not at all (docs/multi-cluster-training.md, docs/reconciler.md "Groups").

The cycle decides a group whole (``engine.cycle.groups``), but its members are separate
bindings, written one by one: a reconciler that dies between two members' writes, a member's
write that fails, a member that fails on its cluster, or a member preempted, can leave fewer
members placed than the group's minimum. The record of a group admission lives on each member
it binds (``reconciler.plan``: written with the Admit patch itself, so a member is never
placed without it): ``fleetgate.io/admitted-group`` (the group's name) and
``fleetgate.io/admitted-group-min`` (its minimum at the admission).

:func:`rollbacks` is the check after every pass's cycle (so also the first pass after a
restart), pure over the snapshot, the lifecycle's reclaims and the cycle's decisions: for each
group with members placed under that record, the members that stay placed this pass (not
reclaimed, not preempted) plus the members the cycle admits now are counted. Fewer than the
minimum, and more than none → every member that stays placed is taken off its clusters again
(:class:`GroupRollback`, planned by :func:`plan_rollback`): suspended, back in its queue
without counting an attempt (like a preemption; a member that failed carries its own attempt
and backoff). So a half-written admission is completed in the next pass when the rest still
fits (the cycle counts the placed members towards the minimum and admits the others), or rolled
back; a member failing later requeues the group unless the members still running meet the
minimum.

Choice: the admission is one write per member (the record rides on the Admit patch) rather
than a separate plan write on every member first; the record on the placed members is what a
restarted reconciler needs, and the unplaced members need none (the cycle decides them again).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from engine import annotations as ann
from engine.cycle import groups
from engine.cycle.model import Decision
from engine.cycle.reasons import Action, Reason
from engine.fleet.model import Snapshot
from reconciler.lifecycle import binding_ref
from reconciler.plan import EventSpec, Mode, Plan, StatusUpdate, patch_of

ROLLED_BACK = "GroupRolledBack"  # what PassSummary.applied_to records for a rollback write


@dataclass(frozen=True, slots=True)
class GroupRollback:
    """Take a placed member off its clusters: its group has fewer than ``minimum`` placed."""

    binding: str
    group: str
    minimum: int
    remaining: int  # members that would stay placed without the rollback

    def message(self) -> str:
        return (
            f"group {self.group}: {self.remaining} of at least {self.minimum} members placed; "
            "the group is requeued whole"
        )


def rollbacks(
    snapshot: Snapshot, leaving: Iterable[str], decisions: Iterable[Decision]
) -> tuple[GroupRollback, ...]:
    """The members to take off their clusters this pass, in binding order. ``leaving``: the
    bindings the lifecycle reclaims this pass; the cycle's Preempt decisions leave too.

    Only a shortfall that is seen is acted on: a member leaving now, or one waiting (its binding
    unplaced: a template of the group, or the cycle's Pending or Rejected decision naming the
    group) while fewer than the minimum stay placed. A member whose binding is gone (a
    finished job deleted) is no reason to stop the others."""
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
    for binding in snapshot.bindings:
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
    if not staying:
        return ()
    for binding in snapshot.bindings:  # a member waiting (in backoff too) says the group is short
        if not binding.clusters and binding.labels.get(ann.MANAGED) == "true":
            key = groups.key_of(snapshot.workload_for(binding))
            if key is not None:
                wanting.add(groups.label(key))
    found: list[GroupRollback] = []
    for name, refs in staying.items():
        remaining = len(refs) + admitted.get(name, 0)
        if refs and remaining < minimum[name] and name in wanting:
            found.extend(GroupRollback(ref, name, minimum[name], remaining) for ref in refs)
    return tuple(sorted(found, key=lambda r: r.binding))


def plan_rollback(
    rollback: GroupRollback,
    binding: Mapping[str, Any],
    mode: Mode | str,
    now: dt.datetime,
    policy_version: str = "",
) -> Plan:
    """Off its clusters, suspended, back in its queue from ``now``; no attempt counted."""
    if not (binding.get("spec") or {}).get("clusters"):
        return Plan()
    message = rollback.message()
    notes: dict[str, Any] = {
        ann.ADMITTED_GROUP: None,
        ann.ADMITTED_GROUP_MIN: None,
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


def _int(notes: Mapping[str, str], key: str) -> int:
    try:
        return max(int(notes.get(key, "0")), 0)
    except ValueError:
        return 0  # a hand-edited record: no minimum to enforce
