"""Placement values and Karmada's cluster matching rules, pure.

``affinity_allows`` follows Karmada's ``util.ClusterMatches``: excluded names first, then the
label selector (``metav1.LabelSelectorAsSelector``), then the field selector on ``provider``,
``region`` and ``zone``, then ``clusterNames`` (empty means any). ``tolerates`` follows the
Kubernetes ``Toleration.ToleratesTaint`` rules as Karmada's TaintToleration filter applies them:
only ``NoSchedule`` and ``NoExecute`` taints must be tolerated.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from engine.fleet.frozen import FrozenDict

LABEL_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
FIELD_KEYS = ("provider", "region", "zone")
BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: str  # NoSchedule | PreferNoSchedule | NoExecute


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""  # "" with operator Exists tolerates every taint
    operator: str = "Equal"  # Equal | Exists (Lt/Gt are feature-gated and tolerate nothing here)
    value: str = ""
    effect: str = ""  # "" matches every effect
    toleration_seconds: int | None = None

    def tolerates_taint(self, taint: Taint) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        if self.operator in ("", "Equal"):
            return self.value == taint.value
        return False


@dataclass(frozen=True, slots=True)
class Requirement:
    """One ``matchExpressions`` entry: key, operator (In NotIn Exists DoesNotExist), values."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, fields: Mapping[str, str]) -> bool:
        present = self.key in fields
        if self.operator == "In":
            return present and fields[self.key] in self.values
        if self.operator == "NotIn":
            return not present or fields[self.key] not in self.values
        if self.operator == "Exists":
            return present
        if self.operator == "DoesNotExist":
            return not present
        return False


@dataclass(frozen=True, slots=True)
class LabelSelector:
    match_labels: FrozenDict[str, str] = field(default_factory=FrozenDict)
    match_expressions: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """An empty selector matches everything, as ``LabelSelectorAsSelector`` makes it."""
        if any(labels.get(k) != v for k, v in self.match_labels.items()):
            return False
        return all(r.matches(labels) for r in self.match_expressions)


@dataclass(frozen=True, slots=True)
class ClusterAffinity:
    cluster_names: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    label_selector: LabelSelector | None = None
    field_selector: tuple[Requirement, ...] = ()  # keys provider, region, zone


@dataclass(frozen=True, slots=True)
class SpreadConstraint:
    spread_by_field: str = ""  # cluster | region | zone | provider
    spread_by_label: str = ""
    max_groups: int = 0
    min_groups: int = 0


@dataclass(frozen=True, slots=True)
class PlacementView:
    """``spec.placement`` of a PropagationPolicy (and its copy in a ResourceBinding)."""

    affinity: ClusterAffinity | None = None
    affinities: tuple[tuple[str, ClusterAffinity], ...] = ()  # ordered clusterAffinities
    tolerations: tuple[Toleration, ...] = ()
    spread_constraints: tuple[SpreadConstraint, ...] = ()


class ClusterFields(Protocol):
    """What matching reads of a cluster (ClusterView has it)."""

    @property
    def name(self) -> str: ...
    @property
    def labels(self) -> Mapping[str, str]: ...
    @property
    def provider(self) -> str: ...
    @property
    def region(self) -> str: ...
    @property
    def zones(self) -> tuple[str, ...]: ...


def affinity_allows(affinity: ClusterAffinity | None, cluster: ClusterFields) -> bool:
    """Whether ``cluster`` matches ``affinity`` by Karmada's rules; no affinity allows all."""
    if affinity is None:
        return True
    if cluster.name in affinity.exclude:
        return False
    if affinity.label_selector is not None and not affinity.label_selector.matches(cluster.labels):
        return False
    if not all(_field_matches(r, cluster) for r in affinity.field_selector):
        return False
    return not affinity.cluster_names or cluster.name in affinity.cluster_names


def _field_matches(requirement: Requirement, cluster: ClusterFields) -> bool:
    if requirement.key == "zone":
        return _zones_match(requirement, cluster.zones)
    fields = {k: v for k, v in (("provider", cluster.provider), ("region", cluster.region)) if v}
    return requirement.matches(fields)


def _zones_match(requirement: Requirement, zones: Sequence[str]) -> bool:
    """Karmada ``matchZones``: In needs every zone of the cluster listed (and at least one zone),
    NotIn needs none of them listed; Exists and DoesNotExist test whether it has zones."""
    if requirement.operator == "In":
        return bool(zones) and all(z in requirement.values for z in zones)
    if requirement.operator == "NotIn":
        return not any(z in requirement.values for z in zones)
    if requirement.operator == "Exists":
        return bool(zones)
    if requirement.operator == "DoesNotExist":
        return not zones
    return False


def tolerates(tolerations: Iterable[Toleration], taints: Iterable[Taint]) -> bool:
    """True when every NoSchedule/NoExecute taint is tolerated by at least one toleration."""
    return not untolerated(tolerations, taints)


def untolerated(tolerations: Iterable[Toleration], taints: Iterable[Taint]) -> tuple[Taint, ...]:
    """The blocking taints no toleration covers, for messages."""
    tolerations = tuple(tolerations)
    return tuple(
        taint
        for taint in taints
        if taint.effect in BLOCKING_EFFECTS
        and not any(t.tolerates_taint(taint) for t in tolerations)
    )
