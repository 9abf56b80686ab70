"""The kinds the sandbox serves: one :class:`ResourceType` each, gathered in a :class:`Registry`.

A resource type is what a CRD (or a built-in API group) declares: group, served versions and the
storage version, kind, plural/singular/short names, scope, the ``status`` subresource and
categories. Discovery, routing, the store and kubectl's RESTMapper all read it from here.

Versions: every served version of a type shares one stored object. No conversion runs between
them (like a CRD with ``conversion.strategy: None``): a read through another version only
rewrites ``apiVersion``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from engine.workloads.registry import known_kinds

# API groups whose types are compiled into kube-apiserver or Karmada's aggregated apiserver
# (strategic merge patch is accepted, unconditional updates allowed); every other group is
# served the way the apiextensions server serves a CRD.
BUILT_IN_GROUPS = frozenset(
    {
        "",
        "apps",
        "batch",
        "coordination.k8s.io",
        "scheduling.k8s.io",
        "admissionregistration.k8s.io",
        "events.k8s.io",
        "cluster.karmada.io",
        "rbac.authorization.k8s.io",
        "apiregistration.k8s.io",
        "authentication.k8s.io",
        "authorization.k8s.io",
        "apiextensions.k8s.io",
    }
)


@dataclass(frozen=True, slots=True)
class ResourceType:
    group: str
    versions: tuple[str, ...]
    storage_version: str
    kind: str
    plural: str
    singular: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    status_subresource: bool = False
    categories: tuple[str, ...] = ()

    @property
    def built_in(self) -> bool:
        """Served by a compiled-in API (not a CRD): SMP accepted, unconditional PUT allowed."""
        return self.group in BUILT_IN_GROUPS

    @property
    def key(self) -> str:
        """``<plural>.<group>`` (``namespaces`` for the core group): unique per type."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    def api_version(self, version: str | None = None) -> str:
        version = version or self.storage_version
        return f"{self.group}/{version}" if self.group else version

    @property
    def storage_api_version(self) -> str:
        return self.api_version(self.storage_version)


Resource = ResourceType | str  # a type, or its key such as "configmaps"


def _core(kind: str, plural: str, namespaced: bool, short: tuple[str, ...] = (), **kw: object):
    return ResourceType(
        group="",
        versions=("v1",),
        storage_version="v1",
        kind=kind,
        plural=plural,
        singular=kind.lower(),
        namespaced=namespaced,
        short_names=short,
        **kw,  # type: ignore[arg-type]
    )


def _single(
    group: str,
    version: str,
    kind: str,
    plural: str,
    namespaced: bool,
    short: tuple[str, ...] = (),
    **kw: object,
) -> ResourceType:
    return ResourceType(
        group=group,
        versions=(version,),
        storage_version=version,
        kind=kind,
        plural=plural,
        singular=kind.lower(),
        namespaced=namespaced,
        short_names=short,
        **kw,  # type: ignore[arg-type]
    )


KARMADA = ("karmada-io",)
RBAC = "rbac.authorization.k8s.io"
AUTHN, AUTHZ = "authentication.k8s.io", "authorization.k8s.io"
# RBAC (stored), APIService (stored; sandbox.aggregator proxies them), and the review kinds
# kube-apiserver answers without storing them (sandbox.reviews answers them, POST only)
ACCESS_TYPES: tuple[ResourceType, ...] = (
    _single(RBAC, "v1", "Role", "roles", True),
    _single(RBAC, "v1", "RoleBinding", "rolebindings", True),
    _single(RBAC, "v1", "ClusterRole", "clusterroles", False),
    _single(RBAC, "v1", "ClusterRoleBinding", "clusterrolebindings", False),
    _single(
        "apiregistration.k8s.io",
        "v1",
        "APIService",
        "apiservices",
        False,
        status_subresource=True,
        categories=("api-extensions",),
    ),
    _single(AUTHN, "v1", "TokenReview", "tokenreviews", False),
    _single(AUTHN, "v1", "SelfSubjectReview", "selfsubjectreviews", False),
    _single(AUTHZ, "v1", "SubjectAccessReview", "subjectaccessreviews", False),
    _single(AUTHZ, "v1", "SelfSubjectAccessReview", "selfsubjectaccessreviews", False),
    _single(AUTHZ, "v1", "LocalSubjectAccessReview", "localsubjectaccessreviews", True),
)


