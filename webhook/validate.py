"""``/validate/workloads``: judge job templates by the AdmissionPolicies, at ``kubectl apply`` time.

CEL variables, as the README's policy reference describes them: ``object`` is the template as
submitted, ``job`` its demand (``engine.cycle.JobValues`` of the template) with ``queue``,
``tenant`` and ``priority`` mapped by the SchedulingPolicy as the cycle maps it, ``now`` the time
of the request.

Enforcement: ``Deny`` refuses (HTTP 200, ``allowed: false``, code 403, every failed check named
with its policy), ``Warn`` admits with an AdmissionReview warning, ``DryRun`` admits and only
counts. An expression that fails at run time is a failed check under ``failurePolicy: Fail`` (so
a Deny policy refuses, with the error text) and a warning under ``Ignore``.

Built-in checks: the job's queue exists and is a leaf (jobs wait in leaf queues only), and, when
fleet data is given, the gang can start on the fleet at all (``webhook.fit``).

An UPDATE that changes neither ``spec`` nor the labels and annotations (finalizers, owner
references, status written by the job's own operator) is always allowed: a policy tightened
later must never wedge a running or terminating job. So is an UPDATE whose only change is
Karmada's claim on the template: labels and annotations under ``propagationpolicy.karmada.io/``
and ``clusterpropagationpolicy.karmada.io/``, which Karmada's detector writes before it creates
the binding (decision ``karmada-claim``). The user's content was judged when it was written;
refusing the claim would leave the job with no binding and no reason anywhere, and judging it
again costs a second review per job. Any other change of labels or annotations is judged again,
like a CREATE: the SchedulingPolicy maps labels to the queue (``fleetgate.io/queue``), and
AdmissionPolicies read ``object.metadata`` and ``job.labels``.

A review costs what its distinct inputs cost: every expression (the SchedulingPolicy's mapping,
``map_template``; each AdmissionPolicy's match, validations and messages, here) is evaluated
through a memo kept with the PolicySet, keyed by the parts of ``object``, ``job`` and ``now`` it
reads. The template is projected onto those parts, looked up, and converted to CEL values and
evaluated only on a miss, and then only the parts read (once per review,
``cel.converting_once``). Each memo is bounded (``ADMISSION_MEMO``): templates with ever new
label values cannot grow it. An expression that reads ``now`` is evaluated on each review.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from engine import untrusted
from engine.cycle import JobValues, Mapped, map_template
from engine.policy import cel, queueaccess
from engine.policy.bounded import BoundedMemo
from engine.policy.memo import MemoEvaluator
from engine.policy.model import AdmissionPolicy, AdmitOn, Enforcement, FailurePolicy
from engine.policy.policyset import PolicySet
from engine.workloads.model import DemandError, Workload
from engine.workloads.registry import known_kinds, read_workload
from webhook.fit import Fleet
from webhook.review import AdmissionRequest, ReviewError, Verdict

ENDPOINT = "/validate/workloads"
BUILTIN_QUEUE = "builtin:queue"
BUILTIN_FIT = "builtin:fit"
# the prefixes of Karmada's claim metadata on a resource template (its detector's writes)
CLAIM_PREFIXES = frozenset({"propagationpolicy.karmada.io", "clusterpropagationpolicy.karmada.io"})
# the memo of the AdmissionPolicies' results, one per policy version: entries, estimated bytes,
# bytes an entry (``engine.policy.bounded``)
ADMISSION_MEMO = (20_000, 16 << 20, 64 << 10)


@dataclass(slots=True)
class _Findings:
    denials: list[tuple[str, str, str]] = field(default_factory=list)  # policy, reason, message
    warnings: list[str] = field(default_factory=list)
    events: list[tuple[str, str]] = field(default_factory=list)

    def deny(self, policy: str, reason: str, message: str) -> None:
        self.denials.append((policy, reason, message))
        self.events.append(("denied", policy))

    def warn(self, policy: str, message: str) -> None:
        self.warnings.append(f"{policy}: {message}")
        self.events.append(("warned", policy))


# a namespace's labels, or None when they are not known (no check then: the cycle decides)
Namespaces = Callable[[str], Mapping[str, str] | None]


def validate_workload(
    request: AdmissionRequest,
    policies: PolicySet,
    fleet: Fleet | None,
    now: dt.datetime,
    namespaces: Namespaces | None = None,
) -> Verdict:
    template = request.object
    if request.operation not in ("CREATE", "UPDATE") or template is None:
        return Verdict(True, "allowed", audit={"decision": "ignored-operation"})
    if (request.kind.api_version, request.kind.kind) not in known_kinds():
        raise ReviewError(
            f"{ENDPOINT} admits the job kinds fleetgate reads; got {request.kind} "
            "(check the rules of the webhook configuration)"
        )
    said = (template.get("apiVersion"), template.get("kind"))
    if said != (request.kind.api_version, request.kind.kind):
        raise ReviewError(
            f"request.object is {said[0]} {said[1]}, not the {request.kind} the request names"
        )
    if request.operation == "UPDATE":
        unchanged = _unchanged(template, request.old_object or {})
        if unchanged is not None:
            return Verdict(True, "allowed", audit={"decision": unchanged})
    try:
        workload = read_workload(template)
    except DemandError as err:
        return Verdict(
            False,
            "denied",
            code=422,
            reason="Invalid",
            message=f"fleetgate cannot read the job's demand: {err}",
            audit={"decision": "unreadable"},
            events=(("denied", "builtin:demand"),),
        )
    if workload is None:
        raise ReviewError(f"{request.kind} has no demand reader")  # known_kinds() said it had
    with cel.converting_once():  # the template becomes CEL values once, not once per expression
        return _judge(template, workload, policies, fleet, now, namespaces)


def _judge(
    template: Mapping[str, Any],
    workload: Workload,
    policies: PolicySet,
    fleet: Fleet | None,
    now: dt.datetime,
    namespaces: Namespaces | None = None,
) -> Verdict:
    found = _Findings()
    priority = fleet.priority_value(workload.priority_class_name) if fleet else 0
    # the cycle's own mapping: the queue checked here is the queue the cycle will use
    mapped = map_template(policies, workload, priority, now)
    if mapped.error:
        said = untrusted.echo(mapped.error, 1024)
        found.warn("schedulingpolicy", f"cannot map the job to a queue: {said}")
    else:
        labels = namespaces(workload.namespace) if namespaces is not None else None
        _check_queue(policies, mapped.queue, found, workload.namespace, labels)
        if fleet is not None:
            _check_fit(policies, workload, mapped, fleet, found)
    if policies.admission:
        job = JobValues(workload, mapped.priority, template)
        job.queue, job.tenant = mapped.queue, mapped.tenant
        variables = _Variables(
            {"object": template, "job": job, "now": now},
            policies.kept("webhook.admission", _admission_evaluators),
        )
        for policy in policies.admission:
            _apply(policy, variables, found)

    audit = {"queue": mapped.queue}
    if found.denials:
        reason = found.denials[0][1]
        message = "; ".join(f"{policy}: {text}" for policy, _, text in found.denials)
        return Verdict(
            False,
            "denied",
            warnings=tuple(found.warnings),
            code=403,
            reason=reason,
            message=f"fleetgate denied {workload.ref}: {message}",
            audit=audit | {"decision": "denied"},
            events=tuple(found.events),
        )
    return Verdict(
        True,
        "warned" if found.warnings else "allowed",
        warnings=tuple(found.warnings),
        audit=audit | {"decision": "allowed"},
        events=tuple(found.events),
    )


def _check_queue(
    policies: PolicySet,
    queue: str,
    found: _Findings,
    namespace: str = "",
    labels: Mapping[str, str] | None = None,
) -> None:
    """The queue exists, is a leaf, and (with the namespace's ``labels``) the namespace may
    use it, in the words of the cycle's ``QueueNotAllowed``."""
    if not policies.queues:
        return  # a policy set without queues (admission policies only) cannot check this
    if queue and untrusted.name_problem(queue, label=True):
        said = untrusted.echo(queue, untrusted.LABEL_MAX)
        found.deny(BUILTIN_QUEUE, "Forbidden", f"the queue name '{said}' is not a DNS-1123 label")
        return
    if policies.queue(queue) is None:
        leaves = sorted(q.name for q in policies.queues if not _children(policies, q.name))
        found.deny(
            BUILTIN_QUEUE,
            "Forbidden",
            f"queue {queue!r} does not exist; leaf queues: {', '.join(leaves)}",
        )
        return
    children = _children(policies, queue)
    if children:
        found.deny(
            BUILTIN_QUEUE,
            "Forbidden",
            f"queue {queue!r} is a parent queue (children: {', '.join(children)}); "
            "jobs wait in leaf queues",
        )
        return
    refused = queueaccess.refusal(policies, queue, namespace, labels) if labels else None
    if refused is not None:
        found.deny(BUILTIN_QUEUE, "Forbidden", refused)


def _children(policies: PolicySet, name: str) -> list[str]:
    return sorted(q.name for q in policies.queues if q.parent == name)


def _check_fit(
    policies: PolicySet,
    workload: Workload,
    mapped: Mapped,
    fleet: Fleet,
    found: _Findings,
) -> None:
    gang = policies.scheduling.gang
    min_member, allow_split = mapped.min_member, mapped.allow_split
    needed = workload.pods if gang.admit_on == AdmitOn.ALL else min(min_member, workload.pods)
    why = fleet.never_fits(workload, needed, bool(allow_split))
    if why:
        found.deny(BUILTIN_FIT, "Forbidden", f"the job can never start on this fleet: {why}")
    elif larger := fleet.larger_than_every_node(workload):
        found.warn(BUILTIN_FIT, f"the job can never start on the declared node shapes: {larger}")


@dataclass(frozen=True, slots=True)
class _Variables:
    """One review's CEL variables, as plain values, and the memoised evaluator of each
    AdmissionPolicy expression."""

    values: Mapping[str, Any]
    evaluators: Mapping[cel.CelProgram, MemoEvaluator]

    def evaluate(self, program: cel.CelProgram) -> Any:
        (result,) = self.evaluators[program].evaluate(self.values)
        return result


def _admission_evaluators(policies: PolicySet) -> dict[cel.CelProgram, MemoEvaluator]:
    """An evaluator of each AdmissionPolicy expression, all in one bounded memo."""
    memo = BoundedMemo(*ADMISSION_MEMO)
    programs = [policy.match.program for policy in policies.admission]
    for policy in policies.admission:
        for v in policy.validations:
            programs.append(v.expression.program)
            if v.message_expression is not None:
                programs.append(v.message_expression.program)
    return {
        program: MemoEvaluator([program], cel.ADMISSION_VARS, memo=memo, volatile=("now",))
        for program in programs
    }


def _apply(policy: AdmissionPolicy, variables: _Variables, found: _Findings) -> None:
    matched = variables.evaluate(policy.match.program)
    if isinstance(matched, cel.CelError):
        _failed(policy, f"{policy.match.path}: {matched}", "Forbidden", found)
        return
    if not matched:
        return
    for validation in policy.validations:
        result = variables.evaluate(validation.expression.program)
        if isinstance(result, cel.CelError):
            _failed(policy, f"{validation.expression.path}: {result}", validation.reason, found)
            continue
        if result:
            continue
        message = validation.message or f"failed {validation.expression.source!r}"
        if validation.message_expression is not None:
            computed = variables.evaluate(validation.message_expression.program)
            if isinstance(computed, str) and computed:
                message = computed
        _enforce(policy, validation.reason, message, found)


def _failed(policy: AdmissionPolicy, error: str, reason: str, found: _Findings) -> None:
    found.events.append(("cel_error", policy.name))
    if policy.failure_policy == FailurePolicy.IGNORE:
        found.warn(policy.name, f"not evaluated (failurePolicy Ignore): {error}")
    else:
        _enforce(policy, reason, f"expression failed: {error}", found)


def _enforce(policy: AdmissionPolicy, reason: str, message: str, found: _Findings) -> None:
    if policy.enforcement == Enforcement.DENY:
        found.deny(policy.name, reason, message)
    elif policy.enforcement == Enforcement.WARN:
        found.warn(policy.name, message)
    else:
        found.events.append(("dryrun", policy.name))


def _unchanged(new: Mapping[str, Any], old: Mapping[str, Any]) -> str | None:
    """``spec-unchanged`` or ``karmada-claim`` when the UPDATE is allowed unjudged (see the
    module's text), else None."""
    if new.get("spec") != old.get("spec"):
        return None
    new_meta, old_meta = new.get("metadata") or {}, old.get("metadata") or {}
    if not isinstance(new_meta, dict) or not isinstance(old_meta, dict):
        return None
    changed = False
    for field_name in ("labels", "annotations"):
        after, before = new_meta.get(field_name) or {}, old_meta.get(field_name) or {}
        if after == before:
            continue
        if not isinstance(after, dict) or not isinstance(before, dict):
            return None
        keys = {k for k in after.keys() | before.keys() if after.get(k) != before.get(k)}
        if not all(isinstance(k, str) and k.partition("/")[0] in CLAIM_PREFIXES for k in keys):
            return None
        changed = True
    return "karmada-claim" if changed else "spec-unchanged"
