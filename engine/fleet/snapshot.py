"""Karmada objects → Snapshot. Pure: takes (source, object) pairs, touches no files.

Every malformed object becomes a SnapshotIssue (source, object, path, message) and is left out;
the rest still load. The result does not depend on input order: duplicates keep the newest copy
whatever their order, and every collection is sorted.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from engine.errors import not_an_object, value_type
from engine.fleet.bindings import BINDING_KINDS, read_binding
from engine.fleet.clusters import read_cluster
from engine.fleet.demand import binding_demand
from engine.fleet.fields import Metadata
from engine.fleet.frozen import FrozenDict
from engine.fleet.model import IssueCode, ObjectKey, Snapshot, SnapshotIssue
from engine.fleet.namespaces import read_namespace
from engine.fleet.priority import read_priority_class
from engine.fleet.propagation import PERMANENT_ID_LABELS, read_policy
from engine.fleet.readmemo import ReadMemo
from engine.workloads.common import object_name
from engine.workloads.hyperjob import HyperJob, is_hyperjob, read_hyperjob, read_split_count
from engine.workloads.model import DemandError, Workload
from engine.workloads.names import qualified_name
from engine.workloads.registry import reader_for

# (API group, kind) → reader of the fleet objects.
FLEET_READERS: dict[tuple[str, str], Callable[[Mapping[str, Any]], Any]] = {
    ("cluster.karmada.io", "Cluster"): read_cluster,
    **{("work.karmada.io", kind): read_binding for kind in BINDING_KINDS},
    **{("policy.karmada.io", kind): read_policy for kind in PERMANENT_ID_LABELS},
    ("scheduling.k8s.io", "PriorityClass"): read_priority_class,
    ("", "Namespace"): read_namespace,
}


def build_snapshot(
    objects: Iterable[tuple[str, Mapping[str, Any]]], memo: ReadMemo | None = None
) -> Snapshot:
    """The snapshot of ``objects``; with ``memo`` (kept between builds), objects read by an
    earlier build are not parsed again (``engine.fleet.readmemo``): the same result."""
    issues: list[SnapshotIssue] = []
    chosen = _deduplicate(flatten_lists(objects, issues), issues)
    read: dict[tuple[str, str], list[Any]] = {key: [] for key in FLEET_READERS}
    workloads: dict[ObjectKey, Workload] = {}
    broken: set[ObjectKey] = set()
    others: dict[ObjectKey, Mapping[str, Any]] = {}
    hyperjobs: dict[tuple[str, str], HyperJob] = {}
    for source, obj in chosen:
        group_kind = (_group(obj), str(obj.get("kind", "")))
        reader = FLEET_READERS.get(group_kind) or reader_for(obj)
        if reader is None and is_hyperjob(obj):
            _read_hyperjob(source, obj, hyperjobs, issues)
            continue
        if reader is None:
            others[_ref_key(obj)] = obj
            continue
        try:
            value = reader(obj) if memo is None else memo.read(reader, obj)
        except DemandError as err:
            issues.append(SnapshotIssue(source, describe(obj), err.path, err.message))
            broken.add(_ref_key(obj))
            continue
        if isinstance(value, Workload):
            workloads[_ref_key(obj)] = value
        else:
            read[group_kind].append(value)
    bindings = [b for kind in BINDING_KINDS for b in read[("work.karmada.io", kind)]]
    for binding in bindings:
        key = binding.resource.key
        if key in workloads or key in broken:
            continue  # a broken template already has its issue
        template = others.get(key)
        demand = binding_demand(binding, _metadata(template))
        if demand is None:
            where = (
                "the template's kind has no reader"
                if template
                else "the template is not in the snapshot"
            )
            issues.append(
                SnapshotIssue(
                    source="",
                    object=binding.ref,
                    path="spec",
                    message=f"demand of {ref_text(key)} unknown: {where}, and the binding has "
                    "neither spec.replicas with spec.replicaRequirements nor spec.components",
                    code=IssueCode.UNKNOWN_DEMAND if template else IssueCode.TEMPLATE_NOT_FOUND,
                )
            )
        else:
            workloads[key] = demand
    if memo is not None:
        memo.end_build()
    return Snapshot(
        clusters=tuple(sorted(read[("cluster.karmada.io", "Cluster")], key=lambda c: c.name)),
        bindings=tuple(sorted(bindings, key=lambda b: (b.namespace, b.name, b.kind))),
        workloads=FrozenDict(workloads),
        policies=tuple(
            sorted(
                (p for kind in PERMANENT_ID_LABELS for p in read[("policy.karmada.io", kind)]),
                key=lambda p: (p.kind, p.namespace, p.name),
            )
        ),
        priority_classes=tuple(
            sorted(read[("scheduling.k8s.io", "PriorityClass")], key=lambda p: p.name)
        ),
        errors=tuple(
            sorted(set(issues), key=lambda i: (i.source, i.object, i.path, i.message, i.code))
        ),
        hyperjobs=FrozenDict(hyperjobs),
        namespaces=FrozenDict({n.name: n for n in read[("", "Namespace")]}),
    )


def _read_hyperjob(
    source: str,
    obj: Mapping[str, Any],
    into: dict[tuple[str, str], HyperJob],
    issues: list[SnapshotIssue],
) -> None:
    """A Volcano HyperJob: not a job Karmada binds, but the size of its children's group."""
    try:
        found = read_hyperjob(obj)
    except DemandError as err:
        issues.append(SnapshotIssue(source, describe(obj), err.path, err.message))
        partial = read_split_count(obj)  # its status may still give the group's size
        if partial is not None:
            into[(partial.namespace, partial.name)] = partial
        return
    into[(found.namespace, found.name)] = found


