"""``fleetgate inspect``: the demand of every workload object in a set of Kubernetes objects,
and a warning for each Karmada Cluster whose resource models cannot see one of its declared
node shapes (``fleetgate.io/node-shapes``) whole (``engine.fleet.nodeshape``)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from engine.cycle import map_template
from engine.errors import issue_text
from engine.fleet.clusters import read_cluster
from engine.fleet.model import SnapshotIssue
from engine.fleet.nodeshape import unseen_shapes
from engine.fleet.snapshot import describe, flatten_lists
from engine.policy.policyset import PolicySet
from engine.workloads import hyperjob
from engine.workloads.model import DemandError, Workload
from engine.workloads.names import qualified_kind
from engine.workloads.registry import read_workload


@dataclass(frozen=True, slots=True)
class InspectedError:
    """One object or file that could not be read; ``line`` 0 when no position is known."""

    file: str
    object: str
    path: str
    message: str
    line: int = 0
    column: int = 0

    @classmethod
    def of(cls, issue: SnapshotIssue) -> InspectedError:
        return cls(issue.source, issue.object, issue.path, issue.message, issue.line, issue.column)

    def __str__(self) -> str:
        return issue_text(self.file, self.line, self.column, self.object, self.path, self.message)

    def to_json(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "line": self.line or None,
            "column": self.column or None,
            "object": self.object,
            "path": self.path,
            "message": self.message,
        }


@dataclass(frozen=True, slots=True)
class Inspected:
    workloads: tuple[tuple[Workload, str | None], ...]  # with the mapped queue
    errors: tuple[InspectedError, ...]
    hyperjobs: tuple[hyperjob.HyperJob, ...] = ()  # their children are among ``workloads``
    warnings: tuple[str, ...] = ()  # node shapes a Cluster's resource models cannot see whole

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "workloads": [w.to_json() | {"queue": queue} for w, queue in self.workloads],
            "errors": [e.to_json() for e in self.errors],
        }
        if self.hyperjobs:
            out["hyperJobs"] = [hyperjob.to_json(h) for h in self.hyperjobs]
        if self.warnings:
            out["warnings"] = list(self.warnings)
        return out


def inspect_objects(
    objects: Iterable[tuple[str, Mapping[str, Any]]],
    policies: PolicySet,
    now: dt.datetime,
) -> Inspected:
    """Read every workload's demand; map its queue with the SchedulingPolicy of ``policies``;
    collect errors with places."""
    workloads: list[tuple[Workload, str | None]] = []
    errors: list[InspectedError] = []
    unreadable: list[SnapshotIssue] = []
    hyperjobs: list[hyperjob.HyperJob] = []
    warnings: list[str] = []
    for file, obj in flatten_lists(objects, unreadable):
        if _is_cluster(obj):
            try:
                view = read_cluster(obj)
            except DemandError as err:
                errors.append(InspectedError(file, describe(obj), err.path, err.message))
                continue
            warnings += unseen_shapes(view.name, view.resource_models, view.node_shapes)
            continue
        if hyperjob.is_hyperjob(obj):  # a HyperJob: the demand of each child it stamps out
            try:
                hyperjobs.append(hyperjob.read_hyperjob(obj))
            except DemandError as err:
                errors.append(InspectedError(file, describe(obj), err.path, err.message))
            continue
        try:
            workload = read_workload(obj)
        except DemandError as err:
            errors.append(InspectedError(file, describe(obj), err.path, err.message))
            continue
        if workload is None:
            continue
        mapped = map_template(policies, workload, 0, now)
        if mapped.error:
            message = f"cannot map the job to a queue: {mapped.error}"
            errors.append(InspectedError(file, describe(obj), "", message))
        workloads.append((workload, mapped.queue))
    errors.extend(InspectedError.of(issue) for issue in unreadable)
    seen = {w.ref for w, _ in workloads}  # a child listed beside its HyperJob is shown once
    for found in hyperjobs:
        for child in found.children():
            if child.ref not in seen:
                mapped = map_template(policies, child, 0, now)
                workloads.append((child, mapped.queue))
    return Inspected(tuple(workloads), tuple(errors), tuple(hyperjobs), tuple(warnings))


def _is_cluster(obj: Mapping[str, Any]) -> bool:
    api_version = str(obj.get("apiVersion", ""))
    return obj.get("kind") == "Cluster" and api_version.startswith("cluster.karmada.io/")


_TABLE_RESOURCES = ("cpu", "memory", "nvidia.com/gpu")


def table(result: Inspected) -> str:
    """A fixed-width table for people: one row per workload, then the errors."""
    headers = ["KIND", "NAMESPACE", "NAME", "QUEUE", "PODS", "MIN", "CPU", "MEMORY", "GPU", "OTHER"]
    rows = [headers]
    for workload, queue in result.workloads:
        total = workload.total
        other = sorted(set(total) - {*_TABLE_RESOURCES, "pods"})
        rows.append(
            [
                qualified_kind(workload.api_version, workload.kind),
                workload.namespace or "-",
                workload.name,
                queue or "-",
                str(workload.pods),
                str(workload.min_member),
                _number(float(total.get_amount("cpu"))),
                _bytes(int(total.get_amount("memory"))),
                _number(float(total.get_amount("nvidia.com/gpu"))),
                ",".join(f"{k}={_amount(k, total[k])}" for k in other) or "-",
            ]
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(headers))]
    lines = [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]
    lines += [hyperjob.summary(found) for found in result.hyperjobs]
    lines += [f"warning: {warning}" for warning in result.warnings]
    for error in result.errors:
        lines.append(f"error: {error}")
    return "\n".join(lines)


def _amount(resource: str, value: Fraction) -> str:
    return _bytes(int(value)) if resource.endswith("memory") else _number(float(value))


def _number(value: float) -> str:
    return str(int(value)) if value == int(value) else f"{value:g}"


def _bytes(value: int) -> str:
    for unit, size in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
        if value >= size:
            return f"{value / size:.4g}{unit}"
    return str(value)
