"""Two-phase binding of a co-admission group (issue 21; docs/reconciler.md "Groups").

A group's members are separate bindings, written one by one, so a reconciler that dies (or a
write that fails, or a leadership lost) between two members' writes leaves part of the group
bound. To know afterwards what the group was meant to be, its admission is written in two
phases:

1. **plan**: every member the cycle admits with the group this pass gets ``fleetgate.io/group-plan``
   (:class:`MemberPlan`: the group, a plan id, this member's clusters, min, size and the policy
   version), each write with its resourceVersion precondition;
2. **bind**: only when every member's plan write went through (or found the plan already
   there) are the members bound, each Admit patch made on the object its plan write returned
   (the plan stays on the bound member: it names the admission it was bound under).

A plan write that fails (409, an error, the leadership lost) binds no member of the group this
pass. The plans already written are inert: no member is bound under them, and the next pass
writes a new plan (a new id) over them, or removes them (:class:`Unplan`) from members it does
not plan again. So a plan matters only once a member is bound under it.

:func:`stage` runs after every cycle (so on the first pass after a restart too), pure over the
snapshot and the cycle's decisions. A plan *half-applied* (a member bound under it, another
planned member not) is **completed** when the plan's policy version is the cycle's and the
cycle admits every unbound planned member on exactly its planned clusters: the members are
bound under the same plan id. A plan under which at least the group's minimum is bound stands
even when the rest cannot complete: those members were placed at once, as the group needs; the
unbound ones lose the plan and are decided afresh (as later members of a group at its minimum).
Otherwise the plan is **rolled back** whole: every member bound
under it is taken off its clusters (``groupplan.plan_rollback``) and no decision on the group
is enforced this pass; the unbound members keep the plan until no member is bound under it (a
rollback write that fails leaves the plan half-applied, to be rolled back again), then the next
pass decides the group afresh and removes or supersedes their plans. The cycle is not steered
towards the planned clusters: when it prefers others (the planned ones no longer fit, or score
lower now), the plan is rolled back rather than completed elsewhere, so a group never runs on
clusters no single pass chose for it.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from engine import annotations as ann
from engine.cycle import Action, Decision
from engine.enforce.lifecycle import binding_ref
from engine.fleet.model import BindingView, Snapshot

PLANNED = "GroupPlanned"  # what PassSummary.applied_to records for a phase-1 plan write


@dataclass(frozen=True, slots=True)
class MemberPlan:
    """One member's part of a group admission (``fleetgate.io/group-plan``)."""

    group: str
    id: str
    clusters: tuple[str, ...]
    min: int
    size: int
    version: str

    def text(self) -> str:
        return json.dumps(
            {
                "group": self.group,
                "id": self.id,
                "clusters": list(self.clusters),
                "min": self.min,
                "size": self.size,
                "version": self.version,
            },
            sort_keys=True,
            separators=(",", ":"),
        )


def read_plan(notes: Mapping[str, str]) -> MemberPlan | None:
    """The plan a binding carries; None when it carries none or one that cannot be read (a
    hand-edited plan binds nothing: it is superseded by the next plan)."""
    text = notes.get(ann.GROUP_PLAN)
    if not text:
        return None
    try:
        found = json.loads(text)
        clusters = found["clusters"]
        if not isinstance(clusters, list):
            return None
        return MemberPlan(
            str(found["group"]),
            str(found["id"]),
            tuple(str(c) for c in clusters),
            int(found["min"]),
            int(found["size"]),
            str(found["version"]),
        )
    except (ValueError, TypeError, KeyError):
        return None


@dataclass(frozen=True, slots=True)
class Unplan:
    """Remove a plan from a member that is not bound under it (its plan is rolled back)."""

    binding: str
    group: str
    plan: str


@dataclass(frozen=True, slots=True)
class Staged:
    """This pass's group admissions: the plan each admitted member gets before it is bound,
    the half-applied plans to roll back, and the decisions not enforced this pass."""

    plans: dict[str, MemberPlan] = field(default_factory=dict)  # binding ref → its plan
    rolled_back: tuple[str, ...] = ()  # bound members of half-applied plans, binding order
    unplanned: tuple[Unplan, ...] = ()  # inert plans to remove, binding order
    held: frozenset[str] = frozenset()  # bindings whose decisions wait for the next pass
    groups: dict[str, str] = field(default_factory=dict)  # rolled-back ref → its group


