"""Karmada objects → Snapshot. Pure: takes (source, object) pairs, touches no files.

Every malformed object becomes a SnapshotIssue (source, object, path, message) and is left out;
the rest still load. The result does not depend on input order: duplicates keep the newest copy
whatever their order, and every collection is sorted.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from engine.errors import not_an_object, value_type
from engine.fleet.bindings import BINDING_KINDS, read_binding
from engine.fleet.clusters import read_cluster
from engine.fleet.demand import binding_demand
from engine.fleet.fields import Metadata
from engine.fleet.frozen import FrozenDict
from engine.fleet.model import (
    BindingView,
    IssueCode,
    ObjectKey,
    PropagationView,
    Snapshot,
    SnapshotIssue,
)
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


@dataclass(frozen=True, slots=True)
class ObjectRead:
    """What one (deduplicated) object gives the snapshot: a fleet view or a job's Workload
    (``value``), an object no reader reads (``other``: a template a binding may need), a
    reader's error (``broken``: bindings of it get no demand from the binding itself), or a
    HyperJob's group size; with the issues it raised."""

    group_kind: tuple[str, str]
    ref: ObjectKey
    value: Any = None
    other: Mapping[str, Any] | None = None
    broken: bool = False
    hyperjob: HyperJob | None = None
    issues: tuple[SnapshotIssue, ...] = ()


def build_snapshot(
    objects: Iterable[tuple[str, Mapping[str, Any]]], memo: ReadMemo | None = None
) -> Snapshot:
    """The snapshot of ``objects``; with ``memo`` (kept between builds), objects read by an
    earlier build are not parsed again (``engine.fleet.readmemo``): the same result.
    ``engine.fleet.live.LiveSnapshot`` keeps the same result up to date from changes."""
    issues: list[SnapshotIssue] = []
    chosen = _deduplicate(flatten_lists(objects, issues), issues)
    read: dict[tuple[str, str], list[Any]] = {key: [] for key in FLEET_READERS}
    workloads: dict[ObjectKey, Workload] = {}
    broken: set[ObjectKey] = set()
    others: dict[ObjectKey, Mapping[str, Any]] = {}
    hyperjobs: dict[tuple[str, str], HyperJob] = {}
    for source, obj in chosen:
        found = read_object(source, obj, memo)
        issues += found.issues
        if found.hyperjob is not None:
            hyperjobs[(found.hyperjob.namespace, found.hyperjob.name)] = found.hyperjob
        elif found.other is not None:
            others[found.ref] = found.other
        elif found.broken:
            broken.add(found.ref)
        elif isinstance(found.value, Workload):
            workloads[found.ref] = found.value
        elif found.value is not None:
            read[found.group_kind].append(found.value)
    bindings = sorted(
        (b for kind in BINDING_KINDS for b in read[("work.karmada.io", kind)]), key=binding_order
    )
    claims: dict[ObjectKey, list[BindingView]] = {}
    for binding in bindings:
        claims.setdefault(binding.resource.key, []).append(binding)
    for key, claimants in claims.items():
        if key in workloads or key in broken:
            continue  # a broken template already has its issue
        demand, unknown = template_demand(key, claimants, others.get(key))
        issues += unknown
        if demand is not None:
            workloads[key] = demand
    if memo is not None:
        memo.end_build()
    return Snapshot(
        clusters=tuple(sorted(read[("cluster.karmada.io", "Cluster")], key=cluster_order)),
        bindings=tuple(sorted(bindings, key=snapshot_binding_order)),
        workloads=FrozenDict(workloads),
        policies=tuple(
            sorted(
                (p for kind in PERMANENT_ID_LABELS for p in read[("policy.karmada.io", kind)]),
                key=policy_order,
            )
        ),
        priority_classes=tuple(
            sorted(read[("scheduling.k8s.io", "PriorityClass")], key=cluster_order)
        ),
        errors=tuple(sorted(set(issues), key=issue_order)),
        hyperjobs=FrozenDict(hyperjobs),
        namespaces=FrozenDict({n.name: n for n in read[("", "Namespace")]}),
    )


def cluster_order(view: Any) -> tuple[str]:
    """Clusters and PriorityClasses: by name."""
    return (view.name,)


