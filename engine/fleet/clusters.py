"""``cluster.karmada.io/v1alpha1 Cluster`` → ClusterView."""

from __future__ import annotations

import json
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from engine import annotations as ann
from engine.errors import QuantityError
from engine.fleet.fields import (
    expect_int,
    expect_list,
    expect_mapping,
    expect_str,
    metadata,
    string_list,
    timestamp,
)
from engine.fleet.frozen import FrozenDict
from engine.fleet.model import ClusterView, ResourceModel, Taint
from engine.quantity import parse_quantity
from engine.resources import Resources
from engine.workloads.model import DemandError
from engine.workloads.pods import amounts

TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def read_cluster(obj: Mapping[str, Any]) -> ClusterView:
    meta = metadata(obj)
    spec = expect_mapping(obj.get("spec"), "spec")
    status = expect_mapping(obj.get("status"), "status")
    summary = expect_mapping(status.get("resourceSummary"), "status.resourceSummary")
    zones = string_list(spec.get("zones"), "spec.zones")
    zone = expect_str(spec.get("zone"), "spec.zone")
    ready, ready_at = _ready(status)
    return ClusterView(
        name=meta.name,
        labels=meta.labels,
        provider=expect_str(spec.get("provider"), "spec.provider"),
        region=expect_str(spec.get("region"), "spec.region"),
        zones=zones or ((zone,) if zone else ()),
        taints=tuple(_taint(t, f"spec.taints[{i}]") for i, t in enumerate(_list(spec, "taints"))),
        ready=ready,
        ready_changed_at=ready_at,
        api_enablements=_api_enablements(status),
        allocatable=_resources(summary, "allocatable"),
        allocated=_resources(summary, "allocated"),
        allocating=_resources(summary, "allocating"),
        resource_models=tuple(
            sorted(
                (
                    _model(m, f"spec.resourceModels[{i}]")
                    for i, m in enumerate(_list(spec, "resourceModels"))
                ),
                key=lambda m: m.grade,
            )
        ),
        node_shapes=node_shapes(meta.annotations.get(ann.NODE_SHAPES)),
        allocatable_modelings=tuple(
            sorted(
                _modeling(m, f"status.resourceSummary.allocatableModelings[{i}]")
                for i, m in enumerate(
                    _list(summary, "allocatableModelings", "status.resourceSummary")
                )
            )
        ),
    )


def node_shapes(raw: str | None) -> tuple[Resources, ...]:
    """The ``fleetgate.io/node-shapes`` annotation: a JSON list of node allocatables."""
    if not raw:
        return ()
    path = f"metadata.annotations[{ann.NODE_SHAPES}]"
    try:
        value = json.loads(raw)
    except ValueError as err:
        raise DemandError(path, f"not JSON: {err}") from err
    shapes = expect_list(value, path)
    if len(shapes) > ann.MAX_NODE_SHAPES:
        raise DemandError(path, f"{len(shapes)} node shapes, at most {ann.MAX_NODE_SHAPES}")
    found = []
    for i, shape in enumerate(shapes):
        where = f"{path}[{i}]"
        if not expect_mapping(shape, where):
            raise DemandError(where, "a node shape names at least one resource")
        found.append(Resources(amounts(shape, where)))
    return tuple(found)


def _list(parent: Mapping[str, Any], key: str, prefix: str = "spec") -> list[Any]:
    return expect_list(parent.get(key), f"{prefix}.{key}")


def _resources(summary: Mapping[str, Any], key: str) -> Resources:
    return Resources(amounts(summary.get(key), f"status.resourceSummary.{key}"))


def _ready(status: Mapping[str, Any]) -> tuple[bool, Any]:
    for i, raw in enumerate(expect_list(status.get("conditions"), "status.conditions")):
        path = f"status.conditions[{i}]"
        condition = expect_mapping(raw, path)
        if condition.get("type") == "Ready":
            state = expect_str(condition.get("status"), f"{path}.status")
            changed = timestamp(condition.get("lastTransitionTime"), f"{path}.lastTransitionTime")
            return state == "True", changed
    return False, None


def _taint(raw: Any, path: str) -> Taint:
    taint = expect_mapping(raw, path)
    effect = expect_str(taint.get("effect"), f"{path}.effect", required=True)
    if effect not in TAINT_EFFECTS:
        raise DemandError(f"{path}.effect", f"unknown effect {effect!r}")
    return Taint(
        key=expect_str(taint.get("key"), f"{path}.key", required=True),
        value=expect_str(taint.get("value"), f"{path}.value"),
        effect=effect,
    )


def _api_enablements(status: Mapping[str, Any]) -> frozenset[tuple[str, str]]:
    pairs: set[tuple[str, str]] = set()
    for i, raw in enumerate(expect_list(status.get("apiEnablements"), "status.apiEnablements")):
        path = f"status.apiEnablements[{i}]"
        entry = expect_mapping(raw, path)
        group_version = expect_str(entry.get("groupVersion"), f"{path}.groupVersion", required=True)
        for j, resource in enumerate(expect_list(entry.get("resources"), f"{path}.resources")):
            where = f"{path}.resources[{j}]"
            kind = expect_str(
                expect_mapping(resource, where).get("kind"), f"{where}.kind", required=True
            )
            pairs.add((group_version, kind))
    return frozenset(pairs)


def _model(raw: Any, path: str) -> ResourceModel:
    model = expect_mapping(raw, path)
    ranges: dict[str, tuple[Fraction, Fraction]] = {}
    for i, item in enumerate(expect_list(model.get("ranges"), f"{path}.ranges")):
        where = f"{path}.ranges[{i}]"
        entry = expect_mapping(item, where)
        name = expect_str(entry.get("name"), f"{where}.name", required=True)
        low, high = (
            _quantity(entry.get("min"), f"{where}.min"),
            _quantity(entry.get("max"), f"{where}.max"),
        )
        if high <= low:
            raise DemandError(where, f"max {entry.get('max')} is not above min {entry.get('min')}")
        ranges[name] = (low, high)
    return ResourceModel(
        grade=expect_int(model.get("grade"), f"{path}.grade"), ranges=FrozenDict(ranges)
    )


def _modeling(raw: Any, path: str) -> tuple[int, int]:
    entry = expect_mapping(raw, path)
    return expect_int(entry.get("grade"), f"{path}.grade"), expect_int(
        entry.get("count"), f"{path}.count"
    )


def _quantity(raw: Any, path: str) -> Fraction:
    if raw is None:
        raise DemandError(path, "required")
    try:
        return parse_quantity(raw)
    except QuantityError as err:
        raise DemandError(path, str(err)) from err
