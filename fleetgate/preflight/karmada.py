"""Karmada on the API server: its release, the CRDs of the kinds fleetgate reads and writes with
the fields it writes, and the Cluster API.

**The release.** The karmada-apiserver's ``/version`` is kube-apiserver's, not Karmada's. The
ResourceBinding CRD tells instead: each Karmada release that changed it added fields, so the
newest field present gives a lower bound (read from Karmada's git history,
``charts/karmada/_crds/bases/work/work.karmada.io_resourcebindings.yaml``, :data:`RELEASES`).
Binding suspension (``spec.suspension.scheduling``) arrived in v1.13.0 and works reliably from
v1.13.3 (karmada-io/karmada#6356); a CRD of v1.13 or v1.14 cannot tell which patch release runs.

**The fields.** A field the served schema lacks is pruned by the API server without an error,
so a write of it is silently lost: every field fleetgate writes on bindings
(``engine.enforce.plan.BINDING_FIELDS``) must be in the schema of the version it uses.

CRDs can be read only with leave to get ``customresourcedefinitions``; without it, discovery
(open to every user) still says whether each kind is served, and the schema is not checked.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.enforce.plan import BINDING_FIELDS
from fleetgate.preflight.client import Answer, Api
from fleetgate.preflight.model import Check, fail, ok, skip, warn
from reconciler.resources import (
    CLUSTER_PROPAGATION_POLICIES,
    CLUSTER_RESOURCE_BINDINGS,
    CLUSTERS,
    PROPAGATION_POLICIES,
    RESOURCE_BINDINGS,
    Resource,
)

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
# (release, a ResourceBinding field that release added), newest first
RELEASES = (
    ("v1.18", "spec.placement.clusterAffinities[].overflowAffinities"),
    ("v1.17", "spec.placement.workloadAffinity"),
    ("v1.15", "spec.components"),
    ("v1.13", "spec.suspension.scheduling"),
    ("v1.11", "spec.suspension"),
)
NEEDED = "v1.13"  # spec.suspension.scheduling
RECOMMENDED = "v1.15"
# the kinds fleetgate reads and writes through CRDs, with the fields it writes
WRITTEN: tuple[tuple[Resource, tuple[str, ...]], ...] = (
    (RESOURCE_BINDINGS, BINDING_FIELDS),
    (CLUSTER_RESOURCE_BINDINGS, BINDING_FIELDS),
    (PROPAGATION_POLICIES, ()),
    (CLUSTER_PROPAGATION_POLICIES, ()),
)
CRDS_OF_A_RELEASE = "Karmada's CRDs of v1.13.3 or later (charts/karmada/_crds in its repository)"
INSTALL_CRDS = f"install {CRDS_OF_A_RELEASE}; is --kubeconfig the karmada-apiserver's?"
UPGRADE_CRDS = f"apply {CRDS_OF_A_RELEASE}"


def check_karmada(api: Api) -> list[Check]:
    """The release, one row per CRD, and the Cluster API."""
    crds = {resource.key: api.get(f"{CRDS}/{resource.key}") for resource, _ in WRITTEN}
    checks = [_release(crds[RESOURCE_BINDINGS.key], RESOURCE_BINDINGS.versions[0])]
    for resource, fields in WRITTEN:
        checks.append(_crd(api, resource, fields, crds[resource.key]))
    checks.append(_cluster_api(api))
    return checks


def schema_has(schema: Mapping[str, Any], path: str) -> bool:
    """Whether an ``openAPIV3Schema`` declares ``path`` (``a.b[].c``: ``[]`` an array's item)."""
    node: Any = schema
    for part in path.split("."):
        name, items = part.removesuffix("[]"), part.endswith("[]")
        node = ((node or {}).get("properties") or {}).get(name)
        if node is None:
            return False
        if items:
            node = node.get("items")
    return node is not None


def version_schema(crd: Mapping[str, Any], version: str) -> Mapping[str, Any] | None:
    """The served version's entry of a CRD, or None."""
    for entry in (crd.get("spec") or {}).get("versions") or ():
        if entry.get("name") == version and entry.get("served"):
            return entry
    return None


def release_of(schema: Mapping[str, Any]) -> str | None:
    """The newest release of :data:`RELEASES` whose field the schema has."""
    return next((release for release, field in RELEASES if schema_has(schema, field)), None)


def _minor(release: str) -> tuple[int, int]:
    major, minor = release.removeprefix("v").split(".")[:2]
    return int(major), int(minor)


def _release(answer: Answer, version: str) -> Check:
    name = "karmada version"
    if answer.status == 404:
        return skip(name, f"not known: no ResourceBinding CRD (crd {RESOURCE_BINDINGS.key})")
    if not answer.ok:
        return warn(
            name,
            f"not checked: cannot read the ResourceBinding CRD ({answer.message})",
            "run preflight with a kubeconfig that may get customresourcedefinitions",
        )
    entry = version_schema(answer.body, version)
    schema = ((entry or {}).get("schema") or {}).get("openAPIV3Schema") or {}
    release = release_of(schema)
    if release is None or _minor(release) < _minor(NEEDED):
        seen = f"about {release}" if release else f"older than {RELEASES[-1][0]}"
        return fail(
            name,
            f"Karmada {seen}: the ResourceBinding {version} schema has no "
            "spec.suspension.scheduling, which fleetgate holds bindings with",
            f"upgrade Karmada to v1.13.3 or later ({RECOMMENDED} or later recommended)",
        )
    marker = dict(RELEASES)[release]
    detail = f"Karmada {release} or later (the ResourceBinding schema has {marker})"
    if _minor(release) < _minor(RECOMMENDED):
        return warn(
            name,
            f"{detail}; v1.13.0 to v1.13.2 can lose a binding's suspension "
            "(karmada-io/karmada#6356)",
            f"make sure Karmada is v1.13.3 or later (the karmada-controller-manager's image tag); "
            f"{RECOMMENDED} or later recommended",
        )
    return ok(name, detail)


def _crd(api: Api, resource: Resource, fields: tuple[str, ...], answer: Answer) -> Check:
    name = f"crd {resource.key}"
    version = resource.versions[0]
    if answer.status == 404:
        return fail(name, "not installed", INSTALL_CRDS)
    if not answer.ok:
        return _discovered(api, resource, answer)
    crd = answer.body
    conditions = {c.get("type"): c for c in (crd.get("status") or {}).get("conditions") or ()}
    established = conditions.get("Established") or {}
    if established.get("status") != "True":
        said = established.get("message") or "no Established condition"
        return fail(name, f"not established: {said}", "see kubectl describe crd " + resource.key)
    entry = version_schema(crd, version)
    if entry is None:
        return fail(name, f"{version} is not served", UPGRADE_CRDS)
    problems = []
    if resource in (RESOURCE_BINDINGS, CLUSTER_RESOURCE_BINDINGS) and "status" not in (
        entry.get("subresources") or {}
    ):
        problems.append("no status subresource")
    schema = (entry.get("schema") or {}).get("openAPIV3Schema") or {}
    absent = [field for field in fields if not schema_has(schema, field)]
    if absent:
        problems.append(
            f"its schema lacks {', '.join(absent)}: the API server would drop what fleetgate "
            "writes there"
        )
    if problems:
        return fail(name, f"{version}: {'; '.join(problems)}", UPGRADE_CRDS)
    written = f", has the {len(fields)} fields fleetgate writes" if fields else ""
    return ok(name, f"established, serves {version}{written}")


def _discovered(api: Api, resource: Resource, refused: Answer) -> Check:
    """Without leave to read CRDs: whether discovery lists the resource."""
    name = f"crd {resource.key}"
    version = resource.versions[0]
    if _served(api, resource.group, version, resource.plural):
        return warn(
            name,
            f"{version} served (discovery); its schema was not read ({refused.message}), so "
            "the fields fleetgate writes are not checked",
            "run preflight with a kubeconfig that may get customresourcedefinitions",
        )
    return fail(name, f"{resource.group}/{version} {resource.plural} is not served", INSTALL_CRDS)


def _served(api: Api, group: str, version: str, plural: str) -> bool:
    found = api.get(f"/apis/{group}/{version}")
    return found.ok and any(r.get("name") == plural for r in found.body.get("resources") or ())


def _cluster_api(api: Api) -> Check:
    """Cluster is served by karmada-aggregated-apiserver (an APIService), not a CRD."""
    version = CLUSTERS.versions[0]
    name = f"api {CLUSTERS.group}/{version}"
    if _served(api, CLUSTERS.group, version, CLUSTERS.plural):
        return ok(name, "clusters served (karmada-aggregated-apiserver)")
    return fail(
        name,
        "clusters are not served",
        f"the karmada-aggregated-apiserver must be running and its APIService "
        f"{version}.{CLUSTERS.group} available",
    )
