"""Job templates submitted to a snapshot: what the API server, Karmada's detector and fleetgate's
webhook would make of them before the next scheduling cycle. Pure: takes objects, returns objects.

For each template of a ``dry-run --job`` file, in order:

1. as the API server stores it on ``kubectl create``: namespace ``default`` when it names none,
   a name from ``generateName``, a uid, ``creationTimestamp`` = the cycle's ``now``;
2. its demand read as the snapshot will read it (a malformed template is an error here, naming
   the field, rather than a warning that drops it);
3. claimed by its policy and given its ResourceBinding (``engine.fleet.detector``);
4. held by fleetgate's webhook (``hold``, injected by the caller: the webhook is not core).

A template already bound in the snapshot (a binding's ``spec.resource`` names it) keeps that
binding, and the snapshot's copy of the template when it has one. A template the snapshot
already holds without a binding is replaced by the file's copy.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from engine.annotations import format_time
from engine.fleet.bindings import BINDING_KINDS
from engine.fleet.detector import Policy, build_binding, claim_template, find_policy
from engine.fleet.interpreter import interpret_replicas
from engine.fleet.model import IssueCode, ObjectKey, SnapshotIssue
from engine.fleet.propagation import PERMANENT_ID_LABELS
from engine.fleet.snapshot import describe, flatten_lists, ref_text
from engine.workloads.model import DemandError
from engine.workloads.registry import reader_for

Objects = list[tuple[str, Mapping[str, Any]]]
_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"  # Kubernetes' generateName alphabet


@dataclass(frozen=True, slots=True)
class Held:
    """A binding as fleetgate's webhook leaves it; ``managed`` when the webhook held it."""

    binding: dict[str, Any]
    managed: bool
    warnings: tuple[str, ...] = ()


Hold = Callable[[Mapping[str, Any]], Held]


@dataclass(slots=True)
class Submitted:
    objects: Objects  # the snapshot's objects with the new templates and bindings
    notes: list[str] = field(default_factory=list)  # what happened to each template
    errors: list[str] = field(default_factory=list)  # templates that cannot be decided
    issues: list[SnapshotIssue] = field(default_factory=list)  # snapshot objects left out


def submit(
    snapshot_objects: Iterable[tuple[str, Any]],
    job_objects: Iterable[tuple[str, Any]],
    hold: Hold,
    now: dt.datetime,
) -> Submitted:
    issues: list[SnapshotIssue] = []
    objects = list(flatten_lists(snapshot_objects, issues))
    policies, priority_classes, bound = _fleet(objects)
    templates = {_key(obj): i for i, (_, obj) in enumerate(objects) if reader_for(obj)}
    result = Submitted(objects, issues=issues)
    seen: set[ObjectKey] = set()
    owners = {binding: key for key, binding in bound.items()}  # binding → its template
    left_out: list[SnapshotIssue] = []
    jobs = list(flatten_lists(job_objects, left_out))
    result.errors.extend(map(str, left_out))
    for source, raw in jobs:
        if not raw.get("apiVersion") or not raw.get("kind"):
            result.errors.append(f"{source}: {describe(raw)}: apiVersion and kind are required")
            continue
        template = as_created(raw, now)
        key, ref = _key(template), f"{source}: {describe(template)}"
        if key in seen:
            result.errors.append(f"{ref}: appears twice in the --job files")
            continue
        seen.add(key)
        if key in bound:
            kept = "the snapshot's template" if key in templates else "the file's template"
            result.notes.append(
                f"{ref}: already bound by {bound[key]}; kept that binding and {kept}"
            )
            if key not in templates:
                result.objects.append((source, template))
            continue
        problem = demand_problem(template)
        if problem:
            result.errors.append(f"{ref}: {problem}")
            continue
        claim = find_policy(template, policies)
        if claim.policy is None:
            result.errors.append(
                f"{ref}: no policy claims it ({claim.reason}); Karmada would create no "
                "ResourceBinding and fleetgate would never see the job"
            )
            continue
        claimed = claim_template(template, claim.policy)
        try:
            binding = build_binding(claimed, claim.policy, priority_classes)
        except DemandError as err:
            result.errors.append(f"{ref}: {err.path}: {err.message}")
            continue
        name = f"{binding['kind']} {_binding_ref(binding)}"
        if name in owners:  # a Volcano Job and a batch/v1 Job of one name, say
            result.errors.append(
                f"{ref}: {name} already exists for {ref_text(owners[name])}; Karmada's detector "
                "does not take over a binding another template owns, so this job would get none"
            )
            continue
        owners[name] = key
        held = hold(binding)
        result.notes += [f"{ref}: webhook: {w}" for w in held.warnings]
        if held.managed:
            result.notes.append(f"{ref}: {claim.reason}; {name} created and held by fleetgate")
        else:
            result.notes.append(
                f"{ref}: {claim.reason}; {name} is out of the webhook's scope (SchedulingPolicy "
                "spec.scope): Karmada schedules it and fleetgate makes no decision"
            )
        if key in templates:
            result.objects[templates[key]] = (source, claimed)
        else:
            result.objects.append((source, claimed))
        result.objects.append((source, held.binding))
    return result


