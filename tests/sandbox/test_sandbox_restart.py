"""A restart with the state reset, and reads from a resourceVersion the server has not reached,
answered as kube-apiserver answers them (staging/src/k8s.io/apiserver/pkg/storage/cacher):

- a list "not older than" such a version waits up to a bound (the watch cache's blockTimeout,
  3 s) for it, then fails with 504 Timeout, cause ResourceVersionTooLarge, retry after 1 s;
- a watch from it is accepted and stays silent until the counter passes it: no event at or
  below it, no bookmark below it (the cacher lets such a watch wait for its events)."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import kubernetes
import pytest
from kubernetes import watch
from kubernetes.client import CoreV1Api, CustomObjectsApi
from kubernetes.client.rest import ApiException

from sandbox.server import Sandbox
from sandbox.store import Store
from tests.sandbox.builders import RB_PLURAL, WORK, binding
from tests.waiting import PATIENCE_S

GROUP, VERSION = WORK
RESOURCE = f"{RB_PLURAL}.{GROUP}"


def client_for(kubeconfig: Path) -> kubernetes.client.ApiClient:
    configuration = kubernetes.client.Configuration()
    kubernetes.config.load_kube_config(
        config_file=str(kubeconfig), client_configuration=configuration
    )
    return kubernetes.client.ApiClient(configuration)


def create(custom: CustomObjectsApi, name: str) -> str:
    made = custom.create_namespaced_custom_object(
        GROUP, VERSION, "default", RB_PLURAL, binding(name)
    )
    return str(made["metadata"]["resourceVersion"])


def test_a_restart_with_the_state_reset_keeps_address_and_credentials(
    sandbox: Sandbox, custom: CustomObjectsApi
):
    for i in range(5):
        create(custom, f"old{i}")
    url, before = sandbox.url, sandbox.store.resource_version
    fresh = Store()
    sandbox.restart(fresh)
    assert (sandbox.url, sandbox.store) == (url, fresh)
    assert fresh.resource_version < before
    # the same client (kubeconfig: address, CA, token) reads the new, empty state
    listed = custom.list_namespaced_custom_object(GROUP, VERSION, "default", RB_PLURAL)
    assert listed["items"] == []
    create(custom, "new")
    names = [o["metadata"]["name"] for o in sandbox.store.list(RESOURCE)["items"]]
    assert names == ["new-pytorchjob"]


def test_a_list_from_a_version_the_server_has_not_reached_is_too_large(
    sandbox: Sandbox, custom: CustomObjectsApi
):
    sandbox.store.freshness_timeout = 0.05
    current = int(create(custom, "a"))
    with pytest.raises(ApiException) as caught:
        custom.list_namespaced_custom_object(
            GROUP,
            VERSION,
            "default",
            RB_PLURAL,
            resource_version=str(current + 100),
            resource_version_match="NotOlderThan",
        )
    assert caught.value.status == 504
    assert caught.value.headers["Retry-After"] == "1"
    status = json.loads(caught.value.body)
    assert status["reason"] == "Timeout"
    assert status["message"] == (
        f"Timeout: Too large resource version: {current + 100}, current: {current}"
    )
    assert status["details"] == {
        "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
        "retryAfterSeconds": 1,
    }
    # one the server has reached is served, as "not older than" asks
    listed = custom.list_namespaced_custom_object(
        GROUP, VERSION, "default", RB_PLURAL, resource_version=str(current)
    )
    assert [o["metadata"]["name"] for o in listed["items"]] == ["a-pytorchjob"]


def test_a_list_waits_for_a_version_that_arrives_within_the_bound(
    sandbox: Sandbox, custom: CustomObjectsApi
):
    sandbox.store.freshness_timeout = PATIENCE_S
    wanted = int(create(custom, "a")) + 1
    arrived = threading.Event()

    def hook(method: str, path: str, query: dict[str, str]) -> None:
        if method == "GET" and query.get("resourceVersion") == str(wanted):
            arrived.set()

    sandbox.request_hooks.append(hook)
    answer: dict[str, object] = {}

    def list_at_wanted() -> None:
        answer.update(
            custom.list_namespaced_custom_object(
                GROUP, VERSION, "default", RB_PLURAL, resource_version=str(wanted)
            )
        )

    reader = threading.Thread(target=list_at_wanted, daemon=True)
    reader.start()
    assert arrived.wait(PATIENCE_S)
    create(custom, "b")  # resourceVersion `wanted`: the waiting list is answered
    reader.join(PATIENCE_S)
    assert not reader.is_alive()
    assert int(answer["metadata"]["resourceVersion"]) >= wanted  # type: ignore[index]
    names = [o["metadata"]["name"] for o in answer["items"]]  # type: ignore[index]
    assert names == ["a-pytorchjob", "b-pytorchjob"]


def watched(custom: CustomObjectsApi, resource_version: str, timeout: int) -> list[str]:
    """(type, name or bookmark resourceVersion) of a watch's events, until its first ADDED or
    the server's ``timeoutSeconds``."""
    seen = []
    stream = watch.Watch().stream(
        custom.list_namespaced_custom_object,
        GROUP,
        VERSION,
        "default",
        RB_PLURAL,
        resource_version=resource_version,
        allow_watch_bookmarks=True,
        timeout_seconds=timeout,
    )
    for event in stream:
        meta = event["object"]["metadata"]
        seen.append(f"{event['type']} {meta.get('name') or meta['resourceVersion']}")
        if event["type"] == "ADDED":
            break
    return seen


def test_a_watch_from_a_version_the_server_has_not_reached_waits_for_it(
    sandbox: Sandbox, custom: CustomObjectsApi
):
    current = int(create(custom, "a"))
    ahead = current + 3
    create(custom, "b")  # current+1: replayed from the log to a watch that starts after it
    answer: list[str] = []
    reader = threading.Thread(
        target=lambda: answer.extend(watched(custom, str(ahead), int(PATIENCE_S))), daemon=True
    )
    reader.start()
    create(custom, "c")  # current+2
    create(custom, "d")  # current+3 = ahead: not after it
    create(custom, "e")  # the first event after `ahead`
    reader.join(PATIENCE_S)
    assert not reader.is_alive()
    assert [e for e in answer if not e.startswith("BOOKMARK")] == ["ADDED e-pytorchjob"]
    assert all(int(e.split()[1]) >= ahead for e in answer if e.startswith("BOOKMARK"))


def test_a_watch_far_ahead_of_the_server_gets_nothing_not_even_bookmarks(
    sandbox: Sandbox, custom: CustomObjectsApi
):
    current = int(create(custom, "a"))
    # bookmarks are due every 0.5 s (the fixture); none may carry a version below the watch's
    assert watched(custom, str(current + 100), timeout=2) == []


def test_a_restart_ends_the_open_watches(sandbox: Sandbox, core: CoreV1Api):
    opened, ended = threading.Event(), threading.Event()
    lasts = 10 * int(PATIENCE_S)  # the watch's own timeout: only the restart ends it sooner

    def consume() -> None:
        try:
            for _ in watch.Watch().stream(core.list_namespace, timeout_seconds=lasts):
                opened.set()  # the namespaces that exist: the watch is open
        except Exception:  # noqa: BLE001 - a cut connection ends the stream too
            pass
        ended.set()

    threading.Thread(target=consume, daemon=True).start()
    assert opened.wait(PATIENCE_S)  # else the request could reach the restarted server
    sandbox.restart(Store())
    assert ended.wait(PATIENCE_S)
