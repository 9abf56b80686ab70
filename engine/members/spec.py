"""What a fleet file says: the frozen description of each member cluster and the fleet defaults."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from fractions import Fraction

from engine.fleet.frozen import FrozenDict
from engine.fleet.model import ResourceModel, Taint
from engine.resources import PODS, Resources

DEFAULT_JOB_DURATION = dt.timedelta(minutes=10)
DEFAULT_STATUS_PERIOD = dt.timedelta(seconds=10)  # Karmada's --cluster-status-update-frequency
DEFAULT_PODS_PER_NODE = 110  # the kubelet's --max-pods default

# (apiVersion, kind) every Kubernetes member serves, whatever ``kinds`` lists.
BUILTIN_KINDS: tuple[tuple[str, str], ...] = (
    ("v1", "ConfigMap"),
    ("v1", "Pod"),
    ("v1", "Secret"),
    ("v1", "Service"),
    ("v1", "ServiceAccount"),
    ("apps/v1", "Deployment"),
    ("apps/v1", "ReplicaSet"),
    ("apps/v1", "StatefulSet"),
    ("batch/v1", "Job"),
    ("scheduling.k8s.io/v1", "PriorityClass"),
)


@dataclass(frozen=True, slots=True)
class NodeGroup:
    """``count`` identical nodes. ``allocatable`` is per node and always has ``pods``."""

    count: int
    allocatable: Resources
    labels: FrozenDict[str, str] = field(default_factory=FrozenDict)

    @staticmethod
    def of(count: int, shape: dict[str, Fraction | int], **labels: str) -> NodeGroup:
        """A group from a plain shape (a builder for tests and the simulator)."""
        amounts = {PODS: DEFAULT_PODS_PER_NODE, **shape}
        return NodeGroup(count, Resources(amounts), FrozenDict(labels))


@dataclass(frozen=True, slots=True)
class ClusterSpec:
    """One member cluster of a fleet file.

    ``kinds`` are the (apiVersion, kind) pairs the member serves besides BUILTIN_KINDS;
    ``resource_models`` are the Karmada ``spec.resourceModels`` grades, empty for the
    defaults derived from the node shapes (``engine.members.grades.default_models``).
    """

    name: str
    labels: FrozenDict[str, str] = field(default_factory=FrozenDict)
    region: str = ""
    provider: str = ""
    zones: tuple[str, ...] = ()
    kinds: tuple[tuple[str, str], ...] = ()
    taints: tuple[Taint, ...] = ()
    nodes: tuple[NodeGroup, ...] = ()
    resource_models: tuple[ResourceModel, ...] = ()
    api_endpoint: str = ""
    kubernetes_version: str = "v1.31.0"

    @property
    def endpoint(self) -> str:
        return self.api_endpoint or f"https://{self.name}.members.sandbox.invalid:6443"

    @property
    def served(self) -> tuple[tuple[str, str], ...]:
        """Every (apiVersion, kind) the member serves, sorted."""
        return tuple(sorted(set(BUILTIN_KINDS) | set(self.kinds)))


@dataclass(frozen=True, slots=True)
class FleetSpec:
    """A whole fleet file: its clusters in file order and the fleet-wide defaults."""

    clusters: tuple[ClusterSpec, ...]
    job_duration: dt.timedelta = DEFAULT_JOB_DURATION
    status_period: dt.timedelta = DEFAULT_STATUS_PERIOD
    file: str = ""
