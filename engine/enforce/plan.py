"""The write plan for one decision: which merge patches and which Event, as pure values.

``plan(decision, binding, mode, now)`` reads only its arguments; :mod:`reconciler.apply` sends
what it returns. Every patch carries ``metadata.resourceVersion`` = the version the decision was
made on, so the API server answers 409 when the binding changed since it was read. Patches name
only the fields fleetgate owns (``spec.clusters``, ``spec.suspension.scheduling``, fleetgate's
annotations, the ``Scheduled`` condition); ``spec.placement`` is never written.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from engine import annotations as ann
from engine import untrusted
from engine.cycle import Action, Decision, Reason, pending_note
from engine.enforce.lifecycle import Confirm, Reclaim, Started
from engine.errors import FleetgateError

RESIZABLE_KINDS = frozenset(
    {
        ("batch/v1", "Job"),
        ("apps/v1", "Deployment"),
        ("apps/v1", "ReplicaSet"),
        ("apps/v1", "StatefulSet"),
    }
)
"""Templates Karmada divides between clusters with per-cluster replicas (engine.workloads.native
marks them ``resizable``); every other kind goes to one cluster and gets no replica count."""

# The fields of a (Cluster)ResourceBinding the plans write, besides metadata (and the webhook
# writes spec.suspension.scheduling). A field the served CRD's schema lacks is pruned by the API
# server without an error, so `fleetgate preflight` checks each is there.
BINDING_FIELDS = (
    "spec.clusters[].name",
    "spec.clusters[].replicas",
    "spec.suspension.scheduling",
    "status.conditions[].type",
    "status.conditions[].status",
    "status.conditions[].reason",
    "status.conditions[].message",
    "status.conditions[].lastTransitionTime",
    "status.conditions[].observedGeneration",
    "status.schedulerObservedGeneration",
    "status.lastScheduledTime",
)

SCHEDULED = "Scheduled"
CONDITION_MESSAGE_LIMIT = 32768  # the CRD's maxLength for a condition message


class Mode(StrEnum):
    BIND = "bind"
    """fleetgate writes ``spec.clusters``; the binding stays suspended for Karmada's scheduler."""
    RELEASE = "release"
    """fleetgate flips ``spec.suspension.scheduling`` to false; Karmada's scheduler places it."""


class PlanError(FleetgateError):
    """The decision cannot be enforced on this binding as it is (a caller's bug, not a race)."""


@dataclass(frozen=True, slots=True)
class StatusUpdate:
    """The ``Scheduled`` condition to set once the spec patch is in (bind mode only)."""

    status: str  # "True" | "False"
    reason: str
    message: str
    scheduled: bool  # also set schedulerObservedGeneration and lastScheduledTime


@dataclass(frozen=True, slots=True)
class EventSpec:
    type: str  # Normal | Warning
    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class Plan:
    """``patch`` (None: nothing to write), then ``status`` on the status subresource, then
    ``event`` on the binding."""

    patch: dict[str, Any] | None = None
    status: StatusUpdate | None = None
    event: EventSpec | None = None


def plan(
    decision: Decision,
    binding: Mapping[str, Any],
    mode: Mode | str,
    now: dt.datetime,
    policy_version: str = "",
    resizable: bool | None = None,
) -> Plan:
    """What enforcing ``decision`` on ``binding`` (the object it was made on) writes."""
    mode = Mode(mode)
    if decision.action == Action.ADMIT:
        return _admit(decision, binding, mode, now, policy_version, resizable)
    if decision.action == Action.PREEMPT:
        return _preempt(decision, binding, mode, now, policy_version)
    if decision.action in (Action.PENDING, Action.REJECT):
        return _pending(decision, binding, policy_version)
    raise PlanError(f"{decision.binding}: no plan for action {decision.action!r}")


