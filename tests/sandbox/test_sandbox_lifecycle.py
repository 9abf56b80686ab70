"""The server's lifecycle and the in-process API's contracts."""

from __future__ import annotations

import http.client
import json
import threading
from pathlib import Path

import kubernetes
import pytest
import urllib3
from kubernetes import watch

from sandbox import Sandbox, StatusError, Store
from sandbox.admission import AdmissionRequest
from sandbox.errors import status
from tests.waiting import PATIENCE_S

WATCH_S = 10 * int(PATIENCE_S)  # a watch's own timeout, far beyond any wait here


def test_stop_ends_live_watches_promptly(tmp_path: Path):
    server = Sandbox()
    server.start(port=0)
    config = kubernetes.client.Configuration()
    kubernetes.config.load_kube_config(
        config_file=str(server.write_kubeconfig(tmp_path / "kc")), client_configuration=config
    )
    core = kubernetes.client.CoreV1Api(kubernetes.client.ApiClient(config))
    opened, ended = threading.Event(), threading.Event()

    def consume() -> None:
        try:
            for _ in watch.Watch().stream(core.list_namespace, timeout_seconds=WATCH_S):
                opened.set()  # the namespaces that exist: the watch is open
        except (urllib3.exceptions.HTTPError, OSError):
            pass  # the connection was cut: that ends the stream too
        ended.set()

    threading.Thread(target=consume, daemon=True).start()
    assert opened.wait(PATIENCE_S)
    server.stop(timeout=5)
    assert ended.wait(PATIENCE_S)  # ended by the stop, long before the watch's own timeout


def test_plain_http_for_local_debugging():
    server = Sandbox(tls_enabled=False, token=None)
    url = server.start(port=0)
    try:
        assert url.startswith("http://127.0.0.1:")
        host, port = url.removeprefix("http://").split(":")
        connection = http.client.HTTPConnection(host, int(port), timeout=5)
        connection.request("GET", "/apis/work.karmada.io/v1alpha2")
        listing = json.loads(connection.getresponse().read())
        names = {r["name"] for r in listing["resources"]}
        assert {"resourcebindings", "resourcebindings/status", "clusterresourcebindings"} <= names
        connection.request("GET", "/openapi/v3")
        assert connection.getresponse().status == 404
    finally:
        server.stop()


def test_in_process_results_are_private_copies():
    store = Store()
    created = store.create(
        "configmaps", {"metadata": {"name": "c", "namespace": "default"}, "data": {"a": "1"}}
    )
    created["data"]["a"] = "changed"
    listed = store.list("configmaps", namespace="default")
    listed["items"][0]["data"]["a"] = "changed too"
    assert store.get("configmaps", "c", namespace="default")["data"] == {"a": "1"}


def test_in_process_errors_are_statuses():
    store = Store()
    with pytest.raises(StatusError) as caught:
        store.get("configmaps", "missing", namespace="default")
    assert (caught.value.code, caught.value.reason) == (404, "NotFound")


class DenyLabelled:
    """An admission plugin: adds a label on create, refuses objects labelled deny=true."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    def mutate(self, request: AdmissionRequest) -> dict | None:
        self.seen.append((request.operation, request.name))
        if request.operation == "CREATE" and request.object is not None:
            request.object["metadata"].setdefault("labels", {})["admitted"] = "yes"
            return request.object
        return None

    def validate(self, request: AdmissionRequest) -> None:
        labels = ((request.object or {}).get("metadata") or {}).get("labels") or {}
        if labels.get("deny") == "true":
            raise StatusError(status(403, "Forbidden", f"{request.name}: denied by test admission"))


def test_admission_hook_mutates_and_denies():
    store = Store()
    store.admission = DenyLabelled()
    created = store.create("configmaps", {"metadata": {"name": "c", "namespace": "default"}})
    assert created["metadata"]["labels"] == {"admitted": "yes"}
    with pytest.raises(StatusError) as caught:
        store.patch(
            "configmaps", "c", {"metadata": {"labels": {"deny": "true"}}}, namespace="default"
        )
    assert caught.value.code == 403
    assert store.get("configmaps", "c", namespace="default")["metadata"]["labels"] == {
        "admitted": "yes"
    }


def test_request_hooks_inject_faults(sandbox: Sandbox, core: kubernetes.client.CoreV1Api):
    def fail_configmap_writes(method: str, path: str, query: dict[str, str]) -> None:
        if method == "POST" and path.endswith("/configmaps"):
            raise StatusError(status(500, "InternalError", "injected"))

    sandbox.request_hooks.append(fail_configmap_writes)
    with pytest.raises(kubernetes.client.rest.ApiException) as caught:
        core.create_namespaced_config_map("default", {"metadata": {"name": "c"}})
    assert caught.value.status == 500
    sandbox.request_hooks.clear()
    core.create_namespaced_config_map("default", {"metadata": {"name": "c"}})


def test_dry_run_stores_nothing(core: kubernetes.client.CoreV1Api):
    core.create_namespaced_config_map("default", {"metadata": {"name": "c"}}, dry_run="All")
    assert core.list_namespaced_config_map("default").items == []


def test_concurrent_patches_all_apply_and_stale_puts_conflict():
    store = Store()
    store.create("configmaps", {"metadata": {"name": "c", "namespace": "default"}})

    def label(worker: int) -> None:
        for i in range(20):
            patch = {"metadata": {"labels": {f"w{worker}": str(i)}}}
            for _ in range(100):  # like kube-apiserver, the store gives up after a few
                try:  # conflicting retries of one patch (409); a client tries again
                    store.patch("configmaps", "c", patch, namespace="default")
                    break
                except StatusError as error:
                    assert error.reason == "Conflict"

    threads = [threading.Thread(target=label, args=(w,)) for w in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    labels = store.get("configmaps", "c", namespace="default")["metadata"]["labels"]
    assert labels == {f"w{w}": "19" for w in range(8)}

    read = store.get("configmaps", "c", namespace="default")
    outcomes = []
    for value in ("a", "b"):
        attempt = {**read, "data": {"v": value}}
        try:
            store.update("configmaps", attempt, namespace="default")
            outcomes.append("ok")
        except StatusError as error:
            outcomes.append(error.reason)
    assert outcomes == ["ok", "Conflict"]