def describe(obj: Mapping[str, Any]) -> str:
    """``Kind/namespace/name`` (or ``Kind/name``) of an object, for issues."""
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    try:
        name = object_name(meta)
    except DemandError:
        name = "<unnamed>"
    namespace = meta.get("namespace")
    kind = obj.get("kind") or "<no kind>"
    api_version = obj.get("apiVersion")
    version = api_version if isinstance(api_version, str) else ""
    return qualified_name(version, str(kind), str(namespace or ""), name)


def ref_text(key: ObjectKey) -> str:
    api_version, kind, namespace, name = key
    return (
        f"{kind}/{namespace}/{name} ({api_version})"
        if namespace
        else f"{kind}/{name} ({api_version})"
    )


def flatten_lists(
    objects: Iterable[tuple[str, Any]], issues: list[SnapshotIssue]
) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Objects with ``kind: List`` (and typed lists such as ClusterList) replaced by their items.

    What cannot be an object of the snapshot becomes an issue and is left out: a document or
    list item that is not an object, an object without ``kind`` (the items of a typed list
    take the list's), a ``kind: List`` whose ``items`` is not a list.
    """
    for source, obj in objects:
        if not isinstance(obj, Mapping):
            issues.append(SnapshotIssue(source, "", "", not_an_object(obj), IssueCode.UNREADABLE))
            continue
        kind = obj.get("kind")
        if not kind or not isinstance(kind, str):
            why = "required" if not kind else f"expected a string, got {value_type(kind)}"
            issues.append(SnapshotIssue(source, describe(obj), "kind", f"{why}; left out"))
            continue
        items = obj.get("items")
        if kind.endswith("List") and isinstance(items, list):
            yield from flatten_lists(_items(source, obj, kind, items, issues), issues)
        elif kind == "List" or (kind.endswith("List") and "items" in obj):
            issues.append(
                SnapshotIssue(
                    source,
                    describe(obj),
                    "items",
                    f"expected a list, got {value_type(items)}; the {kind} is left out",
                )
            )
        else:
            yield source, obj


def _items(
    source: str, obj: Mapping[str, Any], kind: str, items: list[Any], issues: list[SnapshotIssue]
) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """The items of a list, those of a typed list given its kind; the ones that are not
    objects, or have no kind, are issues that name the list and the item's index."""
    item_kind = kind.removesuffix("List")
    for i, item in enumerate(items):
        if not isinstance(item, Mapping):
            message = not_an_object(item)
            where = f"items[{i}]"
            issues.append(
                SnapshotIssue(source, describe(obj), where, message, IssueCode.UNREADABLE)
            )
        elif "kind" in item:
            yield source, item
        elif item_kind:
            yield source, {"apiVersion": obj.get("apiVersion", ""), "kind": item_kind, **item}
        else:
            message = f"required; {describe(item)} left out"
            issues.append(SnapshotIssue(source, describe(obj), f"items[{i}].kind", message))


def _deduplicate(
    objects: Iterable[tuple[str, Mapping[str, Any]]], issues: list[SnapshotIssue]
) -> list[tuple[str, Mapping[str, Any]]]:
    """One object per (group, kind, namespace, name): the highest resourceVersion, then a stable
    tie-break on content, so input order never decides which copy wins."""
    groups: dict[tuple[str, str, str, str], list[tuple[str, Mapping[str, Any]]]] = {}
    for source, obj in objects:
        _, kind, namespace, name = _ref_key(obj)
        groups.setdefault((_group(obj), kind, namespace, name), []).append((source, obj))
    chosen = []
    for copies in groups.values():
        if len(copies) > 1:  # the key serializes each copy: only for actual duplicates
            copies.sort(key=_newest_first)
        chosen.append(copies[0])
        for source, obj in copies[1:]:
            kept_source, kept = copies[0]
            issues.append(
                SnapshotIssue(
                    source,
                    describe(obj),
                    "metadata.name",
                    f"duplicate object; kept the copy from {kept_source or '-'} "
                    f"(resourceVersion {_version(kept) or 'none'})",
                    IssueCode.DUPLICATE,
                )
            )
    return chosen


def _newest_first(pair: tuple[str, Mapping[str, Any]]) -> tuple[int, str, str]:
    source, obj = pair
    version = _version(obj)
    number = int(version) if version.isdigit() else -1
    return -number, json.dumps(obj, sort_keys=True, default=str), source


def _version(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    return str(meta.get("resourceVersion") or "") if isinstance(meta, Mapping) else ""


def _group(obj: Mapping[str, Any]) -> str:
    api_version = str(obj.get("apiVersion", ""))
    return api_version.rpartition("/")[0]


def _ref_key(obj: Mapping[str, Any]) -> ObjectKey:
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    return (
        str(obj.get("apiVersion", "")),
        str(obj.get("kind", "")),
        str(meta.get("namespace") or ""),
        str(meta.get("name") or ""),
    )


def _metadata(obj: Mapping[str, Any] | None) -> Metadata | None:
    if obj is None:
        return None
    try:
        return Metadata(obj["metadata"]) if isinstance(obj.get("metadata"), Mapping) else None
    except DemandError:
        return None
