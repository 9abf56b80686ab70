"""Everything one reconciler pass writes, from the snapshot, the policies and the cycle's result:
:func:`plan_pass`. Pure: the reconciler (``reconciler.loop``) sends the writes in the order
:class:`PassPlan` lists them, each planned on the binding as it is then
(:func:`engine.enforce.plan.plan` and its siblings turn each item into merge patches).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field

from engine.cycle import CycleResult, Decision
from engine.enforce import groupplan, lifecycle
from engine.enforce.groupphase import MemberPlan, Unplan
from engine.enforce.groupplan import GroupRollback
from engine.enforce.lifecycle import Confirm, ObjectLookup, Reclaim, Started
from engine.fleet.model import Snapshot
from engine.policy.policyset import PolicySet


@dataclass(frozen=True, slots=True)
class PassPlan:
    """A pass's writes, in the order they are sent."""

    # 1. the lifecycle: reclaims (requeue, give up) first, then Scheduled confirmations and
    #    jobs found running; before the decisions, so a reclaimed job leaves before its room
    #    is given to another
    transitions: tuple[Started | Reclaim | Confirm, ...] = ()
    # 2. groups placed below their minimum, or whose half-applied plan cannot complete
    rollbacks: tuple[GroupRollback | Unplan, ...] = ()
    # 3. the plan of each member admitted with a group (phase 1), before any of its Admits
    plans: Mapping[str, MemberPlan] = field(default_factory=dict)
    # 4. the cycle's decisions to enforce: not those on bindings the lifecycle reclaims or a
    #    group rollback holds (made on a version that is replaced: the next pass decides them)
    decisions: tuple[Decision, ...] = ()
    held: int = 0  # decisions of the cycle left to the next pass
    due: dt.datetime | None = None  # when time alone next changes what a pass decides


def plan_pass(
    snapshot: Snapshot,
    policies: PolicySet,
    result: CycleResult,
    now: dt.datetime,
    objects: ObjectLookup,
) -> PassPlan:
    """What the pass that ran ``result``'s cycle on ``snapshot`` at ``now`` writes;
    ``objects(ref)`` is a binding's object (the members' status Karmada aggregates)."""
    changes = lifecycle.review(snapshot, policies, now, objects)
    grouped = groupplan.enforcement(
        snapshot, changes.reclaimed, result.decisions, result.policy_version, now, result.jobs
    )
    skip = changes.reclaimed | grouped.held
    # the bindings of this pass's Started and Confirm writes that the cycle decides about too
    written = {c.binding for c in changes.confirms} | {s.binding for s in changes.started}
    decided = [d.binding for d in result.decisions if d.binding in written] if written else []
    enforced = (
        tuple(d for d in result.decisions if d.binding not in skip) if skip else result.decisions
    )
    return PassPlan(
        transitions=changes.transitions([*decided, *skip]),
        rollbacks=grouped.rollbacks,
        plans=grouped.plans,
        decisions=enforced,
        held=len(result.decisions) - len(enforced),
        due=changes.due,
    )
