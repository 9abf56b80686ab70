"""The sandbox's record of writes: who committed what, in commit order, over HTTP too."""

from __future__ import annotations

import json
import ssl
import urllib.request
from pathlib import Path

import kubernetes
import pytest

from sandbox.server import Sandbox
from sandbox.writelog import IN_PROCESS, LEASES, WriteLog


@pytest.fixture
def writes(sandbox: Sandbox) -> WriteLog:
    return WriteLog().attach(sandbox)


def lease(name: str, holder: str) -> dict:
    return {"metadata": {"name": name}, "spec": {"holderIdentity": holder}}


def test_each_committed_write_is_recorded_with_its_writer(
    sandbox: Sandbox, api_client: kubernetes.client.ApiClient, writes: WriteLog
):
    api_client.user_agent = "fleetgate-reconciler/one"
    leases = kubernetes.client.CoordinationV1Api(api_client)
    created = leases.create_namespaced_lease("default", lease("a", "one"))
    leases.patch_namespaced_lease("a", "default", {"spec": {"holderIdentity": "two"}})
    leases.patch_namespaced_lease("a", "default", {"spec": {"holderIdentity": "two"}})  # no-op
    sandbox.store.create("configmaps", {"metadata": {"name": "c", "namespace": "default"}})
    leases.delete_namespaced_lease("a", "default")

    entries = writes.entries()
    assert [(w.user, w.verb, w.resource, w.name, w.event, w.holder) for w in entries] == [
        ("fleetgate-reconciler/one", "create", LEASES, "a", "ADDED", "one"),
        ("fleetgate-reconciler/one", "patch", LEASES, "a", "MODIFIED", "two"),
        (IN_PROCESS, "create", "configmaps", "c", "ADDED", None),
        ("fleetgate-reconciler/one", "delete", LEASES, "a", "DELETED", None),
    ]
    assert entries[0].resource_version == created.metadata.resource_version
    assert [w.seq for w in entries] == sorted(w.seq for w in entries)
    assert writes.entries(LEASES, user="fleetgate-reconciler/", since=entries[0].seq) == [
        entries[1],
        entries[3],
    ]


def test_the_record_is_bounded_and_counts_what_it_dropped(sandbox: Sandbox):
    writes = WriteLog(limit=2).attach(sandbox)
    for name in ("a", "b", "c"):
        sandbox.store.create("configmaps", {"metadata": {"name": name, "namespace": "default"}})
    assert [w.name for w in writes.entries()] == ["b", "c"]
    assert writes.dropped == 1
    with pytest.raises(ValueError, match="at least 1"):
        WriteLog(limit=0)


def get(sandbox: Sandbox, path: str, method: str = "GET") -> tuple[int, dict]:
    context = ssl.create_default_context(cadata=(sandbox.ca_pem or b"").decode())
    request = urllib.request.Request(sandbox.url + path, method=method)
    request.add_header("Authorization", f"Bearer {sandbox.token}")
    try:
        with urllib.request.urlopen(request, timeout=5, context=context) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_the_record_is_served_over_http(sandbox: Sandbox, writes: WriteLog, tmp_path: Path):
    sandbox.store.create("configmaps", {"metadata": {"name": "a", "namespace": "default"}})
    sandbox.store.create("namespaces", {"metadata": {"name": "other"}})
    code, body = get(sandbox, "/sandbox/writes?resource=configmaps")
    assert code == 200
    assert [(e["resource"], e["name"]) for e in body["entries"]] == [("configmaps", "a")]
    assert body["next"] == body["entries"][0]["seq"]
    code, body = get(sandbox, "/sandbox/writes?since=nope")
    assert code == 400 and "since" in body["message"]
    code, body = get(sandbox, "/sandbox/writes", method="DELETE")
    assert (code, body) == (200, {"cleared": 2})
    assert get(sandbox, "/sandbox/writes")[1]["entries"] == []