def snapshot_binding_order(binding: BindingView) -> tuple[str, str, str]:
    """``Snapshot.bindings``: by namespace, name, kind."""
    return binding.namespace, binding.name, binding.kind


def binding_order(binding: BindingView) -> tuple[int, str, str]:
    """Which of the bindings of one template gives its demand first: ResourceBindings before
    ClusterResourceBindings (as the informers list them), then by namespace and name; total,
    so the input's order never decides."""
    return BINDING_KINDS.index(binding.kind), binding.namespace, binding.name


def policy_order(policy: PropagationView) -> tuple[str, str, str]:
    return policy.kind, policy.namespace, policy.name


def issue_order(issue: SnapshotIssue) -> tuple[str, str, str, str, str]:
    return issue.source, issue.object, issue.path, issue.message, issue.code


def read_object(source: str, obj: Mapping[str, Any], memo: ReadMemo | None = None) -> ObjectRead:
    """What ``obj`` (the copy deduplication kept) gives the snapshot."""
    group_kind = (_group(obj), str(obj.get("kind", "")))
    ref = _ref_key(obj)
    reader = FLEET_READERS.get(group_kind) or reader_for(obj)
    if reader is None and is_hyperjob(obj):
        found: list[SnapshotIssue] = []
        hyperjob = _read_hyperjob(source, obj, found)
        return ObjectRead(group_kind, ref, hyperjob=hyperjob, issues=tuple(found))
    if reader is None:
        return ObjectRead(group_kind, ref, other=obj)
    try:
        value = reader(obj) if memo is None else memo.read(reader, obj)
    except DemandError as err:
        issue = SnapshotIssue(source, describe(obj), err.path, err.message)
        return ObjectRead(group_kind, ref, broken=True, issues=(issue,))
    return ObjectRead(group_kind, ref, value=value)


def template_demand(
    key: ObjectKey, bindings: Iterable[BindingView], template: Mapping[str, Any] | None
) -> tuple[Workload | None, list[SnapshotIssue]]:
    """The demand of template ``key``, which no reader read, from its bindings (in
    ``binding_order``): the first that gives one, and an issue for each before it that gave
    none (``template``: the object at ``key`` no reader reads, or None)."""
    issues: list[SnapshotIssue] = []
    for binding in bindings:
        demand = binding_demand(binding, _metadata(template))
        if demand is not None:
            return demand, issues
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
    return None, issues


def _read_hyperjob(
    source: str, obj: Mapping[str, Any], issues: list[SnapshotIssue]
) -> HyperJob | None:
    """A Volcano HyperJob: not a job Karmada binds, but the size of its children's group."""
    try:
        return read_hyperjob(obj)
    except DemandError as err:
        issues.append(SnapshotIssue(source, describe(obj), err.path, err.message))
        return read_split_count(obj)  # its status may still give the group's size


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
        groups.setdefault(identity(obj), []).append((source, obj))
    chosen = []
    for copies in groups.values():
        if len(copies) > 1:  # the key serializes each copy: only for actual duplicates
            copies.sort(key=newest_first)
        chosen.append(copies[0])
        issues += (duplicate_issue(copies[0], other) for other in copies[1:])
    return chosen


def identity(obj: Mapping[str, Any]) -> tuple[str, str, str, str]:
    """(API group, kind, namespace, name): copies of one object share it."""
    _, kind, namespace, name = _ref_key(obj)
    return _group(obj), kind, namespace, name


def duplicate_issue(
    kept: tuple[str, Mapping[str, Any]], other: tuple[str, Mapping[str, Any]]
) -> SnapshotIssue:
    """The issue of a copy left out for ``kept``."""
    kept_source, kept_obj = kept
    source, obj = other
    return SnapshotIssue(
        source,
        describe(obj),
        "metadata.name",
        f"duplicate object; kept the copy from {kept_source or '-'} "
        f"(resourceVersion {_version(kept_obj) or 'none'})",
        IssueCode.DUPLICATE,
    )


def newest_first(pair: tuple[str, Mapping[str, Any]]) -> tuple[int, str, str]:
    """The order of copies of one object: the first is kept."""
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
