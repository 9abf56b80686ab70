"""APIService aggregation as kube-aggregator does it: the sandbox authenticates the caller,
authorizes the request by RBAC with the attributes of its URL, and proxies it over TLS to the
aggregated server, presenting the front proxy's client certificate and the caller in
``X-Remote-*`` headers; the aggregated server configures its trust from
``kube-system/extension-apiserver-authentication``."""

from __future__ import annotations

import json
import os
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox.server import Sandbox
from tests.conftest import require_tool
from tests.sandbox.access_helpers import ALICE, BOB, RBAC, binding, call, role, rule, tenants
from tests.sandbox.aggregated import GROUP, VERSION, AggregatedServer, apiservice

__all__ = ["tenants"]  # fixtures used by name

PREFIX = f"/apis/{GROUP}/{VERSION}"
APISERVICES = "apiservices.apiregistration.k8s.io"
SERVICE = ("fleetgate-system", "fleetgate-visibility", 443)


def authentication(sandbox: Sandbox) -> dict[str, str]:
    """What an aggregated server reads at start (here through the in-process API)."""
    return sandbox.store.get(
        "configmaps", "extension-apiserver-authentication", namespace="kube-system"
    )["data"]


@pytest.fixture
def aggregated(tenants: Sandbox) -> Iterator[AggregatedServer]:
    server = AggregatedServer(authentication(tenants)).start()
    tenants.service_urls[SERVICE] = server.url
    tenants.store.create(APISERVICES, apiservice(server.serving.ca_pem))
    try:
        yield server
    finally:
        server.stop()


def tenant_may_list_jobs(sandbox: Sandbox, namespace: str, group: str) -> None:
    sandbox.store.create(
        f"roles.{RBAC}", role("jobs-reader", namespace, rule(["get", "list"], [GROUP], ["jobs"]))
    )
    sandbox.store.create(
        f"rolebindings.{RBAC}",
        binding("jobs-reader", "Role", "jobs-reader", ("Group", group), namespace=namespace),
    )


def test_the_front_proxy_ca_and_header_names_are_published(tenants: Sandbox):
    data = authentication(tenants)
    assert data["requestheader-client-ca-file"] == tenants.front_proxy.ca_pem.decode()
    assert json.loads(data["requestheader-allowed-names"]) == ["front-proxy-client"]
    assert json.loads(data["requestheader-username-headers"]) == ["X-Remote-User"]
    assert json.loads(data["requestheader-group-headers"]) == ["X-Remote-Group"]
    assert json.loads(data["requestheader-extra-headers-prefix"]) == ["X-Remote-Extra-"]
    # another front proxy's settings already there are joined, not replaced, at the next start
    tenants.store.patch(
        "configmaps",
        "extension-apiserver-authentication",
        {"data": {"requestheader-allowed-names": '["other-proxy"]'}},
        namespace="kube-system",
    )
    tenants.restart(tenants.store)
    joined = json.loads(authentication(tenants)["requestheader-allowed-names"])
    assert joined == ["other-proxy", "front-proxy-client"]
    # and any authenticated user may not read it, only the reader role's subjects
    path = "/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication"
    assert call(tenants, "GET", path, ALICE)[0] == 403


def test_a_tenant_sees_its_own_namespace_and_is_refused_anothers(
    tenants: Sandbox, aggregated: AggregatedServer
):
    tenant_may_list_jobs(tenants, "team-a", "team-a")
    tenant_may_list_jobs(tenants, "team-b", "team-b")

    code, body, _ = call(tenants, "GET", f"{PREFIX}/namespaces/team-a/jobs?limit=5", ALICE)
    assert code == 200 and body["path"] == f"{PREFIX}/namespaces/team-a/jobs?limit=5"
    seen = aggregated.seen[-1]
    assert (seen.client_name, seen.user, seen.groups) == (
        "front-proxy-client",
        "alice",
        ("team-a", "system:authenticated"),
    )
    assert seen.authorization is None  # the caller's token stays at the API server

    code, body, _ = call(tenants, "GET", f"{PREFIX}/namespaces/team-b/jobs", ALICE)
    assert code == 403 and body["reason"] == "Forbidden"
    assert body["message"] == (
        f'jobs.{GROUP} is forbidden: User "alice" cannot list resource "jobs" in API group '
        f'"{GROUP}" in the namespace "team-b"'
    )
    assert len(aggregated.seen) == 1  # a refused request never reaches the aggregated server
    assert call(tenants, "GET", f"{PREFIX}/namespaces/team-b/jobs", BOB)[1]["user"] == "bob"
    assert call(tenants, "GET", f"{PREFIX}/jobs", BOB)[0] == 403  # every namespace at once
    admin = call(tenants, "GET", f"{PREFIX}/jobs", tenants.token)[1]
    assert admin["user"] == "sandbox-admin"
    assert admin["groups"] == ["system:masters", "system:authenticated"]


