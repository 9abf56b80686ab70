"""The resources the reconciler watches: group, versions (preferred first), plural, scope."""

from __future__ import annotations

from dataclasses import dataclass

from engine.workloads.registry import known_kinds


@dataclass(frozen=True, slots=True)
class Resource:
    """One watched resource. ``versions``: tried in order; a version the server answers 404
    for is skipped (kubeflow.org MPIJob is v2beta1 with mpi-operator, v1 with the training
    operator)."""

    group: str
    versions: tuple[str, ...]
    plural: str
    kind: str
    namespaced: bool

    @property
    def key(self) -> str:
        """``<plural>.<group>`` (``pods`` for the core group): unique per resource."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def path(self, version: str) -> str:
        """The collection path across all namespaces."""
        prefix = f"/apis/{self.group}/{version}" if self.group else f"/api/{version}"
        return f"{prefix}/{self.plural}"

    def api_version(self, version: str) -> str:
        return f"{self.group}/{version}" if self.group else version


RESOURCE_BINDINGS = Resource(
    "work.karmada.io", ("v1alpha2",), "resourcebindings", "ResourceBinding", True
)
CLUSTER_RESOURCE_BINDINGS = Resource(
    "work.karmada.io", ("v1alpha2",), "clusterresourcebindings", "ClusterResourceBinding", False
)
CLUSTERS = Resource("cluster.karmada.io", ("v1alpha1",), "clusters", "Cluster", False)
PROPAGATION_POLICIES = Resource(
    "policy.karmada.io", ("v1alpha1",), "propagationpolicies", "PropagationPolicy", True
)
CLUSTER_PROPAGATION_POLICIES = Resource(
    "policy.karmada.io",
    ("v1alpha1",),
    "clusterpropagationpolicies",
    "ClusterPropagationPolicy",
    False,
)
PRIORITY_CLASSES = Resource("scheduling.k8s.io", ("v1",), "priorityclasses", "PriorityClass", False)
# their labels decide which queues a namespace's jobs may use (Queue.spec.namespaceSelector)
NAMESPACES = Resource("", ("v1",), "namespaces", "Namespace", False)
# volcano-global's HyperJob: never bound, read for the size of its children's group (optional,
# like every kind: a server without the CRD answers 404, and the informer counts it empty)
HYPERJOBS = Resource("training.volcano.sh", ("v1alpha1",), "hyperjobs", "HyperJob", True)
FLEET_RESOURCES = (
    RESOURCE_BINDINGS,
    CLUSTER_RESOURCE_BINDINGS,
    CLUSTERS,
    PROPAGATION_POLICIES,
    CLUSTER_PROPAGATION_POLICIES,
    PRIORITY_CLASSES,
    NAMESPACES,
    HYPERJOBS,
)


def plural_of(kind: str) -> str:
    """Lower-case English plural, as controller-gen derives CRD plurals."""
    lower = kind.lower()
    if lower.endswith("y") and lower[-2:-1] not in "aeiou":
        return lower[:-1] + "ies"
    if lower.endswith(("s", "x", "ch", "sh")):
        return lower + "es"
    return lower + "s"


def job_resources() -> tuple[Resource, ...]:
    """One resource per (group, kind) of the job templates fleetgate reads
    (``engine.workloads.registry.known_kinds``); its versions newest first."""
    by_group_kind: dict[tuple[str, str], list[str]] = {}
    for api_version, kind in known_kinds():
        group, _, version = api_version.rpartition("/")
        by_group_kind.setdefault((group, kind), []).append(version)
    return tuple(
        Resource(group, tuple(sorted(versions, reverse=True)), plural_of(kind), kind, True)
        for (group, kind), versions in sorted(by_group_kind.items())
    )


def default_resources() -> tuple[Resource, ...]:
    return FLEET_RESOURCES + job_resources()
