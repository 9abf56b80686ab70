"""Issue 29, item 2, done when: through the sandbox with two tenants' tokens, tenant A cannot
list tenant B's jobs through the aggregated API (403 from RBAC) and sees its own, and
``kubectl get --raw`` works for both.

The whole path as in a deployment: ``fleetgate serve --visibility-port`` (a child process),
registered with an ``APIService`` for ``visibility.fleetgate.io/v1alpha1``; the sandbox (as
kube-apiserver) authenticates each tenant's token, authorizes the request by RBAC, and proxies it
with its front-proxy client certificate; fleetgate reads the front proxy's CA from
``kube-system/extension-apiserver-authentication`` as the sandbox publishes it. The direct port,
exposed, asks the same API server (TokenReview, SubjectAccessReview) and answers the same."""

from __future__ import annotations

import base64
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import kubernetes
import pytest

from sandbox.authn import User
from sandbox.karmada import KarmadaControllers
from sandbox.server import Sandbox
from sandbox.store import Store
from tests.conftest import require_tool
from tests.reconciler.serveproc import ServeProcess
from tests.reconciler.test_loop import binding, clock, custom, eventually, fleet_world, submit
from tests.reconciler.test_visibility import (
    other_namespace,
    serve_two_tenants,
    submit_in,
    visibility_url,
)
from tests.webhook.helpers import write_certificates

__all__ = ["clock", "custom", "fleet_world"]  # fixtures used by name

ALICE, BOB = "tok-alice", "tok-bob"  # research's tenant, team-b's tenant
USERS = {ALICE: User("alice", "uid-a", ("research-team",)), BOB: User("bob", "uid-b", ("b-team",))}
GROUP = "visibility.fleetgate.io"
PREFIX = f"/apis/{GROUP}/v1alpha1"
SERVICE = ("fleetgate-system", "fleetgate-visibility", 443)


@pytest.fixture
def sandbox() -> Iterator[Sandbox]:
    """The API server of the other reconciler tests, serving the two tenants' tokens too."""
    server = Sandbox(Store(event_log_limit=1000), bookmark_interval=0.5, users=USERS)
    server.start(port=0)
    try:
        yield server
    finally:
        server.stop(timeout=5)


def may_read_jobs(api: kubernetes.client.ApiClient, namespace: str, user: str) -> None:
    """A Role in ``namespace`` to get and list its jobs in the visibility API, bound to ``user``
    (what ``fleetgate-visibility-reader``, aggregated into ``view``, gives in a deployment)."""
    rbac = kubernetes.client.RbacAuthorizationV1Api(api)
    rule = {"apiGroups": [GROUP], "resources": ["jobs"], "verbs": ["get", "list"]}
    rbac.create_namespaced_role(namespace, {"metadata": {"name": "jobs"}, "rules": [rule]})
    rbac.create_namespaced_role_binding(
        namespace,
        {
            "metadata": {"name": f"jobs-{user}"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "jobs"},
            "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": user}],
        },
    )


def register(api: kubernetes.client.ApiClient, serving_ca: Path) -> None:
    body = {
        "apiVersion": "apiregistration.k8s.io/v1",
        "kind": "APIService",
        "metadata": {"name": f"v1alpha1.{GROUP}"},
        "spec": {
            "group": GROUP, "version": "v1alpha1", "groupPriorityMinimum": 1000,
            "versionPriority": 15, "caBundle": base64.b64encode(serving_ca.read_bytes()).decode(),
            "service": {"namespace": SERVICE[0], "name": SERVICE[1], "port": SERVICE[2]},
        },
    }  # fmt: skip
    kubernetes.client.CustomObjectsApi(api).create_cluster_custom_object(
        "apiregistration.k8s.io", "v1", "apiservices", body
    )