def test_the_callers_own_remote_headers_are_replaced(tenants: Sandbox, aggregated):
    tenant_may_list_jobs(tenants, "team-a", "team-a")
    spoofed = {"X-Remote-User": "admin", "X-Remote-Group": "system:masters"}
    spoofed["X-Remote-Extra-Scopes"] = "everything"
    code = call(tenants, "GET", f"{PREFIX}/namespaces/team-a/jobs", ALICE, headers=spoofed)[0]
    assert code == 200
    seen = aggregated.seen[-1]
    assert (seen.user, seen.groups, seen.extra) == ("alice", ("team-a", "system:authenticated"), {})


def test_extra_values_bodies_and_streams_pass_through(tenants: Sandbox, aggregated):
    from sandbox.authn import User

    tenants.authenticator.add(
        "carol-token",
        User("carol", groups=("system:masters",), extra={"scopes.io/a b": ("x", "y")}),
    )
    code, body, _ = call(
        tenants, "POST", f"{PREFIX}/namespaces/team-a/jobs", "carol-token", {"a": 1}
    )
    assert code == 200
    seen = aggregated.seen[-1]
    assert (seen.method, json.loads(seen.body)) == ("POST", {"a": 1})
    assert seen.extra == {"scopes.io/a b": ["x", "y"]}  # the key %-escaped on the way
    code, body, headers = call(
        tenants, "GET", f"{PREFIX}/namespaces/team-a/jobs?watch=1", "carol-token"
    )
    assert code == 200 and headers["Transfer-Encoding"] == "chunked"
    assert [json.loads(line)["object"]["n"] for line in body.splitlines()] == [0, 1, 2]


def test_discovery_lists_the_aggregated_group_and_proxies_its_versions(tenants, aggregated):
    code, groups, _ = call(tenants, "GET", "/apis", ALICE)
    assert code == 200
    names = [g["name"] for g in groups["groups"]]
    assert names[-1] == GROUP and "work.karmada.io" in names
    code, group, _ = call(tenants, "GET", f"/apis/{GROUP}", ALICE)
    assert code == 200 and group["preferredVersion"] == {
        "groupVersion": f"{GROUP}/{VERSION}",
        "version": VERSION,
    }
    code, body, _ = call(tenants, "GET", PREFIX, ALICE)  # system:discovery allows it
    assert code == 200 and body["path"] == PREFIX and aggregated.seen[-1].user == "alice"


def test_kubectl_get_raw_through_the_aggregated_api(tenants: Sandbox, aggregated, tmp_path: Path):
    tenant_may_list_jobs(tenants, "team-a", "team-a")
    kubeconfig = tenants.write_kubeconfig(tmp_path / "alice", token=ALICE)
    env = {**os.environ, "HOME": str(tmp_path), "KUBECACHEDIR": str(tmp_path / "cache")}

    def get_raw(path: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [require_tool("kubectl"), "--kubeconfig", str(kubeconfig), "get", "--raw", path],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
            check=False,
        )

    mine = get_raw(f"{PREFIX}/namespaces/team-a/jobs")
    assert mine.returncode == 0, mine.stderr
    assert json.loads(mine.stdout)["user"] == "alice"
    theirs = get_raw(f"{PREFIX}/namespaces/team-b/jobs")
    assert theirs.returncode == 1 and "Forbidden" in theirs.stderr


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_an_unreachable_or_untrusted_service_is_503(tenants: Sandbox, aggregated):
    jobs = f"{PREFIX}/namespaces/team-a/jobs"
    tenants.service_urls[SERVICE] = f"https://127.0.0.1:{_closed_port()}"
    code, body, headers = call(tenants, "GET", jobs, tenants.token)
    assert code == 503 and headers["Content-Type"] == "text/plain; charset=utf-8"
    assert body.startswith("error trying to reach service")
    del tenants.service_urls[SERVICE]
    assert call(tenants, "GET", jobs, tenants.token)[:2] == (503, "service unavailable\n")
    tenants.service_urls[SERVICE] = aggregated.url
    wrong_ca = apiservice(tenants.ca_pem)  # not the CA that signed the aggregated server's
    current = tenants.store.get(APISERVICES, f"{VERSION}.{GROUP}")
    tenants.store.update(APISERVICES, current | {"spec": wrong_ca["spec"]})
    code, body, _ = call(tenants, "GET", jobs, tenants.token)
    assert code == 503 and "certificate verify failed" in body
    assert aggregated.seen == []
    insecure = apiservice(None)  # insecureSkipTLSVerify
    current = tenants.store.get(APISERVICES, f"{VERSION}.{GROUP}")
    tenants.store.update(APISERVICES, current | {"spec": insecure["spec"]})
    assert call(tenants, "GET", jobs, tenants.token)[0] == 200


def test_without_an_apiservice_the_group_is_not_found(tenants: Sandbox):
    assert call(tenants, "GET", f"{PREFIX}/namespaces/team-a/jobs", tenants.token)[0] == 404
    assert call(tenants, "GET", f"/apis/{GROUP}", tenants.token)[0] == 404
    names = [g["name"] for g in call(tenants, "GET", "/apis", tenants.token)[1]["groups"]]
    assert GROUP not in names
