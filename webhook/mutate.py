"""``/mutate/resourcebindings``: hold every new ResourceBinding in scope until fleetgate admits it.

Decision table (CREATE and UPDATE of ResourceBinding / ClusterResourceBinding):

==========================================  ================================================
binding                                     patch
==========================================  ================================================
out of scope (SchedulingPolicy ``scope``)   none
in scope, not admitted                      suspend scheduling, label managed, annotate the
                                            policy version and queued-at; none when already
                                            suspended and labelled
in scope, placed (``spec.clusters``) but    adopt: suspend, label managed, annotate
not admitted by fleetgate                   ``admitted-at`` (when it was scheduled, else now)
                                            and ``admitted-to`` (its clusters)
admitted (``fleetgate.io/admitted-at``),    suspend again, annotate ``fleetgate.io/readmit``
UPDATE whose demand grew vs oldObject       and a new queued-at (the job waits for re-admission)
admitted, waiting for re-admission, and     suspend again
someone cleared the suspension
admitted otherwise                          none
UPDATE by anyone but fleetgate or           fleetgate's label and annotations written back
``system:masters`` changing fleetgate's     (``webhook.claims``), then decided as above
marks
created (CREATE) already carrying           the admission is the creator's claim, not
``fleetgate.io/admitted-at``                fleetgate's (fleetgate admits bindings that
                                            exist): its admission annotations are removed,
                                            then it is held, or adopted if placed
==========================================  ================================================

A ``scope`` expression that fails at run time counts as in scope: holding a binding that should
have passed is recoverable (fleetgate admits it), letting through one that should have waited is
not.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
from collections.abc import Collection, Mapping
from typing import Any

from engine import annotations as ann
from engine.policy import cel
from engine.policy.bounded import BoundedMemo
from engine.policy.memo import MemoEvaluator
from engine.policy.model import SchedulingPolicy
from engine.policy.policyset import PolicySet
from webhook import binding as rb
from webhook import claims
from webhook.review import AdmissionRequest, ReviewError, Verdict, require_kind

log = logging.getLogger(__name__)

ENDPOINT = "/mutate/resourcebindings"
GROUP = "work.karmada.io"
KINDS = ("ResourceBinding", "ClusterResourceBinding")
# the memo of the scope expression's results, one per policy version: entries, estimated bytes,
# bytes an entry (``engine.policy.bounded``)
SCOPE_MEMO = (10_000, 8 << 20, 64 << 10)


def mutate_binding(
    request: AdmissionRequest,
    policies: PolicySet,
    now: dt.datetime,
    writers: Collection[str] = claims.DEFAULT_WRITERS,
) -> Verdict:
    require_kind(request, GROUP, KINDS, ENDPOINT)
    if request.operation not in ("CREATE", "UPDATE") or request.object is None:
        return Verdict(True, "allowed", audit={"decision": "ignored-operation"})
    obj = request.object
    restore, restored, undone = claims.guard(request, writers)  # fleetgate's marks are its own
    warnings: tuple[str, ...] = ()
    if restored is not None:
        obj = restored
        request = dataclasses.replace(request, object=restored)
        warnings = (claims.warning(request, undone),)
        log.warning("%s", warnings[0])
    facts = rb.read_facts(obj)
    scope = _in_scope(policies, facts, obj, now)
    events: list[tuple[str, str]] = [("patch", "claims-restored")] if restore else []
    if isinstance(scope, cel.CelError):
        events.append(("scope_error", ""))
        warnings += (f"fleetgate scope expression failed, binding held to be safe: {scope}",)
        log.warning("scope of %s/%s failed (%s); holding it", facts.namespace, facts.name, scope)
    elif not scope:
        if restore:
            return Verdict(True, "patched", patch=tuple(restore), warnings=warnings,
                           audit={"decision": "out-of-scope, claims-restored"},
                           events=tuple(events))  # fmt: skip
        return Verdict(True, "allowed", audit={"decision": "out-of-scope"})

    version = policies.version
    if request.operation == "CREATE" and facts.annotation(ann.ADMITTED_AT) is not None:
        patch, decision = _claimed(facts, version, now)
    elif facts.annotation(ann.ADMITTED_AT) is not None:
        patch, decision = _admitted(request, facts, version, now)
    elif facts.clusters and facts.annotation(ann.READMIT) is None:
        patch, decision = _adopt(facts, version, now)
    else:
        patch, decision = _hold(facts, version, now)
    if patch:
        events.append(("patch", decision))
    patch = restore + patch
    return Verdict(
        True,
        "patched" if patch else "allowed",
        patch=tuple(patch),
        warnings=warnings,
        audit={"decision": decision},
        events=tuple(events),
    )


def _hold(facts: rb.BindingFacts, version: str, now: dt.datetime) -> tuple[rb.Patch, str]:
    """A binding waiting in its queue: suspended, labelled and stamped."""
    managed = facts.label(ann.MANAGED) == "true"
    if facts.scheduling_suspended and managed:
        return [], "already-held"
    notes = {ann.POLICY_VERSION: version}
    queued = facts.annotation(ann.QUEUED_AT)
    if queued is None or ann.parse_time(queued) is None:
        notes[ann.QUEUED_AT] = ann.format_time(now)
    patch = rb.suspend(facts)
    patch += rb.set_entries(facts.labels, "labels", {ann.MANAGED: "true"})
    patch += rb.set_entries(facts.annotations, "annotations", notes)
    return patch, "held"


# What fleetgate writes when it admits a binding (engine.enforce.plan), always to a binding that
# exists; on a CREATE they are whatever the creator wrote.
ADMISSION_NOTES = (
    ann.ADMITTED_AT,
    ann.ADMITTED_TO,
    ann.READMIT,
    ann.RUNNING_SINCE,
    ann.ADMITTED_GROUP,
    ann.ADMITTED_GROUP_MIN,
    ann.GROUP_PLAN,
)


def _claimed(facts: rb.BindingFacts, version: str, now: dt.datetime) -> tuple[rb.Patch, str]:
    """A binding created already "admitted": fleetgate never creates bindings, so the claim is
    dropped, and the binding is decided as one created without it: held in its queue, or, if
    it is created placed (a restore), adopted where it runs, as of now."""
    patch: rb.Patch = [
        {"op": "remove", "path": f"/metadata/annotations/{rb.escape(key)}"}
        for key in ADMISSION_NOTES
        if facts.annotation(key) is not None
    ]
    notes = {k: v for k, v in (facts.annotations or {}).items() if k not in ADMISSION_NOTES}
    unclaimed = dataclasses.replace(facts, annotations=notes)
    decide = _adopt if facts.clusters else _hold
    rest, decision = decide(unclaimed, version, now)
    log.warning("%s/%s was created claiming an admission: %s", facts.namespace, facts.name,
                decision)  # fmt: skip
    return patch + rest, f"claimed-admission-removed, {decision}"


def _adopt(facts: rb.BindingFacts, version: str, now: dt.datetime) -> tuple[rb.Patch, str]:
    """A binding already placed that fleetgate did not admit (placed before fleetgate was
    installed, or its annotations lost to a ``kubectl apply`` or a restore): recorded as
    admitted where it runs, never queued again. The suspension keeps Karmada's scheduler off
    it; the binding controller still runs it on ``spec.clusters``."""
    since = ann.parse_time(facts.scheduled_at) if facts.scheduled_at else None
    notes = {
        ann.ADMITTED_AT: ann.format_time(since or now),
        ann.ADMITTED_TO: ",".join(facts.clusters),
        ann.POLICY_VERSION: version,
    }
    patch = rb.suspend(facts)
    patch += rb.set_entries(facts.labels, "labels", {ann.MANAGED: "true"})
    patch += rb.set_entries(facts.annotations, "annotations", notes)
    log.info("adopted %s/%s, placed on %s", facts.namespace, facts.name, notes[ann.ADMITTED_TO])
    return patch, "adopted"


def _admitted(
    request: AdmissionRequest, facts: rb.BindingFacts, version: str, now: dt.datetime
) -> tuple[rb.Patch, str]:
    """An admitted binding: held again only when its demand grew (or its re-hold was undone)."""
    if facts.annotation(ann.READMIT) is not None:
        patch = rb.suspend(facts)
        return patch, "readmit-held" if patch else "awaiting-readmission"
    if request.operation != "UPDATE" or request.old_object is None:
        return [], "admitted"
    new, old = rb.demand(request.object or {}), _old_demand(request.old_object)
    if new is None or old is None or not rb.grew(old, new):
        return [], "admitted"
    stamp = ann.format_time(now)
    patch = rb.suspend(facts)
    patch += rb.set_entries(facts.labels, "labels", {ann.MANAGED: "true"})
    patch += rb.set_entries(
        facts.annotations,
        "annotations",
        {ann.READMIT: stamp, ann.QUEUED_AT: stamp, ann.POLICY_VERSION: version},
    )
    log.info(
        "demand of admitted %s/%s grew (%s); held for re-admission",
        facts.namespace,
        facts.name,
        ", ".join(rb.grew(old, new)),
    )
    return patch, "readmit"


def _old_demand(old: Mapping[str, Any]) -> Any:
    """The old object's demand; a malformed old object counts as unknown, not as an error."""
    try:
        return rb.demand(old)
    except ReviewError:
        return None