@dataclass
class _Applied:
    plan: MemberPlan
    bound: list[str] = field(default_factory=list)
    unbound: dict[str, MemberPlan] = field(default_factory=dict)


def stage(
    snapshot: Snapshot, decisions: Iterable[Decision], version: str, now: dt.datetime
) -> Staged:
    """What the group admissions of this pass write (see the module docstring); ``version``:
    the cycle's policy version, which every plan written now records."""
    decided = list(decisions)
    admits: dict[str, list[Decision]] = {}
    for d in decided:
        if d.action == Action.ADMIT and d.group is not None:
            admits.setdefault(d.group.name, []).append(d)
    written = _written(snapshot)
    if not admits and not written:
        return Staged()
    by_ref = {d.binding: d for d in decided}
    rolled: list[str] = []
    owner: dict[str, str] = {}
    failed: set[str] = set()
    reuse: dict[str, str] = {}  # group → the id of the half-applied plan completed now
    for (group, plan_id), found in sorted(written.items()):
        if not (found.bound and found.unbound):
            continue  # complete, or inert (nobody bound under it)
        if _completes(found, by_ref, version) and group not in failed:
            reuse[group] = plan_id
            continue
        if len(found.bound) >= found.plan.min > 0:
            continue  # bound at its minimum at once: the admission stands, the rest wait
        failed.add(group)
        reuse.pop(group, None)
        rolled += found.bound
        owner |= dict.fromkeys(found.bound, group)
    plans: dict[str, MemberPlan] = {}
    for group, members in admits.items():
        if group in failed:
            continue
        plan_id = reuse.get(group) or _new_id(group, version, now, members)
        for d in members:
            size, minimum = (d.group.size, d.group.min) if d.group else (0, 0)
            clusters = tuple(c.name for c in d.clusters)
            plans[d.binding] = MemberPlan(group, plan_id, clusters, minimum, size, version)
    # a plan nobody is bound under is removed from a member not planned again now; the unbound
    # members of a plan rolled back keep it until its bound members are off their clusters
    unplanned = [
        Unplan(ref, group, plan_id)
        for (group, plan_id), found in written.items()
        if not found.bound or (group not in failed and len(found.bound) >= found.plan.min > 0)
        for ref in found.unbound
        if ref not in plans
    ]
    held = {d.binding for d in decided if d.group is not None and d.group.name in failed}
    return Staged(
        plans,
        tuple(sorted(set(rolled))),
        tuple(sorted(unplanned, key=lambda u: u.binding)),
        frozenset(held | set(rolled) | {u.binding for u in unplanned}),
        owner,
    )


def _written(snapshot: Snapshot) -> dict[tuple[str, str], _Applied]:
    """(group, plan id) → the members carrying that plan: bound under it, or not bound."""
    found: dict[tuple[str, str], _Applied] = {}
    for binding in snapshot.notable_bindings():  # every one with a plan is among them
        if ann.GROUP_PLAN not in binding.annotations or not _managed(binding):
            continue
        plan = read_plan(binding.annotations)
        if plan is None:
            continue
        entry = found.setdefault((plan.group, plan.id), _Applied(plan))
        ref = binding_ref(binding)
        if _bound_under(binding, plan):
            entry.bound.append(ref)
        elif not binding.clusters:
            entry.unbound[ref] = plan
    return found


def _bound_under(binding: BindingView, plan: MemberPlan) -> bool:
    """Placed under this admission: on clusters, with the group's record written by the
    same Admit patch (a binding placed otherwise is not part of the plan)."""
    return bool(binding.clusters) and binding.annotations.get(ann.ADMITTED_GROUP) == plan.group


def _completes(found: _Applied, decisions: Mapping[str, Decision], version: str) -> bool:
    if found.plan.version != version or not version:
        return False
    for ref, plan in found.unbound.items():
        d = decisions.get(ref)
        if d is None or d.action != Action.ADMIT or d.group is None:
            return False
        if d.group.name != plan.group or tuple(c.name for c in d.clusters) != plan.clusters:
            return False
    return True


def _new_id(group: str, version: str, now: dt.datetime, members: list[Decision]) -> str:
    """A plan id from what the plan says: the same admission decided at the same time gets
    the same id (its plan writes find it written), any other a new one."""
    text = "\n".join(
        [
            group,
            version,
            ann.format_time(now),
            *sorted(f"{d.binding}={','.join(c.name for c in d.clusters)}" for d in members),
        ]
    )
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _managed(binding: BindingView) -> bool:
    return binding.labels.get(ann.MANAGED) == "true"