def _binding(kind: str, namespaced: bool, short: str) -> ResourceType:
    """Karmada's (Cluster)ResourceBinding: served at v1alpha2 and v1alpha1, stored at v1alpha2."""
    return ResourceType(
        group="work.karmada.io",
        versions=("v1alpha2", "v1alpha1"),
        storage_version="v1alpha2",
        kind=kind,
        plural=f"{kind.lower()}s",
        singular=kind.lower(),
        namespaced=namespaced,
        short_names=(short,),
        status_subresource=True,
        categories=KARMADA,
    )


PLATFORM_TYPES: tuple[ResourceType, ...] = (
    _core("Namespace", "namespaces", False, ("ns",), status_subresource=True),
    _core("Event", "events", True, ("ev",)),
    _core("ConfigMap", "configmaps", True, ("cm",)),
    _core("Secret", "secrets", True),
    _core("ServiceAccount", "serviceaccounts", True, ("sa",)),
    _core("Service", "services", True, ("svc",), categories=("all",), status_subresource=True),
    _single(
        "policy",
        "v1",
        "PodDisruptionBudget",
        "poddisruptionbudgets",
        True,
        ("pdb",),
        status_subresource=True,
    ),
    _single("events.k8s.io", "v1", "Event", "events", True, ("ev",)),
    _single("coordination.k8s.io", "v1", "Lease", "leases", True),
    _single("scheduling.k8s.io", "v1", "PriorityClass", "priorityclasses", False, ("pc",)),
    _single(
        "admissionregistration.k8s.io",
        "v1",
        "MutatingWebhookConfiguration",
        "mutatingwebhookconfigurations",
        False,
    ),
    _single(
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingWebhookConfiguration",
        "validatingwebhookconfigurations",
        False,
    ),
    _single(
        "cluster.karmada.io", "v1alpha1", "Cluster", "clusters", False, (), status_subresource=True
    ),
    *ACCESS_TYPES,
    _binding("ResourceBinding", True, "rb"),
    _binding("ClusterResourceBinding", False, "crb"),
    _single(
        "work.karmada.io",
        "v1alpha1",
        "Work",
        "works",
        True,
        ("wk",),
        status_subresource=True,
        categories=KARMADA,
    ),
    _single(
        "policy.karmada.io",
        "v1alpha1",
        "PropagationPolicy",
        "propagationpolicies",
        True,
        ("pp",),
        categories=KARMADA,
    ),
    _single(
        "policy.karmada.io",
        "v1alpha1",
        "ClusterPropagationPolicy",
        "clusterpropagationpolicies",
        False,
        ("cpp",),
        categories=KARMADA,
    ),
)

# Short names and categories of the job kinds, as their upstream CRDs / kube-apiserver declare.
_JOB_NAMES: dict[tuple[str, str], tuple[tuple[str, ...], tuple[str, ...]]] = {
    ("", "Pod"): (("po",), ("all",)),
    ("apps", "Deployment"): (("deploy",), ("all",)),
    ("apps", "ReplicaSet"): (("rs",), ("all",)),
    ("apps", "StatefulSet"): (("sts",), ("all",)),
    ("batch", "Job"): ((), ("all",)),
    ("batch.volcano.sh", "Job"): (("vcjob", "vj"), ()),
    ("sparkoperator.k8s.io", "SparkApplication"): (("sparkapp",), ()),
}


def plural_of(kind: str) -> str:
    """Lower-case English plural, as controller-gen derives CRD plurals."""
    lower = kind.lower()
    if lower.endswith("y") and lower[-2:-1] not in "aeiou":
        return lower[:-1] + "ies"
    if lower.endswith(("s", "x", "ch", "sh")):
        return lower + "es"
    return lower + "s"