def _admit(
    decision: Decision,
    binding: Mapping[str, Any],
    mode: Mode,
    now: dt.datetime,
    policy_version: str,
    resizable: bool | None,
) -> Plan:
    spec = binding.get("spec") or {}
    suspended = bool((spec.get("suspension") or {}).get("scheduling"))
    if not decision.clusters:
        raise PlanError(f"{decision.binding}: an Admit decision without clusters")
    names = [c.name for c in decision.clusters]
    notes: dict[str, Any] = {
        ann.ADMITTED_AT: ann.format_time(now),
        ann.ADMITTED_TO: ",".join(names),
        ann.PENDING: None,
        ann.QUEUE_POSITION: None,
        ann.READMIT: None,
        ann.NOMINATED_CLUSTER: None,
        ann.RUNNING_SINCE: None,  # a re-admission (scale-up) has its own startup timeout
    }
    if policy_version:
        notes[ann.POLICY_VERSION] = policy_version
    if decision.group is not None:  # the record engine.enforce.groupplan keeps the group whole by
        notes[ann.ADMITTED_GROUP] = decision.group.name
        notes[ann.ADMITTED_GROUP_MIN] = str(decision.group.min)
    else:  # admitted alone: a group plan left from before (engine.enforce.groupphase) is stale
        notes[ann.GROUP_PLAN] = None
    event = EventSpec("Normal", "Admitted", _admitted_text(names, decision.message))
    if mode == Mode.RELEASE:
        if not suspended:
            return Plan()  # already released: Karmada's scheduler owns it now
        return Plan(
            patch=_patch(binding, notes, {"suspension": {"scheduling": False}}), event=event
        )
    current = (binding.get("metadata") or {}).get("annotations") or {}
    if spec.get("clusters") and ann.READMIT not in current:
        # a binding the webhook re-suspended for a scale-up (READMIT) is re-admitted in place
        raise PlanError(f"{decision.binding}: already placed; adopt it, never admit it again")
    if not suspended:
        raise PlanError(f"{decision.binding}: not suspended; Karmada's scheduler may place it")
    split = len(decision.clusters) > 1 or (
        resizable if resizable is not None else _resizable(spec.get("resource") or {})
    )
    targets = [
        {"name": c.name, "replicas": c.replicas} if split else {"name": c.name}
        for c in decision.clusters
    ]
    status = StatusUpdate(
        "True",
        "FleetgateAdmitted",
        f"fleetgate admitted the binding to {', '.join(names)}: {decision.message}",
        scheduled=True,
    )
    return Plan(patch=_patch(binding, notes, {"clusters": targets}), status=status, event=event)


def _preempt(
    decision: Decision,
    binding: Mapping[str, Any],
    mode: Mode,
    now: dt.datetime,
    policy_version: str,
) -> Plan:
    """Evict the victim: no clusters (Karmada's binding controller removes every Work of a
    cluster that left ``spec.clusters``), suspended again, back in its queue from ``now``.
    A preemption is not a failure: ``attempts`` and the backoff are left alone; it is counted
    in ``fleetgate.io/preemptions`` (``spec.preemption.maxPerJob``)."""
    notes: dict[str, Any] = {
        ann.QUEUED_AT: ann.format_time(now),
        ann.ADMITTED_AT: None,
        ann.ADMITTED_TO: None,
        ann.RUNNING_SINCE: None,
        ann.QUEUE_POSITION: None,
        ann.PENDING: f"{Reason.PREEMPTED}: {decision.message}",
        ann.ADMITTED_GROUP: None,
        ann.ADMITTED_GROUP_MIN: None,
        ann.GROUP_PLAN: None,
    }
    if policy_version:
        notes[ann.POLICY_VERSION] = policy_version
    said = ((binding.get("metadata") or {}).get("annotations") or {}).get(ann.PREEMPTIONS, "")
    notes[ann.PREEMPTIONS] = str(int(said) + 1 if str(said).isdigit() else 1)
    spec_patch = {"clusters": None, "suspension": {"scheduling": True}}
    by = f" for {decision.preemptor}" if decision.preemptor else ""
    status = (
        StatusUpdate("False", "FleetgatePreempted", f"preempted{by}: {decision.message}", False)
        if mode == Mode.BIND
        else None
    )
    event = EventSpec("Warning", "Preempted", f"preempted{by}: {decision.message}")
    return Plan(patch=_patch(binding, notes, spec_patch), status=status, event=event)


