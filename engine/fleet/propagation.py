"""``policy.karmada.io/v1alpha1`` PropagationPolicy and ClusterPropagationPolicy → PropagationView.

``read_placement`` also reads the ``spec.placement`` Karmada copies into a ResourceBinding.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.fleet.affinity import FIELD_KEYS, LABEL_OPERATORS
from engine.fleet.fields import (
    expect_int,
    expect_list,
    expect_mapping,
    expect_str,
    metadata,
    string_list,
    string_map,
)
from engine.fleet.model import (
    ClusterAffinity,
    LabelSelector,
    PlacementView,
    PropagationView,
    Requirement,
    ResourceSelector,
    SpreadConstraint,
    Toleration,
)
from engine.workloads.model import DemandError

PERMANENT_ID_LABELS = {
    "PropagationPolicy": "propagationpolicy.karmada.io/permanent-id",
    "ClusterPropagationPolicy": "clusterpropagationpolicy.karmada.io/permanent-id",
}
INT32_MIN = -(2**31)


def read_policy(obj: Mapping[str, Any]) -> PropagationView:
    kind = str(obj.get("kind", ""))
    if kind not in PERMANENT_ID_LABELS:
        raise DemandError("kind", f"not a propagation policy kind: {kind!r}")
    meta = metadata(obj)
    spec = expect_mapping(obj.get("spec"), "spec")
    selectors = expect_list(spec.get("resourceSelectors"), "spec.resourceSelectors")
    if not selectors:
        raise DemandError("spec.resourceSelectors", "required")
    return PropagationView(
        kind=kind,
        namespace=meta.namespace if kind == "PropagationPolicy" else "",
        name=meta.name,
        permanent_id=meta.labels.get(PERMANENT_ID_LABELS[kind], ""),
        priority=expect_int(spec.get("priority"), "spec.priority", default=0, minimum=INT32_MIN),
        placement=read_placement(spec.get("placement"), "spec.placement"),
        resource_selectors=tuple(
            _resource_selector(s, f"spec.resourceSelectors[{i}]") for i, s in enumerate(selectors)
        ),
    )


def read_placement(raw: Any, path: str) -> PlacementView:
    placement = expect_mapping(raw, path)
    single = placement.get("clusterAffinity")
    affinities = []
    for i, item in enumerate(
        expect_list(placement.get("clusterAffinities"), f"{path}.clusterAffinities")
    ):
        where = f"{path}.clusterAffinities[{i}]"
        name = expect_str(
            expect_mapping(item, where).get("affinityName"), f"{where}.affinityName", required=True
        )
        affinities.append((name, read_affinity(item, where)))
    return PlacementView(
        affinity=None if single is None else read_affinity(single, f"{path}.clusterAffinity"),
        affinities=tuple(affinities),
        tolerations=tuple(
            _toleration(t, f"{path}.clusterTolerations[{i}]")
            for i, t in enumerate(
                expect_list(placement.get("clusterTolerations"), f"{path}.clusterTolerations")
            )
        ),
        spread_constraints=tuple(
            _spread(s, f"{path}.spreadConstraints[{i}]")
            for i, s in enumerate(
                expect_list(placement.get("spreadConstraints"), f"{path}.spreadConstraints")
            )
        ),
    )


def read_affinity(raw: Any, path: str) -> ClusterAffinity:
    affinity = expect_mapping(raw, path)
    labels = affinity.get("labelSelector")
    fields = expect_mapping(affinity.get("fieldSelector"), f"{path}.fieldSelector")
    field_path = f"{path}.fieldSelector.matchExpressions"
    requirements = _requirements(fields.get("matchExpressions"), field_path)
    for i, requirement in enumerate(requirements):
        if requirement.key not in FIELD_KEYS:
            raise DemandError(f"{field_path}[{i}].key", f"must be one of {', '.join(FIELD_KEYS)}")
    return ClusterAffinity(
        cluster_names=string_list(affinity.get("clusterNames"), f"{path}.clusterNames"),
        exclude=string_list(affinity.get("exclude"), f"{path}.exclude"),
        label_selector=None
        if labels is None
        else read_label_selector(labels, f"{path}.labelSelector"),
        field_selector=requirements,
    )


def read_label_selector(raw: Any, path: str) -> LabelSelector:
    selector = expect_mapping(raw, path)
    return LabelSelector(
        match_labels=string_map(selector.get("matchLabels"), f"{path}.matchLabels"),
        match_expressions=_requirements(
            selector.get("matchExpressions"), f"{path}.matchExpressions"
        ),
    )


def _requirements(raw: Any, path: str) -> tuple[Requirement, ...]:
    result = []
    for i, item in enumerate(expect_list(raw, path)):
        where = f"{path}[{i}]"
        entry = expect_mapping(item, where)
        operator = expect_str(entry.get("operator"), f"{where}.operator", required=True)
        if operator not in LABEL_OPERATORS:
            raise DemandError(f"{where}.operator", f"must be one of {', '.join(LABEL_OPERATORS)}")
        values = string_list(entry.get("values"), f"{where}.values")
        if operator in ("In", "NotIn") and not values:
            raise DemandError(f"{where}.values", f"must be non-empty for {operator}")
        key = expect_str(entry.get("key"), f"{where}.key", required=True)
        result.append(Requirement(key=key, operator=operator, values=values))
    return tuple(result)


def _toleration(raw: Any, path: str) -> Toleration:
    entry = expect_mapping(raw, path)
    seconds = entry.get("tolerationSeconds")
    return Toleration(
        key=expect_str(entry.get("key"), f"{path}.key"),
        operator=expect_str(entry.get("operator"), f"{path}.operator") or "Equal",
        value=expect_str(entry.get("value"), f"{path}.value"),
        effect=expect_str(entry.get("effect"), f"{path}.effect"),
        toleration_seconds=None
        if seconds is None
        else expect_int(seconds, f"{path}.tolerationSeconds", minimum=-(2**63)),
    )


def _spread(raw: Any, path: str) -> SpreadConstraint:
    entry = expect_mapping(raw, path)
    return SpreadConstraint(
        spread_by_field=expect_str(entry.get("spreadByField"), f"{path}.spreadByField"),
        spread_by_label=expect_str(entry.get("spreadByLabel"), f"{path}.spreadByLabel"),
        max_groups=expect_int(entry.get("maxGroups"), f"{path}.maxGroups", default=0),
        min_groups=expect_int(entry.get("minGroups"), f"{path}.minGroups", default=0),
    )


def _resource_selector(raw: Any, path: str) -> ResourceSelector:
    entry = expect_mapping(raw, path)
    labels = entry.get("labelSelector")
    return ResourceSelector(
        api_version=expect_str(entry.get("apiVersion"), f"{path}.apiVersion", required=True),
        kind=expect_str(entry.get("kind"), f"{path}.kind", required=True),
        namespace=expect_str(entry.get("namespace"), f"{path}.namespace"),
        name=expect_str(entry.get("name"), f"{path}.name"),
        label_selector=None
        if labels is None
        else read_label_selector(labels, f"{path}.labelSelector"),
    )