def raw(kubeconfig: Path, path: str) -> tuple[int, str]:
    """``kubectl get --raw PATH``: (exit status, stdout or stderr)."""
    done = subprocess.run(
        [require_tool("kubectl"), "--kubeconfig", str(kubeconfig), "get", "--raw", path],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    return done.returncode, done.stdout if done.returncode == 0 else done.stderr


def test_each_tenant_reads_its_own_jobs_through_the_aggregated_api_and_not_the_others(
    sandbox: Sandbox, api_client, kubeconfig: Path, custom,
    fleet_world: KarmadaControllers, tmp_path: Path,
) -> None:  # fmt: skip
    cert, key, serving_ca, _ = write_certificates(tmp_path / "serving")
    other_namespace(api_client, "team-b")
    may_read_jobs(api_client, "research", "alice")
    may_read_jobs(api_client, "team-b", "bob")
    register(api_client, serving_ca)
    served = serve_two_tenants(kubeconfig, custom, fleet_world, (cert, key), tmp_path / "v.log")
    try:
        served.wait_ready()
        sandbox.service_urls[SERVICE] = visibility_url(served)
        eventually(lambda: bool(binding(custom, "first")["spec"].get("clusters")), 30)
        alice = sandbox.write_kubeconfig(tmp_path / "alice.kubeconfig", token=ALICE)
        bob = sandbox.write_kubeconfig(tmp_path / "bob.kubeconfig", token=BOB)

        for who, own, job in ((alice, "research", "first"), (bob, "team-b", "theirs")):
            code, out = raw(who, f"{PREFIX}/namespaces/{own}/jobs")
            assert code == 0, out
            listed = json.loads(out)
            assert [i["binding"] for i in listed["items"]] == [f"{own}/{job}-pytorchjob"]
            code, out = raw(who, f"{PREFIX}/namespaces/{own}/jobs/{job}")
            assert code == 0 and json.loads(out)["queue"], out

        # the other tenant's namespace, and every namespace: 403 from RBAC, before any proxying
        code, said = raw(alice, f"{PREFIX}/namespaces/team-b/jobs")
        assert code != 0 and "Forbidden" in said and 'User "alice" cannot list' in said, said
        code, said = raw(bob, f"{PREFIX}/namespaces/research/jobs/first")
        assert code != 0 and "Forbidden" in said, said
        code, said = raw(alice, f"{PREFIX}/jobs")
        assert code != 0 and "Forbidden" in said, said
        # the admin (system:masters) may list every namespace's
        code, out = raw(kubeconfig, f"{PREFIX}/jobs")
        assert code == 0 and len(json.loads(out)["items"]) == 2, out
    finally:
        served.stop()


def test_the_exposed_direct_port_asks_the_api_server_who_calls(
    sandbox: Sandbox, api_client, kubeconfig: Path, custom,
    fleet_world: KarmadaControllers, tmp_path: Path,
) -> None:  # fmt: skip
    import urllib.error
    import urllib.request

    other_namespace(api_client, "team-b")
    may_read_jobs(api_client, "research", "alice")
    submit(custom, "first", workers=2)
    submit_in(custom, "team-b", "theirs")
    fleet_world.run_once()
    served = ServeProcess(
        kubeconfig, "replica-d", tmp_path / "serve.log", "--no-leader-elect",
        "--api-auth", "delegated",
    )  # fmt: skip
    try:
        served.wait_ready()

        def get(path: str, token: str | None) -> tuple[int, dict]:
            headers = {"Authorization": f"Bearer {token}"} if token else {}
            request = urllib.request.Request(served.api_url + path, headers=headers)
            try:
                with urllib.request.urlopen(request, timeout=10) as answer:
                    return answer.status, json.loads(answer.read())
            except urllib.error.HTTPError as error:
                return error.code, json.loads(error.read())

        eventually(lambda: get("/api/v1/jobs?namespace=research", ALICE)[1].get("items"), 30)
        code, own = get("/api/v1/jobs?namespace=research", ALICE)
        assert code == 200 and [i["binding"] for i in own["items"]] == ["research/first-pytorchjob"]
        assert get("/api/v1/jobs?namespace=team-b", ALICE)[0] == 403
        assert get("/api/v1/jobs", ALICE)[0] == 403
        assert get("/api/v1/jobs", None)[0] == 401
        assert get("/api/v1/jobs", "not-a-token")[0] == 401
        assert served.get("/readyz")[0] == 200  # the probes stay open
    finally:
        served.stop()