def unbound_templates(objects: Iterable[tuple[str, Any]]) -> list[SnapshotIssue]:
    """Job templates of a snapshot that no binding refers to: never decided, so say why."""
    flat = list(flatten_lists(objects, []))
    policies, _, bound = _fleet(flat)
    issues = []
    for source, obj in flat:
        if reader_for(obj) is None or _key(obj) in bound:
            continue
        claim = find_policy(obj, policies)
        why = (
            f"Karmada's detector has not created it yet ({claim.reason})"
            if claim.policy
            else f"Karmada will never create one: {claim.reason}"
        )
        issues.append(
            SnapshotIssue(
                source,
                describe(obj),
                "",
                f"no ResourceBinding refers to this job, so it is not decided: {why}; "
                "pass its file with --job to decide it as a new job",
                IssueCode.UNBOUND,
            )
        )
    return issues


def as_created(template: Mapping[str, Any], now: dt.datetime) -> dict[str, Any]:
    """``template`` with what the API server adds on create, where it has none."""
    obj = dict(template)
    meta = dict(obj.get("metadata") or {})
    meta["namespace"] = meta.get("namespace") or "default"
    if not meta.get("name") and meta.get("generateName"):
        digest = hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).digest()
        suffix = "".join(_NAME_CHARS[b % len(_NAME_CHARS)] for b in digest[:5])
        meta["name"] = f"{str(meta['generateName'])[:58]}{suffix}"
    if not meta.get("uid"):
        path = "/".join([str(obj.get("apiVersion")), str(obj.get("kind")), *_names(meta)])
        meta["uid"] = str(uuid.uuid5(uuid.NAMESPACE_URL, f"fleetgate-dry-run:{path}"))
    meta.setdefault("creationTimestamp", format_time(now))
    obj["metadata"] = meta
    return obj


def demand_problem(template: Mapping[str, Any]) -> str:
    """Why the cycle could not read the template's demand; "" when it can."""
    reader = reader_for(template)
    try:
        if reader is not None:
            reader(template)
            return ""
        if interpret_replicas(template) is not None:
            return ""
    except DemandError as err:
        return f"{err.path}: {err.message}" if err.path else err.message
    return (
        f"fleetgate reads no demand from {template.get('apiVersion')} {template.get('kind')}, "
        "and Karmada gives its binding no replicas"
    )


def _fleet(
    objects: Objects,
) -> tuple[list[Policy], dict[str, int], dict[ObjectKey, str]]:
    """The snapshot's readable policies, PriorityClass values, and bound template keys."""
    policies: list[Policy] = []
    classes: dict[str, int] = {}
    bound: dict[ObjectKey, str] = {}
    for _, obj in objects:
        group, kind = str(obj.get("apiVersion", "")).rpartition("/")[0], obj.get("kind")
        if group == "policy.karmada.io" and kind in PERMANENT_ID_LABELS:
            try:
                policies.append(Policy.read(obj))
            except DemandError:
                continue  # the snapshot reports it
        elif group == "scheduling.k8s.io" and kind == "PriorityClass":
            name, value = (obj.get("metadata") or {}).get("name"), obj.get("value")
            if isinstance(name, str) and isinstance(value, int):
                classes[name] = value
        elif group == "work.karmada.io" and kind in BINDING_KINDS:
            spec = obj.get("spec")
            resource = spec.get("resource") if isinstance(spec, Mapping) else None
            if isinstance(resource, Mapping):
                namespace = resource.get("namespace") or _names(obj.get("metadata") or {})[0]
                key = (
                    str(resource.get("apiVersion", "")),
                    str(resource.get("kind", "")),
                    str(namespace or ""),
                    str(resource.get("name", "")),
                )
                bound[key] = f"{kind} {_binding_ref(obj)}"
    return policies, classes, bound


def _key(obj: Mapping[str, Any]) -> ObjectKey:
    namespace, name = _names(obj.get("metadata") or {})
    return (str(obj.get("apiVersion", "")), str(obj.get("kind", "")), namespace, name)


def _names(meta: Any) -> tuple[str, str]:
    if not isinstance(meta, Mapping):
        return "", ""
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


def _binding_ref(obj: Mapping[str, Any]) -> str:
    namespace, name = _names(obj.get("metadata") or {})
    return f"{namespace}/{name}" if namespace else name
