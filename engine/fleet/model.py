"""The frozen views of Karmada objects a scheduling cycle reads, and the Snapshot holding them.

Placement values and matching (``ClusterAffinity``, ``affinity_allows``, ``tolerates``) live in
``engine.fleet.affinity`` and are re-exported here.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from fractions import Fraction

from engine import annotations as ann
from engine.errors import issue_text
from engine.fleet.affinity import (
    ClusterAffinity,
    LabelSelector,
    PlacementView,
    Requirement,
    SpreadConstraint,
    Taint,
    Toleration,
    affinity_allows,
    tolerates,
)
from engine.fleet.frozen import FrozenDict
from engine.resources import ZERO, Resources
from engine.workloads.hyperjob import HyperJob
from engine.workloads.model import Workload

__all__ = [
    "NAME_LABEL",
    "BindingView",
    "ClusterAffinity",
    "ClusterView",
    "Component",
    "Estimates",
    "FrozenDict",
    "IssueCode",
    "LabelSelector",
    "NamespaceView",
    "Notable",
    "ObjectKey",
    "ObjectRef",
    "PlacementView",
    "PodShape",
    "PriorityClassView",
    "PropagationView",
    "Requirement",
    "ResourceModel",
    "ResourceSelector",
    "Snapshot",
    "SnapshotIssue",
    "SpreadConstraint",
    "Taint",
    "Toleration",
    "affinity_allows",
    "is_notable",
    "tolerates",
]

# (apiVersion, kind, namespace, name): how a binding's spec.resource names its template.
ObjectKey = tuple[str, str, str, str]


@dataclass(frozen=True, slots=True)
class ResourceModel:
    """One node-shape grade of ``spec.resourceModels``: per resource ``[min, max)``.

    As Karmada documents, the first grade's min acts as 0 and the last grade's max as infinity;
    ``ranges`` keeps the values as written.
    """

    grade: int
    ranges: FrozenDict[str, tuple[Fraction, Fraction]]


@dataclass(frozen=True, slots=True)
class ClusterView:
    name: str
    labels: FrozenDict[str, str]
    provider: str
    region: str
    zones: tuple[str, ...]  # spec.zones, or the deprecated spec.zone when only it is set
    taints: tuple[Taint, ...]
    ready: bool
    ready_changed_at: dt.datetime | None
    # (groupVersion, kind) pairs of status.apiEnablements; empty when not reported.
    api_enablements: frozenset[tuple[str, str]]
    allocatable: Resources
    allocated: Resources
    allocating: Resources
    resource_models: tuple[ResourceModel, ...] = ()
    allocatable_modelings: tuple[tuple[int, int], ...] = ()  # (grade, node count)
    # the allocatable of each kind of node (annotation ``fleetgate.io/node-shapes``); empty
    # when not declared
    node_shapes: tuple[Resources, ...] = ()

    @property
    def free(self) -> Resources:
        """allocatable − allocated − allocating per resource, floored at 0 (Karmada's estimate)."""
        used = self.allocated + self.allocating
        return Resources(
            {k: max(v - used.get_amount(k), ZERO) for k, v in self.allocatable.items()}
        )

    def serves(self, api_version: str, kind: str) -> bool:
        """Whether the member serves ``kind`` of ``api_version``.

        A cluster that reports no apiEnablements serves everything: Karmada's status controller
        collects them whenever it reaches the member (and omits an empty list), so a real cluster
        without them is unreachable and already not Ready; treating "unknown" as "absent" would
        only make hand-written and partial snapshots unusable.
        """
        return not self.api_enablements or (api_version, kind) in self.api_enablements


@dataclass(frozen=True, slots=True)
class ResourceSelector:
    api_version: str
    kind: str
    namespace: str = ""
    name: str = ""
    label_selector: LabelSelector | None = None


@dataclass(frozen=True, slots=True)
class PropagationView:
    kind: str  # PropagationPolicy | ClusterPropagationPolicy
    namespace: str
    name: str
    permanent_id: str
    priority: int
    placement: PlacementView
    resource_selectors: tuple[ResourceSelector, ...]


@dataclass(frozen=True, slots=True)
class ObjectRef:
    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str = ""

    @property
    def key(self) -> ObjectKey:
        return (self.api_version, self.kind, self.namespace, self.name)


@dataclass(frozen=True, slots=True)
class Component:
    """One entry of a binding's ``spec.components``: a pod template's replicas and requests."""

    name: str
    replicas: int
    requests: Resources  # per replica
    priority_class_name: str = ""


@dataclass(frozen=True, slots=True)
class BindingView:
    namespace: str
    name: str
    uid: str
    kind: str  # ResourceBinding | ClusterResourceBinding
    resource: ObjectRef
    policy_kind: str  # the policy kind whose permanent-id label the binding carries, or ""
    policy_permanent_id: str
    suspended_scheduling: bool
    clusters: tuple[tuple[str, int], ...]  # spec.clusters (name, replicas)
    replicas: int
    replica_requirements: Resources | None
    priority_class_name: str  # spec.replicaRequirements.priorityClassName
    components: tuple[Component, ...]
    placement: PlacementView | None  # spec.placement, copied from the policy by Karmada
    applied: FrozenDict[str, bool]  # status.aggregatedStatus[].applied per cluster
    health: FrozenDict[str, str]  # status.aggregatedStatus[].health: Healthy|Unhealthy|Unknown
    finished: frozenset[str]  # clusters whose job status is terminal (succeeded or failed)
    conditions: FrozenDict[str, str]  # type → status
    generation: int
    scheduler_observed_generation: int
    labels: FrozenDict[str, str]
    annotations: FrozenDict[str, str]
    created_at: dt.datetime | None
    # when Karmada (or fleetgate) placed it: the Scheduled=True condition's lastTransitionTime,
    # else status.lastScheduledTime; None when neither says
    scheduled_at: dt.datetime | None = None
    failed: frozenset[str] = frozenset()  # of ``finished``: clusters where the job failed

    @property
    def ref(self) -> str:
        return (
            f"{self.kind}/{self.namespace}/{self.name}"
            if self.namespace
            else f"{self.kind}/{self.name}"
        )

    def healthy(self, cluster: str) -> bool:
        return self.health.get(cluster) == "Healthy"


NAME_LABEL = "kubernetes.io/metadata.name"  # the API server sets it on every Namespace


@dataclass(frozen=True, slots=True)
class NamespaceView:
    name: str
    labels: FrozenDict[str, str]  # NAME_LABEL included


@dataclass(frozen=True, slots=True)
class PriorityClassView:
    name: str
    value: int
    global_default: bool


class IssueCode(StrEnum):
    MALFORMED = "Malformed"
    """A field has the wrong type or value; the object was left out."""
    DUPLICATE = "Duplicate"
    """The same object appears more than once; the newest copy was kept."""
    UNKNOWN_DEMAND = "UnknownDemand"
    """A binding whose demand can be read neither from its template nor from the binding."""
    TEMPLATE_NOT_FOUND = "TemplateNotFound"
    """A binding whose template is not in the snapshot and whose demand the binding does not
    carry. Karmada deletes a binding with its template, so in a live fleet this passes: the
    watch of the template's kind lags the bindings'."""
    UNREADABLE = "Unreadable"
    """A file that cannot be read or parsed, or a document that is not an object."""
    REFUSED = "Refused"
    """A YAML document over the nesting or alias limits (``engine.yamlguard``): left out (the
    documents after it in its file are read); a warning, the rest of the snapshot is decided."""
    UNBOUND = "Unbound"
    """A job template no binding refers to: Karmada has not propagated it, so it is not decided."""


@dataclass(frozen=True, slots=True)
class SnapshotIssue:
    source: str  # file name, or ""
    object: str  # Kind/namespace/name or Kind/name, or ""
    path: str  # field path inside the object, or ""
    message: str
    code: IssueCode = IssueCode.MALFORMED
    line: int = 0  # 1-based position in the file where known (YAML errors), else 0
    column: int = 0

    def __str__(self) -> str:
        """``FILE:LINE:COL: Kind/name: path: message`` without the parts not known."""
        return issue_text(self.source, self.line, self.column, self.object, self.path, self.message)


# A pod's requests as the cycle holds them: (resource, amount in milli-units) sorted by name,
# ``pods`` (1000) included.
PodShape = tuple[tuple[str, int], ...]


@dataclass(frozen=True, slots=True)
class Estimates:
    """What the members' karmada-scheduler-estimators said just before the cycle (the
    reconciler asks them; dry-run and the simulator leave this empty).

    ``replicas``: (cluster, pod shape) → how many such pods the member can start now, by its
    real nodes. ``failed``: cluster → why its estimator gave no answer this time (its resource
    models were used instead)."""

    replicas: FrozenDict[tuple[str, PodShape], int] = field(default_factory=FrozenDict)
    failed: FrozenDict[str, str] = field(default_factory=FrozenDict)

    def by_cluster(self) -> dict[str, dict[PodShape, int]]:
        """cluster → pod shape → replicas."""
        found: dict[str, dict[PodShape, int]] = {}
        for (cluster, shape), replicas in self.replicas.items():
            found.setdefault(cluster, {})[shape] = replicas
        return found


def is_notable(binding: BindingView) -> bool:
    """Placed, or carrying a backoff, exclusions or a group plan."""
    if binding.clusters:
        return True
    notes = binding.annotations
    return ann.BACKOFF_UNTIL in notes or ann.EXCLUDED_CLUSTERS in notes or ann.GROUP_PLAN in notes


@dataclass(frozen=True, slots=True)
class Notable:
    """The notable bindings among a snapshot's ``among`` (``Snapshot.notable_bindings``), kept
    as bindings come and go instead of found again every pass."""

    among: tuple[BindingView, ...]
    bindings: tuple[BindingView, ...]


@dataclass(frozen=True, slots=True)
class Snapshot:
    clusters: tuple[ClusterView, ...]  # sorted by name
    bindings: tuple[BindingView, ...]  # sorted by namespace, name
    workloads: FrozenDict[ObjectKey, Workload]
    policies: tuple[PropagationView, ...]  # sorted by kind, namespace, name
    priority_classes: tuple[PriorityClassView, ...]  # sorted by name
    errors: tuple[SnapshotIssue, ...] = ()
    # (namespace, name) → Volcano HyperJob: the size of its co-admission group (cycle/groups.py)
    hyperjobs: FrozenDict[tuple[str, str], HyperJob] = field(default_factory=FrozenDict)
    estimates: Estimates = field(default_factory=Estimates)
    # name → Namespace (its labels, for the queues' ``namespaceSelector``)
    namespaces: FrozenDict[str, NamespaceView] = field(default_factory=FrozenDict)
    # the notable bindings, when whoever built the snapshot kept them (engine.fleet.live):
    # derived from ``bindings``, so never compared
    notable: Notable | None = field(default=None, compare=False, repr=False)

    def notable_bindings(self) -> tuple[BindingView, ...]:
        """The bindings a pass's plan looks at one by one, in snapshot order: the placed ones,
        and waiting ones with a backoff, exclusions or a group plan (:func:`is_notable`). Every
        other binding is waiting and carries none of those: a plan has nothing to do for it."""
        kept = self.notable
        if kept is not None and kept.among is self.bindings:
            return kept.bindings
        return tuple(b for b in self.bindings if is_notable(b))

    def namespace_labels(self, name: str) -> Mapping[str, str]:
        """The Namespace's labels; of one not in the snapshot, only the name label the API
        server would have set."""
        found = self.namespaces.get(name)
        return found.labels if found is not None else {NAME_LABEL: name}

    def cluster(self, name: str) -> ClusterView | None:
        return next((c for c in self.clusters if c.name == name), None)

    def workload_for(self, binding: BindingView) -> Workload | None:
        """The demand of the binding's template (or, failing that, of the binding itself)."""
        return self.workloads.get(binding.resource.key)

    def policy_for(self, binding: BindingView) -> PropagationView | None:
        if not binding.policy_permanent_id:
            return None
        return next(
            (
                p
                for p in self.policies
                if p.kind == binding.policy_kind and p.permanent_id == binding.policy_permanent_id
            ),
            None,
        )

    def default_priority_class(self) -> PriorityClassView | None:
        """The globalDefault class; with several (a race Kubernetes allows), the lowest value,
        as the Kubernetes Priority admission plugin picks."""
        defaults = [p for p in self.priority_classes if p.global_default]
        return min(defaults, key=lambda p: (p.value, p.name), default=None)

    def priority_value(self, name: str | None) -> int | None:
        """The value of PriorityClass ``name``; no name → the global default's value or 0.

        None when ``name`` is not in the snapshot: Kubernetes rejects pods that name a missing
        class, so callers must give the job a reason rather than a guessed priority.
        """
        if not name:
            default = self.default_priority_class()
            return default.value if default else 0
        found = next((p for p in self.priority_classes if p.name == name), None)
        return found.value if found else None

    def issues_for(self, ref: str) -> tuple[SnapshotIssue, ...]:
        return tuple(issue for issue in self.errors if issue.object == ref)
