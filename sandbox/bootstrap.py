"""What kube-apiserver writes into a new cluster at start, and the sandbox writes too.

- The bootstrap RBAC policy the sandbox's tenants need (``plugin/pkg/auth/authorizer/rbac/
  bootstrappolicy/policy.go``): ``cluster-admin`` (bound to ``system:masters``),
  ``system:discovery`` and ``system:basic-user`` (bound to ``system:authenticated``: discovery
  documents, self reviews), ``system:public-info-viewer`` (health and version, for everybody),
  ``system:auth-delegator`` (TokenReview and SubjectAccessReview, for an aggregated server's
  account to bind) and the Role ``kube-system/extension-apiserver-authentication-reader``.
  Each is created when missing and otherwise left alone (kube-apiserver reconciles them; the
  sandbox does not put back what a test changed).
- ``kube-system/extension-apiserver-authentication`` (the cluster authentication trust
  controller, ``pkg/controlplane/controller/clusterauthenticationtrust``): the front-proxy CA
  (``requestheader-client-ca-file``), ``requestheader-allowed-names``, and the header names, the
  lists JSON-encoded. What is already there is kept and joined with the sandbox's own (CA
  bundles and lists without repeats), as the controller combines them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from sandbox import errors, frontproxy
from sandbox.frontproxy import FrontProxy
from sandbox.rbac import CLUSTER_ROLE_BINDINGS, CLUSTER_ROLES, GROUP, ROLES

if TYPE_CHECKING:
    from sandbox.store import Store

AUTH_NAMESPACE = "kube-system"
AUTH_CONFIGMAP = "extension-apiserver-authentication"
_LABELS = {"kubernetes.io/bootstrapping": "rbac-defaults"}
_ANNOTATIONS = {"rbac.authorization.kubernetes.io/autoupdate": "true"}
_DISCOVERY_URLS = ["/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi"]
_DISCOVERY_URLS += ["/openapi/*", "/readyz", "/version", "/version/"]
_PUBLIC_URLS = ["/healthz", "/livez", "/readyz", "/version", "/version/"]


def _rule(verbs: list[str], groups: list[str] | None = None, **fields: list[str]) -> dict:
    rule: dict[str, Any] = {"verbs": verbs}
    if groups is not None:
        rule["apiGroups"] = groups
    return rule | fields


CLUSTER_ROLE_RULES: dict[str, list[dict[str, Any]]] = {
    "cluster-admin": [
        _rule(["*"], ["*"], resources=["*"]),
        _rule(["*"], nonResourceURLs=["*"]),
    ],
    "system:discovery": [_rule(["get"], nonResourceURLs=_DISCOVERY_URLS)],
    "system:basic-user": [
        _rule(["create"], ["authentication.k8s.io"], resources=["selfsubjectreviews"]),
        _rule(
            ["create"],
            ["authorization.k8s.io"],
            resources=["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
        ),
    ],
    "system:public-info-viewer": [_rule(["get"], nonResourceURLs=_PUBLIC_URLS)],
    "system:auth-delegator": [
        _rule(["create"], ["authentication.k8s.io"], resources=["tokenreviews"]),
        _rule(["create"], ["authorization.k8s.io"], resources=["subjectaccessreviews"]),
    ],
}
CLUSTER_ROLE_BINDINGS_TO: dict[str, list[str]] = {
    "cluster-admin": ["system:masters"],
    "system:discovery": ["system:authenticated"],
    "system:basic-user": ["system:authenticated"],
    "system:public-info-viewer": ["system:authenticated", "system:unauthenticated"],
}


def _meta(name: str, namespace: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": dict(_LABELS)}
    meta["annotations"] = dict(_ANNOTATIONS)
    return meta | ({"namespace": namespace} if namespace else {})


def _create_missing(store: Store, resource: str, obj: dict[str, Any]) -> None:
    try:
        store.create(resource, obj)
    except errors.StatusError as error:
        if error.code != 409:
            raise


def ensure_policy(store: Store) -> None:
    """Create the bootstrap ClusterRoles, their bindings and the authentication reader Role."""
    try:
        store.resource(CLUSTER_ROLES)
    except KeyError:  # a registry without RBAC: nothing to bootstrap
        return
    for name, rules in CLUSTER_ROLE_RULES.items():
        _create_missing(store, CLUSTER_ROLES, {"metadata": _meta(name), "rules": rules})
    for name, groups in CLUSTER_ROLE_BINDINGS_TO.items():
        binding = {
            "metadata": _meta(name),
            "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": name},
            "subjects": [{"apiGroup": GROUP, "kind": "Group", "name": g} for g in groups],
        }
        _create_missing(store, CLUSTER_ROLE_BINDINGS, binding)
    _ensure_namespace(store, AUTH_NAMESPACE)
    reader = {
        "metadata": _meta(f"{AUTH_CONFIGMAP}-reader", AUTH_NAMESPACE),
        "rules": [
            _rule(["get", "list", "watch"], [""], resources=["configmaps"])
            | {"resourceNames": [AUTH_CONFIGMAP]}
        ],
    }
    _create_missing(store, ROLES, reader)


def _ensure_namespace(store: Store, name: str) -> None:
    _create_missing(store, "namespaces", {"metadata": {"name": name}})


def authentication_data(proxy: FrontProxy) -> dict[str, str]:
    """The keys the trust controller writes for a front proxy."""
    return {
        "requestheader-client-ca-file": proxy.ca_pem.decode(),
        "requestheader-allowed-names": json.dumps([proxy.common_name]),
        "requestheader-username-headers": json.dumps(list(frontproxy.USERNAME_HEADERS)),
        "requestheader-uid-headers": json.dumps(list(frontproxy.UID_HEADERS)),
        "requestheader-group-headers": json.dumps(list(frontproxy.GROUP_HEADERS)),
        "requestheader-extra-headers-prefix": json.dumps(list(frontproxy.EXTRA_PREFIXES)),
    }


def publish_authentication(store: Store, proxy: FrontProxy) -> None:
    """Write (or join into) ``kube-system/extension-apiserver-authentication``."""
    _ensure_namespace(store, AUTH_NAMESPACE)
    for _ in range(5):  # a concurrent writer: read again, join again
        try:
            current = store.get("configmaps", AUTH_CONFIGMAP, namespace=AUTH_NAMESPACE)
        except errors.StatusError as error:
            if error.code != 404:
                raise
            data = authentication_data(proxy)
            body = {"metadata": {"name": AUTH_CONFIGMAP, "namespace": AUTH_NAMESPACE}}
            try:
                store.create("configmaps", body | {"data": data})
                return
            except errors.StatusError as again:
                if again.code != 409:
                    raise
                continue
        joined = _joined(current.get("data") or {}, authentication_data(proxy))
        if joined == (current.get("data") or {}):
            return
        try:
            store.update("configmaps", current | {"data": joined})
            return
        except errors.StatusError as error:
            if error.code != 409:
                raise


def _joined(existing: Mapping[str, str], ours: Mapping[str, str]) -> dict[str, str]:
    joined = dict(existing)
    for key, value in ours.items():
        old = existing.get(key)
        if not old:
            joined[key] = value
        elif key.endswith("-file"):
            joined[key] = old if value.strip() in old else old.rstrip("\n") + "\n" + value
        else:
            try:
                values = json.loads(old) or []
            except ValueError:
                values = []
            values += [v for v in json.loads(value) if v not in values]
            joined[key] = json.dumps(values)
    return joined
