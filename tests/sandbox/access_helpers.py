"""Tenants of a sandbox with RBAC: a sandbox serving two more tokens, a raw HTTPS call as one of
them, and builders for roles and bindings."""

from __future__ import annotations

import http.client
import json
import ssl
from collections.abc import Iterator
from typing import Any

import pytest

from sandbox.authn import User
from sandbox.server import Sandbox
from sandbox.store import Store

RBAC = "rbac.authorization.k8s.io"
ALICE, BOB = "alice-token", "bob-token"
USERS = {
    ALICE: User("alice", "uid-alice", ("team-a",)),
    BOB: User("bob", "uid-bob", ("team-b",)),
}


@pytest.fixture
def tenants() -> Iterator[Sandbox]:
    """A sandbox with its admin token and alice's and bob's, namespaces team-a and team-b."""
    server = Sandbox(Store(), users=USERS)
    server.start(port=0)
    for name in ("team-a", "team-b"):
        server.store.create("namespaces", {"metadata": {"name": name}})
    try:
        yield server
    finally:
        server.stop(timeout=5)


def call(
    sandbox: Sandbox,
    method: str,
    path: str,
    token: str | None,
    body: Any = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, Any, http.client.HTTPMessage]:
    """(status, decoded JSON or text, headers) of one request with ``token``."""
    context = ssl.create_default_context(cadata=(sandbox.ca_pem or b"").decode())
    host, port = sandbox.url.removeprefix("https://").rsplit(":", 1)
    connection = http.client.HTTPSConnection(host, int(port), timeout=10, context=context)
    sent = dict(headers or {})
    if token:
        sent["Authorization"] = f"Bearer {token}"
    data = None if body is None else json.dumps(body).encode()
    if data is not None:
        sent["Content-Type"] = "application/json"
    try:
        connection.request(method, path, body=data, headers=sent)
        answer = connection.getresponse()
        raw = answer.read()
    finally:
        connection.close()
    try:
        decoded: Any = json.loads(raw)
    except ValueError:
        decoded = raw.decode()
    return answer.status, decoded, answer.headers


def role(name: str, namespace: str, *rules: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace}, "rules": list(rules)}


def cluster_role(name: str, *rules: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "rules": list(rules), **extra}


def rule(verbs: list[str], groups: list[str], resources: list[str], **extra: Any) -> dict:
    return {"verbs": verbs, "apiGroups": groups, "resources": resources, **extra}


def binding(
    name: str, role_kind: str, role_name: str, *subjects: tuple[str, str], namespace: str = ""
) -> dict[str, Any]:
    """A RoleBinding (with ``namespace``) or ClusterRoleBinding; subjects (kind, name)."""
    meta: dict[str, Any] = {"name": name} | ({"namespace": namespace} if namespace else {})
    return {
        "metadata": meta,
        "roleRef": {"apiGroup": RBAC, "kind": role_kind, "name": role_name},
        "subjects": [{"kind": kind, "name": who} for kind, who in subjects],
    }


def grant_list_configmaps(sandbox: Sandbox, namespace: str, group: str) -> None:
    store = sandbox.store
    store.create(
        f"roles.{RBAC}",
        role("read-cm", namespace, rule(["get", "list", "watch"], [""], ["configmaps"])),
    )
    store.create(
        f"rolebindings.{RBAC}",
        binding("read-cm", "Role", "read-cm", ("Group", group), namespace=namespace),
    )
