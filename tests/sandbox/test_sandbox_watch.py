"""Watch through the real client: events, resume from a resourceVersion, 410 Gone and relist."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import watch
from kubernetes.client import CoreV1Api, CustomObjectsApi
from kubernetes.client.rest import ApiException

from sandbox.server import Sandbox
from tests.sandbox.builders import RB_PLURAL, WORK, binding

GROUP, VERSION = WORK
TIMEOUT = 5  # seconds; every stream here is bounded by the server's timeoutSeconds


def events(stream: Iterator[dict[str, Any]], count: int) -> list[tuple[str, str]]:
    """The first ``count`` (type, name) pairs of a stream."""
    seen = []
    for event in stream:
        obj = event["object"]
        name = obj["metadata"]["name"] if isinstance(obj, dict) else obj.metadata.name
        seen.append((event["type"], name))
        if len(seen) == count:
            break
    return seen


def in_background(action: Callable[[], None]) -> threading.Thread:
    thread = threading.Thread(target=action, daemon=True)
    thread.start()
    return thread


def test_watch_sees_added_modified_deleted(core: CoreV1Api):
    listed = core.list_namespaced_config_map("default")
    w = watch.Watch()
    stream = w.stream(
        core.list_namespaced_config_map,
        "default",
        resource_version=listed.metadata.resource_version,
        timeout_seconds=TIMEOUT,
    )

    def writes() -> None:
        core.create_namespaced_config_map(
            "default", {"metadata": {"name": "a"}, "data": {"k": "1"}}
        )
        core.patch_namespaced_config_map("a", "default", {"data": {"k": "2"}})
        core.delete_namespaced_config_map("a", "default")

    in_background(writes)
    assert events(stream, 3) == [("ADDED", "a"), ("MODIFIED", "a"), ("DELETED", "a")]
    w.stop()


def test_watch_without_resource_version_starts_with_current_objects(custom: CustomObjectsApi):
    custom.create_namespaced_custom_object(GROUP, VERSION, "default", RB_PLURAL, binding("a"))
    stream = watch.Watch().stream(
        custom.list_namespaced_custom_object,
        GROUP,
        VERSION,
        "default",
        RB_PLURAL,
        timeout_seconds=TIMEOUT,
    )
    assert events(stream, 1) == [("ADDED", "a-pytorchjob")]


def test_watch_resumes_from_a_resource_version(custom: CustomObjectsApi):
    first = custom.create_namespaced_custom_object(
        GROUP, VERSION, "default", RB_PLURAL, binding("a")
    )
    custom.create_namespaced_custom_object(GROUP, VERSION, "default", RB_PLURAL, binding("b"))
    custom.patch_namespaced_custom_object(
        GROUP, VERSION, "default", RB_PLURAL, "a-pytorchjob", {"spec": {"replicas": 2}}
    )
    stream = watch.Watch().stream(
        custom.list_namespaced_custom_object,
        GROUP,
        VERSION,
        "default",
        RB_PLURAL,
        resource_version=first["metadata"]["resourceVersion"],
        timeout_seconds=TIMEOUT,
    )
    assert events(stream, 2) == [("ADDED", "b-pytorchjob"), ("MODIFIED", "a-pytorchjob")]


def test_watch_with_label_selector_sees_objects_enter_and_leave(core: CoreV1Api):
    core.create_namespaced_config_map(
        "default", {"metadata": {"name": "a", "labels": {"team": "x"}}}
    )
    start = core.list_namespaced_config_map("default").metadata.resource_version
    core.patch_namespaced_config_map("a", "default", {"metadata": {"labels": {"team": "y"}}})
    core.patch_namespaced_config_map("a", "default", {"metadata": {"labels": {"team": "x"}}})
    stream = watch.Watch().stream(
        core.list_namespaced_config_map,
        "default",
        label_selector="team=x",
        resource_version=start,
        timeout_seconds=TIMEOUT,
    )
    assert events(stream, 2) == [("DELETED", "a"), ("ADDED", "a")]


def test_too_old_resource_version_is_410_and_relist_recovers(sandbox: Sandbox, core: CoreV1Api):
    start = core.list_namespaced_config_map("default").metadata.resource_version
    for i in range(5):
        core.create_namespaced_config_map("default", {"metadata": {"name": f"c{i}"}})
    sandbox.store.set_event_log_limit(2)  # the log now keeps only c3 and c4
    with pytest.raises(ApiException) as caught:
        stream = watch.Watch().stream(
            core.list_namespaced_config_map,
            "default",
            resource_version=start,
            timeout_seconds=TIMEOUT,
        )
        next(iter(stream))
    assert caught.value.status == 410
    assert "Expired" in caught.value.reason

    relisted = core.list_namespaced_config_map("default")  # relist, then watch from its version
    assert [c.metadata.name for c in relisted.items] == [f"c{i}" for i in range(5)]
    stream = watch.Watch().stream(
        core.list_namespaced_config_map,
        "default",
        resource_version=relisted.metadata.resource_version,
        timeout_seconds=TIMEOUT,
    )
    in_background(
        lambda: core.create_namespaced_config_map("default", {"metadata": {"name": "c5"}})
    )
    assert events(stream, 1) == [("ADDED", "c5")]


def test_bookmarks_carry_progress(sandbox: Sandbox, core: CoreV1Api):
    start = core.list_namespaced_config_map("default").metadata.resource_version
    core.create_namespaced_config_map("kube-system", {"metadata": {"name": "elsewhere"}})
    stream = watch.Watch().stream(
        core.list_namespaced_config_map,
        "default",
        resource_version=start,
        allow_watch_bookmarks=True,
        timeout_seconds=TIMEOUT,
        deserialize=False,
    )
    for event in stream:
        if event["type"] == "BOOKMARK":
            assert int(event["object"]["metadata"]["resourceVersion"]) >= int(start) + 1
            break


def test_watch_ends_at_timeout_seconds(core: CoreV1Api):
    stream = watch.Watch().stream(
        core.list_namespaced_config_map, "default", resource_version="1", timeout_seconds=1
    )
    assert list(stream) == []


def test_in_process_subscription(sandbox: Sandbox):
    store = sandbox.store
    received: list[str] = []
    done = threading.Event()

    def on_event(event: dict[str, Any]) -> None:
        received.append(event["type"])
        event["object"]["metadata"]["name"] = "mutated"  # a private copy: the store is unaffected
        if len(received) == 2:
            done.set()

    subscription = store.watch(
        "configmaps",
        namespace="default",
        resource_version=store.resource_version,
        callback=on_event,
    )
    store.create("configmaps", {"metadata": {"name": "a", "namespace": "default"}})
    store.delete("configmaps", "a", namespace="default")
    assert done.wait(TIMEOUT)
    assert received == ["ADDED", "DELETED"]
    subscription.close()
    assert store.list("configmaps", namespace="default")["items"] == []


def test_a_shared_event_reads_the_stored_object_and_a_plain_one_is_a_private_copy(
    sandbox: Sandbox,
):
    store = sandbox.store
    since = store.resource_version
    store.create("configmaps", {"metadata": {"name": "a", "namespace": "default"}, "data": {}})
    plain = store.watch("configmaps", namespace="default", resource_version=since)
    shared = store.watch("configmaps", namespace="default", resource_version=since)
    try:
        mine, read_only = plain.get(timeout=TIMEOUT), shared.get(timeout=TIMEOUT, shared=True)
        assert mine == read_only and mine["object"]["apiVersion"] == "v1"
        mine["object"]["data"]["k"] = "v"  # a copy: the store is unaffected
        assert store.get("configmaps", "a", namespace="default")["data"] == {}
        # the HTTP stream only serializes its events: no deep copy of each one
        assert read_only["object"]["data"] is not mine["object"]["data"]
        stored = store._objects[store.resource("configmaps").key][("default", "a")]
        assert read_only["object"]["data"] is stored["data"]
        assert read_only["object"] is not stored  # its apiVersion is set on a shallow copy
    finally:
        plain.close()
        shared.close()
