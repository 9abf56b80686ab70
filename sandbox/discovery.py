"""Discovery documents: ``/version``, ``/api``, ``/apis``, group and group-version lists.

Only the legacy (unaggregated) discovery is served. kubectl asks for aggregated discovery
(``as=APIGroupDiscoveryList``) and, when the answer's Content-Type is plain
``application/json``, reads these documents instead, as it does with older servers.
"""

from __future__ import annotations

from typing import Any

from sandbox.resources import Registry, ResourceType

VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
SUBRESOURCE_VERBS = ["get", "patch", "update"]
KUBERNETES_VERSION = {"major": "1", "minor": "31"}


def version() -> dict[str, Any]:
    return {
        **KUBERNETES_VERSION,
        "gitVersion": "v1.31.0-fleetgate-sandbox",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "n/a (fleetgate sandbox, Python)",
        "compiler": "n/a",
        "platform": "linux/amd64",
    }


def core_versions(server_address: str) -> dict[str, Any]:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}
        ],
    }


def preferred_version(registry: Registry, group: str, versions: tuple[str, ...]) -> str:
    """The version most types of the group store in (ties: the first served)."""
    counts = dict.fromkeys(versions, 0)
    for rt in registry:
        if rt.group == group:
            counts[rt.storage_version] = counts.get(rt.storage_version, 0) + 1
    return max(versions, key=lambda v: (counts.get(v, 0), -versions.index(v)))


def api_group(registry: Registry, group: str) -> dict[str, Any] | None:
    for name, versions in registry.groups():
        if name == group and group:
            preferred = preferred_version(registry, group, versions)
            ordered = [preferred, *(v for v in versions if v != preferred)]
            entries = [{"groupVersion": f"{group}/{v}", "version": v} for v in ordered]
            return {
                "kind": "APIGroup",
                "apiVersion": "v1",
                "name": group,
                "versions": entries,
                "preferredVersion": entries[0],
            }
    return None


def api_group_list(registry: Registry) -> dict[str, Any]:
    groups = [api_group(registry, name) for name, _ in registry.groups() if name]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [g for g in groups if g]}


def _resource_entry(rt: ResourceType) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": rt.plural,
        "singularName": rt.singular,
        "namespaced": rt.namespaced,
        "kind": rt.kind,
        "verbs": VERBS,
    }
    if rt.short_names:
        entry["shortNames"] = list(rt.short_names)
    if rt.categories:
        entry["categories"] = list(rt.categories)
    return entry


def api_resource_list(registry: Registry, group: str, version: str) -> dict[str, Any] | None:
    types = registry.in_group_version(group, version)
    if not types:
        return None
    resources = []
    for rt in sorted(types, key=lambda t: t.plural):
        resources.append(_resource_entry(rt))
        if rt.status_subresource:
            resources.append(
                {
                    "name": f"{rt.plural}/status",
                    "singularName": "",
                    "namespaced": rt.namespaced,
                    "kind": rt.kind,
                    "verbs": SUBRESOURCE_VERBS,
                }
            )
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}" if group else version,
        "resources": resources,
    }


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field (payloads here are shorter than 128 bytes)."""
    return bytes([number << 3 | 2, len(payload)]) + payload


def openapi_v2_protobuf() -> bytes:
    """An empty OpenAPI v2 document (gnostic ``openapi_v2.Document``, protobuf-encoded).

    kubectl's client-side validation downloads ``/openapi/v2`` (protobuf only); with no
    definitions it finds no schema for any kind and validates nothing, so ``kubectl apply``
    works without ``--validate=false``. The sandbox validates Karmada kinds itself (422).
    """
    info = _field(1, b"fleetgate sandbox") + _field(2, b"v1.31.0")
    return _field(1, b"2.0") + _field(2, info) + _field(8, b"")
