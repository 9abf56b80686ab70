"""Issue 29, finding 2: the read API was open (0.0.0.0, plain HTTP, no authentication, every
tenant's jobs to anyone). The visibility API is served the way an aggregated API is: only the
API server's front proxy may call it (a client certificate its CA signed, with an allowed name,
from ``kube-system/extension-apiserver-authentication``), and it lists one namespace's jobs.

``fleetgate serve --visibility-port`` as a child process against the sandbox; this test plays
the front proxy with a client certificate of its own CA (the API server's RBAC, in front of it,
is the sandbox's part: tests/reconciler/test_visibility_e2e.py)."""

from __future__ import annotations

import copy
import http.client
import json
import ssl
from pathlib import Path
from typing import Any

import kubernetes
import pytest

from sandbox.karmada import KarmadaControllers
from sandbox.karmada.names import DURATION_ANNOTATION
from tests.reconciler.serveproc import ServeProcess
from tests.reconciler.test_loop import binding, clock, custom, eventually, fleet_world, submit
from tests.sandbox.test_webhooks import pytorchjob
from tests.webhook.helpers import write_certificates

__all__ = ["clock", "custom", "fleet_world"]  # fixtures used by name

PREFIX = "/apis/visibility.fleetgate.io/v1alpha1"
PROXY = "front-proxy-client"


def other_namespace(api_client: kubernetes.client.ApiClient, name: str) -> None:
    """A second tenant's namespace whose PyTorchJobs Karmada binds (a copy of research's
    PropagationPolicy)."""
    kubernetes.client.CoreV1Api(api_client).create_namespace({"metadata": {"name": name}})
    custom = kubernetes.client.CustomObjectsApi(api_client)
    policy = custom.get_namespaced_custom_object(
        "policy.karmada.io", "v1alpha1", "research", "propagationpolicies", "research-jobs"
    )
    body = copy.deepcopy(policy)
    body["metadata"] = {"name": "team-b-jobs", "namespace": name}
    custom.create_namespaced_custom_object(
        "policy.karmada.io", "v1alpha1", name, "propagationpolicies", body
    )


def front_proxy_settings(api_client: kubernetes.client.ApiClient, ca: Path) -> None:
    data = {
        "requestheader-client-ca-file": ca.read_text(),
        "requestheader-allowed-names": json.dumps([PROXY]),
        "requestheader-username-headers": json.dumps(["X-Remote-User"]),
        "requestheader-group-headers": json.dumps(["X-Remote-Group"]),
        "requestheader-extra-headers-prefix": json.dumps(["X-Remote-Extra-"]),
    }
    name = "extension-apiserver-authentication"  # the sandbox writes it at start: replaced
    body = {"metadata": {"name": name}, "data": data}
    kubernetes.client.CoreV1Api(api_client).replace_namespaced_config_map(name, "kube-system", body)


def call(
    url: str, path: str, serving_ca: Path, client: tuple[Path, Path] | None, **headers: str
) -> tuple[int, Any]:
    status, _, body = exchange(url, path, serving_ca, client, headers)
    return status, json.loads(body or b"null")


def fetch(
    url: str, path: str, serving_ca: Path, client: tuple[Path, Path] | None, **headers: str
) -> tuple[int, bytes]:
    status, _, body = exchange(url, path, serving_ca, client, headers)
    return status, body


def exchange(
    url: str,
    path: str,
    serving_ca: Path,
    client: tuple[Path, Path] | None,
    headers: dict[str, str],
) -> tuple[int, dict[str, str], bytes]:
    context = ssl.create_default_context(cafile=str(serving_ca))
    if client is not None:
        context.load_cert_chain(*map(str, client))
    host, port = url.removeprefix("https://").rsplit(":", 1)
    conn = http.client.HTTPSConnection(host, int(port), timeout=10, context=context)
    try:
        conn.request("GET", path, headers=headers)
        answer = conn.getresponse()
        return answer.status, dict(answer.getheaders()), answer.read()
    finally:
        conn.close()


