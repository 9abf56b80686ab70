"""``meta.k8s.io/v1`` Table output, which ``kubectl get`` asks for (``Accept: ...;as=Table``).

Columns: NAME, a few per kind (like the CRDs' ``additionalPrinterColumns`` or kube-apiserver's
printers), AGE. kubectl adds NAMESPACE itself for ``-A`` from each row's object metadata.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from sandbox.resources import ResourceType

Cell = Callable[[Mapping[str, Any]], Any]


def _condition(kind: str) -> Cell:
    def read(obj: Mapping[str, Any]) -> str:
        for condition in (obj.get("status") or {}).get("conditions") or []:
            if condition.get("type") == kind:
                return str(condition.get("status", ""))
        return ""

    return read


def _path(*steps: str) -> Cell:
    def read(obj: Mapping[str, Any]) -> Any:
        current: Any = obj
        for step in steps:
            current = current.get(step) if isinstance(current, Mapping) else None
        return "" if current is None else current

    return read


def _job_state(obj: Mapping[str, Any]) -> str:
    status = obj.get("status") or {}
    for key in ("state", "phase", "jobStatus", "applicationState"):
        value = status.get(key)
        if isinstance(value, Mapping):
            value = value.get("phase") or value.get("state")
        if value:
            return str(value)
    true = [c.get("type", "") for c in status.get("conditions") or [] if c.get("status") == "True"]
    return str(true[-1]) if true else ""


EXTRA_COLUMNS: dict[str, tuple[tuple[str, str, Cell], ...]] = {
    "Cluster": (
        ("VERSION", "string", _path("status", "kubernetesVersion")),
        ("MODE", "string", _path("spec", "syncMode")),
        ("READY", "string", _condition("Ready")),
    ),
    "ResourceBinding": (
        ("SCHEDULED", "string", _condition("Scheduled")),
        ("FULLYAPPLIED", "string", _condition("FullyApplied")),
    ),
    "ClusterResourceBinding": (
        ("SCHEDULED", "string", _condition("Scheduled")),
        ("FULLYAPPLIED", "string", _condition("FullyApplied")),
    ),
    "Work": (("APPLIED", "string", _condition("Applied")),),
    "Namespace": (("STATUS", "string", _path("status", "phase")),),
    "ConfigMap": (("DATA", "integer", lambda o: len(o.get("data") or {})),),
    "Lease": (("HOLDER", "string", _path("spec", "holderIdentity")),),
    "PriorityClass": (("VALUE", "integer", _path("value")),),
}


def age(created: str, now: datetime) -> str:
    """kubectl's short duration: 45s, 12m, 5h, 3d (``<unknown>`` when unset)."""
    if not created:
        return "<unknown>"
    started = datetime.strptime(created, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    seconds = max(0, int((now - started).total_seconds()))
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 2 * 3600:
        return f"{seconds // 60}m"
    if seconds < 48 * 3600:
        return f"{seconds // 3600}h"
    return f"{seconds // 86400}d"


def _columns(rt: ResourceType) -> tuple[tuple[str, str, Cell], ...]:
    if rt.kind in EXTRA_COLUMNS and (rt.group in {"", "cluster.karmada.io"} or "." in rt.group):
        return EXTRA_COLUMNS[rt.kind]
    if rt.status_subresource and rt.kind not in EXTRA_COLUMNS:
        return (("STATE", "string", _job_state),)
    return ()


def _row_object(obj: Mapping[str, Any], include: str) -> Any:
    if include == "None":
        return None
    if include == "Object":
        return obj
    return {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj.get("metadata", {}),
    }


def to_table(
    rt: ResourceType, body: Mapping[str, Any], now: datetime, include_object: str = "Metadata"
) -> dict[str, Any]:
    """A Table for a list or a single object."""
    is_list = "items" in body
    items = body["items"] if is_list else [body]
    extra = _columns(rt)
    definitions = [
        {"name": "Name", "type": "string", "format": "name", "description": "Name", "priority": 0}
    ]
    definitions += [
        {"name": title, "type": kind, "format": "", "description": title, "priority": 0}
        for title, kind, _ in extra
    ]
    definitions.append(
        {"name": "Age", "type": "string", "format": "", "description": "Age", "priority": 0}
    )
    rows = []
    for obj in items:
        metadata = obj.get("metadata") or {}
        cells = [metadata.get("name", "")]
        cells += [read(obj) for _, _, read in extra]
        cells.append(age(metadata.get("creationTimestamp", ""), now))
        rows.append({"cells": cells, "object": _row_object(obj, include_object)})
    list_meta = (
        dict(body.get("metadata") or {}) if is_list else {"resourceVersion": metadata_rv(body)}
    )
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_meta,
        "columnDefinitions": definitions,
        "rows": rows,
    }


def metadata_rv(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion", ""))