def _pending(decision: Decision, binding: Mapping[str, Any], policy_version: str) -> Plan:
    """The reason and a message without live numbers or positions (``explain.pending_note``),
    with an Event when the job is first queued (``Queued``), rejected (``Rejected``) or waits
    for another reason (``Pending``); written only when they differ from what the binding
    carries: a waiting job's binding is
    not rewritten because its queue moved or the fleet's usage changed (the policy version
    rides along with a write, never causes one). The live message and the position are the
    API's (``/api/v1/jobs``); a ``queue-position`` left by an older fleetgate is removed."""
    wanted: dict[str, str | None] = {
        ann.PENDING: pending_note(decision),
        ann.QUEUE_POSITION: None,
    }
    if decision.reason == Reason.PREEMPTING and decision.clusters:
        wanted[ann.NOMINATED_CLUSTER] = decision.clusters[0].name
    current = (binding.get("metadata") or {}).get("annotations") or {}
    changes: dict[str, Any] = {k: v for k, v in wanted.items() if current.get(k) != v}
    if not changes:
        return Plan()
    if policy_version and current.get(ann.POLICY_VERSION) != policy_version:
        changes[ann.POLICY_VERSION] = policy_version
    event = None
    said = str(current.get(ann.PENDING, "")).partition(":")[0]
    if decision.action == Action.REJECT and ann.PENDING in changes:
        event = EventSpec("Warning", "Rejected", f"{decision.reason}: {decision.message}")
    elif ann.PENDING not in current:  # the first Pending decision since it (re)entered a queue
        place = f" at position {decision.position}" if decision.position is not None else ""
        event = EventSpec(
            "Normal",
            "Queued",
            f"queued in {decision.queue or '?'}{place}: {decision.reason}: {decision.message}",
        )
    elif said != decision.reason:  # it waits for another reason
        event = EventSpec("Normal", "Pending", f"{decision.reason}: {decision.message}")
    return Plan(patch=_patch(binding, changes, None), event=event)


def plan_transition(
    change: Started | Reclaim | Confirm,
    binding: Mapping[str, Any],
    mode: Mode | str,
    now: dt.datetime,
    policy_version: str = "",
) -> Plan:
    """What a lifecycle transition (``engine.enforce.lifecycle``) writes on ``binding``."""
    if isinstance(change, Confirm):
        return _confirm(change, binding, Mode(mode))
    if isinstance(change, Started):
        current = (binding.get("metadata") or {}).get("annotations") or {}
        if ann.RUNNING_SINCE in current or not (binding.get("spec") or {}).get("clusters"):
            return Plan()
        names = ", ".join(change.clusters)
        notes = {ann.RUNNING_SINCE: ann.format_time(change.since)}
        return Plan(
            patch=_patch(binding, notes, None),
            event=EventSpec("Normal", "Running", f"running on {names}"),
        )
    return _reclaim(change, binding, Mode(mode), policy_version)


def _confirm(change: Confirm, binding: Mapping[str, Any], mode: Mode) -> Plan:
    """The ``Scheduled=True`` condition and the Admitted Event of an admission whose status
    write did not go through (bind mode: in release mode Karmada's scheduler sets the
    condition). The spec patch only carries the resourceVersion precondition."""
    conditions = (binding.get("status") or {}).get("conditions") or []
    scheduled = any(c.get("type") == SCHEDULED and c.get("status") == "True" for c in conditions)
    if mode == Mode.RELEASE or scheduled or not (binding.get("spec") or {}).get("clusters"):
        return Plan()
    names = ", ".join(change.clusters)
    return Plan(
        patch=_patch(binding, {}, None),
        status=StatusUpdate(
            "True", "FleetgateAdmitted", f"fleetgate admitted the binding to {names}", True
        ),
        event=EventSpec("Normal", "Admitted", f"admitted to {names}"),
    )