def submit_in(custom: kubernetes.client.CustomObjectsApi, namespace: str, name: str) -> None:
    job = pytorchjob(2)
    job["metadata"].update(name=name, namespace=namespace)
    job["metadata"]["annotations"] = {DURATION_ANNOTATION: "5m"}
    custom.create_namespaced_custom_object("kubeflow.org", "v1", namespace, "pytorchjobs", job)


def serve_two_tenants(
    kubeconfig: Path, custom, fleet_world: KarmadaControllers, tls: tuple[Path, Path], log: Path
) -> ServeProcess:
    """A job of research's and one of team-b's bound by Karmada's detector, then ``fleetgate
    serve --visibility-port`` (one replica) with the serving certificate ``tls``."""
    submit(custom, "first", workers=2)
    submit_in(custom, "team-b", "theirs")
    fleet_world.run_once()
    cert, key = tls
    return ServeProcess(
        kubeconfig, "replica-v", log, "--no-leader-elect",
        "--visibility-port", "0", "--tls-cert", str(cert), "--tls-key", str(key),
    )  # fmt: skip


def visibility_url(process: ServeProcess) -> str:
    return process.address("visibility")


def test_the_visibility_api_answers_only_the_front_proxy_and_one_namespace_at_a_time(
    api_client, kubeconfig: Path, custom, fleet_world: KarmadaControllers, tmp_path: Path
) -> None:
    cert, key, serving_ca, _ = write_certificates(tmp_path / "serving")
    proxy_cert, proxy_key, proxy_ca, signer = write_certificates(
        tmp_path / "proxy", common_name=PROXY
    )
    rogue = write_certificates(tmp_path / "rogue", common_name=PROXY)[:2]  # another CA
    unnamed = write_certificates(tmp_path / "unnamed", common_name="someone", ca=signer)[:2]
    front_proxy_settings(api_client, proxy_ca)
    other_namespace(api_client, "team-b")
    served = serve_two_tenants(kubeconfig, custom, fleet_world, (cert, key), tmp_path / "v.log")
    try:
        served.wait_ready()
        url = visibility_url(served)
        proxy = (proxy_cert, proxy_key)
        alice = {"X-Remote-User": "alice", "X-Remote-Group": "research-team"}
        eventually(lambda: bool(binding(custom, "first")["spec"].get("clusters")), 30)

        code, listed = call(url, f"{PREFIX}/namespaces/research/jobs", serving_ca, proxy, **alice)
        assert code == 200 and listed["kind"] == "JobList", listed
        assert [i["binding"] for i in listed["items"]] == ["research/first-pytorchjob"]
        code, one = call(
            url, f"{PREFIX}/namespaces/research/jobs/first", serving_ca, proxy, **alice
        )
        assert code == 200 and one["state"] == "admitted"
        code, theirs = call(url, f"{PREFIX}/namespaces/team-b/jobs", serving_ca, proxy, **alice)
        assert [i["binding"] for i in theirs["items"]] == ["team-b/theirs-pytorchjob"]
        code, every = call(url, f"{PREFIX}/jobs", serving_ca, proxy, **alice)
        assert sorted(i["binding"] for i in every["items"]) == [
            "research/first-pytorchjob", "team-b/theirs-pytorchjob"
        ]  # fmt: skip
        code, queues = call(url, f"{PREFIX}/queues", serving_ca, proxy, **alice)
        assert code == 200 and queues["items"]
        assert all("pending" in q and "items" not in q for q in queues["items"])
        code, discovery = call(url, PREFIX, serving_ca, proxy, **alice)
        assert {r["name"] for r in discovery["resources"]} == {"jobs", "queues", "fleets"}

        # a page at a time, filtered by a fieldSelector, as a Kubernetes list (team-b may not
        # use research's queues: its job is rejected)
        eventually(
            lambda: (
                [
                    i["state"]
                    for i in call(url, f"{PREFIX}/jobs", serving_ca, proxy, **alice)[1]["items"]
                ]
                == ["admitted", "rejected"]
            ),
            30,
            detail=lambda: call(url, f"{PREFIX}/jobs", serving_ca, proxy, **alice)[1]["items"],
        )
        code, page = call(url, f"{PREFIX}/jobs?limit=1", serving_ca, proxy, **alice)
        assert [i["binding"] for i in page["items"]] == ["research/first-pytorchjob"]
        assert page["metadata"]["remainingItemCount"] == 1
        token = page["metadata"]["continue"]
        code, rest = call(
            url, f"{PREFIX}/jobs?limit=1&continue={token}", serving_ca, proxy, **alice
        )
        assert [i["binding"] for i in rest["items"]] == ["team-b/theirs-pytorchjob"]
        assert "continue" not in rest["metadata"]
        for selector, found in (
            ("state=admitted", ["research/first-pytorchjob"]),
            ("metadata.namespace=team-b", ["team-b/theirs-pytorchjob"]),
            ("kind=PyTorchJob,state==pending", []),
            ("reason=QueueNotAllowed", ["team-b/theirs-pytorchjob"]),
        ):
            code, chosen = call(
                url, f"{PREFIX}/jobs?fieldSelector={selector}", serving_ca, proxy, **alice
            )
            assert code == 200 and [i["binding"] for i in chosen["items"]] == found, selector
        code, within = call(
            url, f"{PREFIX}/namespaces/research/jobs?fieldSelector=metadata.namespace=team-b",
            serving_ca, proxy, **alice,
        )  # fmt: skip
        assert code == 200 and within["items"] == []  # another namespace's, inside research's
        for selector, said in (
            ("spec.nodeName=x", "is not a known field selector"),
            ("state!=pending", "only = is served"),
            ("state=sleeping", "is not one of"),
        ):
            code, refused = call(
                url, f"{PREFIX}/jobs?fieldSelector={selector}", serving_ca, proxy, **alice
            )
            assert code == 400 and said in refused["message"], (selector, refused)
        code, refused = call(
            url, f"{PREFIX}/jobs?limit=1&continue={token}&fieldSelector=state=pending",
            serving_ca, proxy, **alice,
        )  # fmt: skip
        assert code == 400 and "repeat those parameters" in refused["message"]

        # the fleet: every cluster's numbers and what fleetgate admitted there (first: 24 GPUs)
        code, fleet = call(url, f"{PREFIX}/fleets/current", serving_ca, proxy, **alice)
        assert code == 200 and fleet["kind"] == "Fleet" and fleet["policy"]["healthy"]
        by_name = {c["name"]: c for c in fleet["clusters"]}
        assert set(by_name) == {"cpu-spot", "gpu-east", "gpu-west"}
        assert sum(c["admitted"].get("nvidia.com/gpu", 0) for c in by_name.values()) == 24
        assert all(c["ready"] and c["notReady"] == [] for c in by_name.values())
        assert call(url, f"{PREFIX}/fleets/other", serving_ca, proxy, **alice)[0] == 404
        code, fleets = call(url, f"{PREFIX}/fleets", serving_ca, proxy, **alice)
        assert [f["metadata"]["name"] for f in fleets["items"]] == ["current"]
        # the queues in the tree's order, each after its parent, a page at a time
        order = [(q["metadata"]["name"], q["depth"]) for q in queues["items"]]
        place = {name: i for i, (name, _) in enumerate(order)}
        assert all(place[q["parent"]] < place[q["metadata"]["name"]] for q in queues["items"]
                   if q["parent"])  # fmt: skip
        assert dict(order)["research-training"] == dict(order)["research"] + 1
        code, first = call(url, f"{PREFIX}/queues?limit=2", serving_ca, proxy, **alice)
        assert [q["metadata"]["name"] for q in first["items"]] == [n for n, _ in order[:2]]
        assert first["metadata"]["remainingItemCount"] == len(order) - 2
        token = first["metadata"]["continue"]
        code, rest = call(
            url, f"{PREFIX}/queues?limit=50&continue={token}", serving_ca, proxy, **alice
        )
        assert [q["metadata"]["name"] for q in rest["items"]] == [n for n, _ in order[2:]]
        assert "continue" not in rest["metadata"]
        assert call(url, f"{PREFIX}/queues?continue=nonsense", serving_ca, proxy, **alice)[0] == 400
        held = {q["metadata"]["name"]: q for q in queues["items"]}
        assert held["research-training"]["reservations"] == 0
        assert held["research-training"]["history"]["points"][-1][2] >= 24

        # a read answered again in this pass: the same bytes, none at all for their holder,
        # and still only to the front proxy
        jobs = f"{PREFIX}/namespaces/research/jobs?limit=5"

        def within_one_pass() -> bool:  # the reconciler may pass meanwhile: a new view, ETag
            code, said, first = exchange(url, jobs, serving_ca, proxy, alice)
            assert code == 200 and said["ETag"] and said["Cache-Control"] == "no-cache"
            again = exchange(url, jobs, serving_ca, proxy, alice)
            held = exchange(url, jobs, serving_ca, proxy, {**alice, "If-None-Match": said["ETag"]})
            if again[1]["ETag"] != said["ETag"] or held[1].get("ETag") != said["ETag"]:
                return False
            return again[2] == first and (held[0], held[2]) == (304, b"")

        eventually(within_one_pass, 30)
        assert exchange(url, jobs, serving_ca, None, alice)[0] == 401
        other = exchange(url, f"{PREFIX}/namespaces/team-b/jobs?limit=5", serving_ca, proxy, alice)
        mine = exchange(url, jobs, serving_ca, proxy, alice)
        assert b"theirs" in other[2] and b"theirs" not in mine[2]

        # the dashboard's files, for a user who reaches them through the API server
        status, page_html = fetch(url, f"{PREFIX}/dashboard/", serving_ca, proxy, **alice)
        assert status == 200 and b'<script src="app.js"' in page_html
        status, _ = fetch(url, f"{PREFIX}/dashboard/../api.py", serving_ca, proxy, **alice)
        assert status == 404

        # nobody but the front proxy: no client certificate, a name it does not allow, a
        # certificate of another CA (refused in the handshake), or no user named
        jobs = f"{PREFIX}/namespaces/research/jobs"
        assert call(url, jobs, serving_ca, None, **alice)[0] == 401
        assert call(url, jobs, serving_ca, unnamed, **alice)[0] == 401
        assert call(url, jobs, serving_ca, proxy)[0] == 401
        with pytest.raises((ssl.SSLError, ConnectionError)):
            call(url, jobs, serving_ca, rogue, **alice)
    finally:
        served.stop()


@pytest.mark.parametrize(
    ("said", "seen"),
    [
        ("preempting team-b/x-pytorchjob for room on gpu-east",
         "preempting (a job of another namespace) for room on gpu-east"),
        ("room is held for PyTorchJob/team-b/big, which has waited since T",
         "room is held for (a job of another namespace), which has waited since T"),
        ("behind its head research/first; needs 8 nvidia.com/gpu",
         "behind its head research/first; needs 8 nvidia.com/gpu"),
        ("labels kubernetes.io/metadata.name; unknown/x",
         "labels kubernetes.io/metadata.name; unknown/x"),
    ],
)  # fmt: skip
def test_a_namespaced_view_hides_the_jobs_of_other_namespaces(said: str, seen: str) -> None:
    from reconciler.visibility import redacted

    known = frozenset({"research", "team-b"})
    item = {"message": said, "victims": ["team-b/v", "research/w"], "priority": 3}
    shown = redacted(item, "research", known)
    assert shown["message"] == seen
    assert shown["victims"] == ["(a job of another namespace)", "research/w"]
    assert shown["priority"] == 3
