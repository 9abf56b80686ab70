"""What the mutating webhook reads from a ResourceBinding, and the JSON patch operations it writes.

Reading is strict about the few fields used and ignores the rest: a field of the wrong type is a
ReviewError naming its path (HTTP 400), never a KeyError. Patch paths escape ``~`` and ``/`` in
label and annotation keys as RFC 6901 requires (``fleetgate.io/managed`` →
``fleetgate.io~1managed``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from engine.quantity import MAX_QUANTITY
from engine.resources import PODS, Resources
from engine.workloads.model import DemandError
from engine.workloads.pods import amounts
from webhook.review import expect_type, object_error

Patch = list[dict[str, Any]]


@dataclass(frozen=True, slots=True)
class BindingFacts:
    namespace: str
    name: str
    resource: Mapping[str, str]  # apiVersion, kind, namespace, name: the CEL `resource`
    labels: Mapping[str, str] | None  # None: metadata.labels absent or null
    annotations: Mapping[str, str] | None
    suspension: Mapping[str, Any] | None  # None: spec.suspension absent or null
    clusters: tuple[str, ...] = ()  # spec.clusters[].name: where the binding is placed
    scheduled_at: str = ""  # Scheduled=True since, else status.lastScheduledTime

    @property
    def scheduling_suspended(self) -> bool:
        return self.suspension is not None and self.suspension.get("scheduling") is True

    def label(self, key: str) -> str | None:
        return (self.labels or {}).get(key)

    def annotation(self, key: str) -> str | None:
        return (self.annotations or {}).get(key)


def read_facts(obj: Mapping[str, Any]) -> BindingFacts:
    meta = expect_type(obj.get("metadata"), dict, "metadata", "an object")
    namespace = _optional_str(meta, "namespace", "metadata.namespace")
    name = _optional_str(meta, "name", "metadata.name") or _optional_str(
        meta, "generateName", "metadata.generateName"
    )
    spec = expect_type(obj.get("spec"), dict, "spec", "an object")
    ref = expect_type(spec.get("resource"), dict, "spec.resource", "an object")
    resource = {
        "apiVersion": _required_str(ref, "apiVersion", "spec.resource.apiVersion"),
        "kind": _required_str(ref, "kind", "spec.resource.kind"),
        "namespace": _optional_str(ref, "namespace", "spec.resource.namespace") or namespace,
        "name": _required_str(ref, "name", "spec.resource.name"),
    }
    suspension = spec.get("suspension")
    if suspension is not None:
        expect_type(suspension, dict, "spec.suspension", "an object")
        scheduling = suspension.get("scheduling")
        if scheduling is not None:
            expect_type(scheduling, bool, "spec.suspension.scheduling", "a boolean")
    return BindingFacts(
        namespace=namespace,
        name=name,
        resource=resource,
        labels=_string_map(meta, "labels"),
        annotations=_string_map(meta, "annotations"),
        suspension=suspension,
        clusters=_cluster_names(spec),
        scheduled_at=_scheduled_at(obj.get("status")),
    )


def _cluster_names(spec: Mapping[str, Any]) -> tuple[str, ...]:
    targets = spec.get("clusters")
    if targets is None:
        return ()
    expect_type(targets, list, "spec.clusters", "an array")
    names = []
    for i, target in enumerate(targets):
        entry = expect_type(target, dict, f"spec.clusters[{i}]", "an object")
        names.append(_required_str(entry, "name", f"spec.clusters[{i}].name"))
    return tuple(names)


def _scheduled_at(status: Any) -> str:
    """When the binding was placed, as the status says it (an unreadable status says nothing:
    the webhook then records the time it saw the placement)."""
    if not isinstance(status, dict):
        return ""
    conditions = status.get("conditions")
    for condition in conditions if isinstance(conditions, list) else ():
        if (
            isinstance(condition, dict)
            and condition.get("type") == "Scheduled"
            and condition.get("status") == "True"
            and isinstance(since := condition.get("lastTransitionTime"), str)
        ):
            return since
    last = status.get("lastScheduledTime")
    return last if isinstance(last, str) else ""


def demand(obj: Mapping[str, Any]) -> Resources | None:
    """What Karmada's interpreter says the binding needs in total, pods counted; None if unknown.

    ``spec.components`` (several pod templates) wins over ``spec.replicas`` ×
    ``spec.replicaRequirements.resourceRequest``. For most AI job kinds Karmada fills neither.
    """
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return None
    try:
        components = spec.get("components")
        if components:
            expect_type(components, list, "spec.components", "an array")
            total = Resources()
            for i, component in enumerate(components):
                path = f"spec.components[{i}]"
                entry = expect_type(component, dict, path, "an object")
                total = total + _replicas_times_request(entry, path)
            return total
        if spec.get("replicas") is None:
            return None
        return _replicas_times_request(spec, "spec")
    except DemandError as err:
        raise object_error(err.path, err.message) from None


def grew(old: Resources, new: Resources) -> list[str]:
    """The resources of which ``new`` asks more than ``old``, as ``name old→new``."""
    return [
        f"{name} {_number(old.get_amount(name))}→{_number(amount)}"
        for name, amount in new.items()
        if amount > old.get_amount(name)
    ]


# -- JSON patch ---------------------------------------------------------------------------------


def escape(key: str) -> str:
    """A key as one RFC 6901 JSON-pointer token."""
    return key.replace("~", "~0").replace("/", "~1")


def suspend(facts: BindingFacts) -> Patch:
    """Set ``spec.suspension.scheduling`` without touching the rest of ``spec.suspension``.

    volcano-global replaces the whole ``spec.suspension``, wiping the ``dispatching`` flags a
    PropagationPolicy put there; adding only the member keeps them.
    """
    if facts.scheduling_suspended:
        return []
    if facts.suspension is None:
        return [{"op": "add", "path": "/spec/suspension", "value": {"scheduling": True}}]
    return [{"op": "add", "path": "/spec/suspension/scheduling", "value": True}]


def set_entries(current: Mapping[str, str] | None, field: str, entries: Mapping[str, str]) -> Patch:
    """Add (or overwrite) ``entries`` in ``metadata.<field>`` (labels or annotations)."""
    changed = {k: v for k, v in entries.items() if (current or {}).get(k) != v}
    if not changed:
        return []
    if current is None:
        return [{"op": "add", "path": f"/metadata/{field}", "value": dict(sorted(changed.items()))}]
    return [
        {"op": "add", "path": f"/metadata/{field}/{escape(key)}", "value": value}
        for key, value in sorted(changed.items())
    ]


# -- helpers ------------------------------------------------------------------------------------


def _replicas_times_request(entry: Mapping[str, Any], path: str) -> Resources:
    replicas = entry.get("replicas") or 0
    expect_type(replicas, int, f"{path}.replicas", "an integer")
    if replicas < 0:
        raise object_error(f"{path}.replicas", "must not be negative")
    if replicas > MAX_QUANTITY:  # str() of a huge int is slow, and refused past 4300 digits
        raise object_error(
            f"{path}.replicas",
            f"must be at most {MAX_QUANTITY}, got a {replicas.bit_length()}-bit integer",
        )
    requirements = entry.get("replicaRequirements") or {}
    expect_type(requirements, dict, f"{path}.replicaRequirements", "an object")
    request = amounts(
        requirements.get("resourceRequest"), f"{path}.replicaRequirements.resourceRequest"
    )
    return Resources(request).scale(replicas) + {PODS: Fraction(replicas)}


def _string_map(meta: Mapping[str, Any], key: str) -> Mapping[str, str] | None:
    value = meta.get(key)
    if value is None:
        return None
    expect_type(value, dict, f"metadata.{key}", "an object")
    for name, item in value.items():
        if not isinstance(item, str):
            raise object_error(f"metadata.{key}[{name!r}]", "expected a string")
    return value


def _optional_str(parent: Mapping[str, Any], key: str, path: str) -> str:
    value = parent.get(key)
    if value is None:
        return ""
    return expect_type(value, str, path, "a string")


def _required_str(parent: Mapping[str, Any], key: str, path: str) -> str:
    value = _optional_str(parent, key, path)
    if not value:
        raise object_error(path, "required")
    return value


def _number(value: Fraction) -> str:
    return str(value.numerator) if value.denominator == 1 else f"{float(value):g}"