def _in_scope(
    policies: PolicySet, facts: rb.BindingFacts, obj: Mapping[str, Any], now: dt.datetime
) -> bool | cel.CelError:
    """The scope, memoised with the policy set by what it reads (``resource``'s kind, mostly):
    a binding is converted to CEL values only on a miss, and then only the parts read."""
    return _scope(policies.kept("webhook.scope", _scope_evaluator), facts.resource, obj, now)


def in_scope(
    scheduling: SchedulingPolicy,
    resource: Mapping[str, str],
    binding: Mapping[str, Any],
    now: dt.datetime,
) -> bool | cel.CelError:
    """The SchedulingPolicy's ``scope`` for a binding of ``resource`` (apiVersion, kind,
    namespace, name); a CelError when it fails (the webhook then holds the binding). Evaluated
    afresh, with nothing kept (``fleetgate preflight``); the webhook's calls are memoised."""
    return _scope(_scope_of(scheduling, BoundedMemo(2)), resource, binding, now)


def _scope(
    evaluator: MemoEvaluator,
    resource: Mapping[str, str],
    binding: Mapping[str, Any],
    now: dt.datetime,
) -> bool | cel.CelError:
    (result,) = evaluator.evaluate({"resource": resource, "binding": binding, "now": now})
    return result if isinstance(result, cel.CelError) else bool(result)


def _scope_evaluator(policies: PolicySet) -> MemoEvaluator:
    return _scope_of(policies.scheduling, BoundedMemo(*SCOPE_MEMO))


def _scope_of(scheduling: SchedulingPolicy, memo: BoundedMemo) -> MemoEvaluator:
    program = scheduling.scope.program
    return MemoEvaluator([program], cel.SCOPE_VARS, memo=memo, volatile=("now",))