def _reclaim(change: Reclaim, binding: Mapping[str, Any], mode: Mode, policy_version: str) -> Plan:
    """Off its clusters, suspended, back in its queue from ``queued_at`` after its backoff,
    the failing clusters excluded; or (given up) off its clusters for good, with the reason."""
    if not (binding.get("spec") or {}).get("clusters"):
        return Plan()  # already off its clusters
    summary = change.summary()
    group = ((binding.get("metadata") or {}).get("annotations") or {}).get(ann.ADMITTED_GROUP)
    told = f"{summary} (a member of group {group}, admitted with it)" if group else summary
    notes: dict[str, Any] = {
        ann.ATTEMPTS: str(change.attempts),
        ann.EXCLUDED_CLUSTERS: ",".join(
            f"{name}={ann.format_time(until)}" for name, until in change.excluded
        ),
        ann.QUEUED_AT: ann.format_time(change.queued_at),
        ann.ADMITTED_AT: None,
        ann.ADMITTED_TO: None,
        ann.RUNNING_SINCE: None,
        ann.READMIT: None,
        ann.QUEUE_POSITION: None,
        ann.NOMINATED_CLUSTER: None,
        ann.ADMITTED_GROUP: None,
        ann.ADMITTED_GROUP_MIN: None,
        ann.GROUP_PLAN: None,
    }
    if change.backoff_until is None:
        notes |= {ann.GAVE_UP: summary, ann.BACKOFF_UNTIL: None}
        notes[ann.PENDING] = f"{Reason.GAVE_UP}: {summary}"
        event = EventSpec("Warning", "GaveUp", told)
        status = StatusUpdate("False", "FleetgateGaveUp", summary, scheduled=False)
    else:
        until = ann.format_time(change.backoff_until)
        notes[ann.BACKOFF_UNTIL] = until
        # what the cycle's Backoff decision says (``engine.cycle.explain.for_backoff``)
        notes[ann.PENDING] = (
            f"{Reason.BACKOFF}: requeued after attempt {change.attempts}; "
            f"not considered before {until}"
        )
        event = EventSpec("Warning", "Requeued", told)
        status = StatusUpdate("False", "FleetgateRequeued", summary, scheduled=False)
    if policy_version:
        notes[ann.POLICY_VERSION] = policy_version
    spec_patch = {"clusters": None, "suspension": {"scheduling": True}}
    return Plan(
        patch=_patch(binding, notes, spec_patch),
        status=status if mode == Mode.BIND else None,
        event=event,
    )


def _patch(
    binding: Mapping[str, Any], notes: Mapping[str, Any], spec: Mapping[str, Any] | None
) -> dict[str, Any]:
    meta = binding.get("metadata") or {}
    current = meta.get("annotations") or {}
    # deleting an absent key is a no-op on the server; leaving it out keeps the patch readable
    notes = {k: v for k, v in notes.items() if v is not None or k in current}
    body: dict[str, Any] = {
        "metadata": {"resourceVersion": str(meta.get("resourceVersion", "")), "annotations": notes}
    }
    if spec is not None:
        body["spec"] = dict(spec)
    return body


patch_of = _patch  # for the other write plans of the package (engine.enforce.groupplan)


def _resizable(resource: Mapping[str, Any]) -> bool:
    return (resource.get("apiVersion"), resource.get("kind")) in RESIZABLE_KINDS


def status_patch(
    binding: Mapping[str, Any], update: StatusUpdate, now: dt.datetime
) -> dict[str, Any]:
    """The merge patch for the status subresource of ``binding`` (as the spec patch left it).

    A merge patch replaces a list whole, so the patch carries every condition the binding has,
    with ``Scheduled`` replaced in place (or appended), and the binding's resourceVersion as
    the precondition: a condition someone else wrote in between makes it a 409, never lost.
    """
    meta = binding.get("metadata") or {}
    status = binding.get("status") or {}
    generation = int(meta.get("generation") or 0)
    stamp = ann.format_time(now)
    old = next((c for c in status.get("conditions") or [] if c.get("type") == SCHEDULED), None)
    changed = old is None or old.get("status") != update.status
    condition = {
        "type": SCHEDULED,
        "status": update.status,
        "reason": update.reason,
        "message": untrusted.echo(update.message, CONDITION_MESSAGE_LIMIT - 40),
        "lastTransitionTime": stamp if changed else old.get("lastTransitionTime", stamp),
        "observedGeneration": generation,
    }
    conditions = [
        condition if c.get("type") == SCHEDULED else c for c in status.get("conditions") or []
    ]
    if old is None:
        conditions.append(condition)
    body: dict[str, Any] = {"conditions": conditions}
    if update.scheduled:
        body["schedulerObservedGeneration"] = generation
        body["lastScheduledTime"] = stamp
    return {"metadata": {"resourceVersion": str(meta.get("resourceVersion", ""))}, "status": body}


def _admitted_text(names: list[str], said: str) -> str:
    """The Admitted Event's message: the cycle's own when it already says where (``admitted to
    gpu-east at cost 39.2``, ``split across …``), else the clusters and what the cycle said."""
    if said.startswith(("admitted to ", "split across ")):
        return said
    where = f"admitted to {', '.join(names)}"
    return f"{where}: {said}" if said else where