def job_types(kinds: Iterable[tuple[str, str]] | None = None) -> tuple[ResourceType, ...]:
    """One type per (group, kind) fleetgate reads; versions of one group and kind share it."""
    by_group_kind: dict[tuple[str, str], list[str]] = {}
    for api_version, kind in kinds if kinds is not None else known_kinds():
        group, _, version = api_version.rpartition("/")
        by_group_kind.setdefault((group, kind), []).append(version)
    types = []
    for (group, kind), versions in sorted(by_group_kind.items()):
        ordered = tuple(sorted(versions, reverse=True))  # v2beta1 before v1: newest stores
        short, categories = _JOB_NAMES.get((group, kind), ((), ()))
        types.append(
            ResourceType(
                group=group,
                versions=ordered,
                storage_version=ordered[0],
                kind=kind,
                plural=plural_of(kind),
                singular=kind.lower(),
                namespaced=True,
                short_names=short,
                status_subresource=True,
                categories=categories,
            )
        )
    return tuple(types)


class Registry:
    """Look-ups over a fixed set of resource types."""

    def __init__(self, types: Iterable[ResourceType]) -> None:
        self._types = tuple(types)
        self._by_path: dict[tuple[str, str, str], ResourceType] = {}
        self._by_kind: dict[tuple[str, str], ResourceType] = {}
        self._by_key = {rt.key: rt for rt in self._types}
        for rt in self._types:
            for version in rt.versions:
                path_key = (rt.group, version, rt.plural)
                if path_key in self._by_path:
                    raise ValueError(
                        f"two resource types serve {rt.api_version(version)} {rt.plural}"
                    )
                self._by_path[path_key] = rt
                self._by_kind[(rt.api_version(version), rt.kind)] = rt

    def __iter__(self) -> Iterator[ResourceType]:
        return iter(self._types)

    def lookup(self, group: str, version: str, plural: str) -> ResourceType | None:
        """The type served at ``/apis/<group>/<version>/<plural>`` (group "" for ``/api/v1``)."""
        return self._by_path.get((group, version, plural))

    def for_kind(self, api_version: str, kind: str) -> ResourceType | None:
        return self._by_kind.get((api_version, kind))

    def by_key(self, key: str) -> ResourceType:
        """By ``<plural>.<group>`` (``configmaps``, ``resourcebindings.work.karmada.io``)."""
        return self._by_key[key]

    def groups(self) -> list[tuple[str, tuple[str, ...]]]:
        """(group, versions, preferred first) in a stable order: core, built-ins, then the rest."""
        versions: dict[str, list[str]] = {}
        for rt in self._types:
            seen = versions.setdefault(rt.group, [])
            for version in rt.versions:
                if version not in seen:
                    seen.append(version)
        order = sorted(versions, key=lambda g: (g != "", g not in BUILT_IN_GROUPS, g))
        return [(g, tuple(versions[g])) for g in order]

    def in_group_version(self, group: str, version: str) -> list[ResourceType]:
        return [rt for rt in self._types if rt.group == group and version in rt.versions]


# volcano-global's HyperJob (its docs/deploy/training.volcano.sh_hyperjobs.yaml): Karmada never
# binds it, but fleetgate reads it to size its children's co-admission group.
HYPERJOB_TYPE = _single(
    "training.volcano.sh",
    "v1alpha1",
    "HyperJob",
    "hyperjobs",
    True,
    ("hyperjob", "hj"),
    status_subresource=True,
)


# The CRDs of the Karmada kinds, as kube-apiserver's apiextensions server serves them
# (sandbox.crds); the sandbox's served kinds stay fixed whatever is created here.
CRD_TYPE = _single(
    "apiextensions.k8s.io",
    "v1",
    "CustomResourceDefinition",
    "customresourcedefinitions",
    False,
    ("crd", "crds"),
    status_subresource=True,
    categories=("api-extensions",),
)


def default_registry() -> Registry:
    """Platform kinds, Karmada's kinds, volcano-global's HyperJob and every job kind fleetgate
    reads."""
    return Registry((*PLATFORM_TYPES, CRD_TYPE, HYPERJOB_TYPE, *job_types()))
