"""The informer against the sandbox, through the real client: list, watch, resume, relist,
backoff, stop; and the snapshot built from the caches."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest
from kubernetes.client import ApiClient, CoreV1Api, CustomObjectsApi

from engine.fleet.snapshot import build_snapshot
from reconciler import informer as informer_module
from reconciler.backoff import Backoff
from reconciler.informer import Informer, Key
from reconciler.informers import Informers, namespace_labels, source_of
from reconciler.resources import NAMESPACES, RESOURCE_BINDINGS, Resource, default_resources
from sandbox.errors import too_large_resource_version
from sandbox.faults import Faults
from sandbox.server import Sandbox
from sandbox.store import Store
from tests.sandbox.builders import binding, cluster, pytorchjob
from tests.waiting import PATIENCE_S

GROUP, VERSION, PLURAL = "work.karmada.io", "v1alpha2", "resourcebindings"
FAST = {"backoff_base": 0.02, "backoff_max": 0.2, "watch_timeout": 5}
Change = tuple[str, Key, str | None]  # resource, key, resourceVersion (None: deleted)


def wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + PATIENCE_S
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"gave up waiting for {what}")
        time.sleep(0.02)


@pytest.fixture
def custom(api_client: ApiClient) -> CustomObjectsApi:
    return CustomObjectsApi(api_client)


@pytest.fixture
def faults(sandbox: Sandbox) -> Faults:
    return Faults(seed=7).attach(sandbox)


@pytest.fixture
def started(api_client: ApiClient) -> Iterator[Callable[..., Informer]]:
    """Start informers; every one is stopped at the end of the test."""
    made: list[Informer] = []

    def start(resource: Resource = RESOURCE_BINDINGS, **options: Any) -> Informer:
        informer = Informer(api_client, resource, **(FAST | options))
        made.append(informer)
        return informer.start()

    yield start
    for informer in made:
        informer.stop(timeout=2)


def record(informer: Informer) -> list[Change]:
    changes: list[Change] = []

    def listener(resource: str, key: Key, obj: Mapping[str, Any] | None) -> None:
        version = obj["metadata"]["resourceVersion"] if obj is not None else None
        changes.append((resource, key, version))

    informer.add_listener(listener)
    return changes


def requests(sandbox: Sandbox, plural: str = PLURAL) -> list[dict[str, str]]:
    """The query of each GET on ``plural``, recorded as it arrives."""
    seen: list[dict[str, str]] = []

    def hook(method: str, path: str, query: dict[str, str]) -> None:
        if method == "GET" and path.endswith("/" + plural):
            seen.append(dict(query))

    sandbox.request_hooks.insert(0, hook)
    return seen


def create(custom: CustomObjectsApi, name: str, namespace: str = "default") -> dict[str, Any]:
    return custom.create_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, binding(name, namespace)
    )


def server_state(sandbox: Sandbox) -> dict[Key, str]:
    items = sandbox.store.list(f"{PLURAL}.{GROUP}")["items"]
    return {
        (o["metadata"]["namespace"], o["metadata"]["name"]): o["metadata"]["resourceVersion"]
        for o in items
    }


def cache_state(informer: Informer) -> dict[Key, str]:
    return {k: o["metadata"]["resourceVersion"] for k, o in informer.snapshot_items().items()}


def test_initial_list_is_paged_and_syncs(sandbox, custom, started):
    for i in range(7):
        create(custom, f"job{i}")
    seen = requests(sandbox)
    informer = started(page_size=2)
    assert informer.synced.wait(PATIENCE_S)
    assert cache_state(informer) == server_state(sandbox)
    lists = [q for q in seen if q.get("watch") != "true"]
    assert [q.get("limit") for q in lists] == ["2"] * 4
    assert sum("continue" in q for q in lists) == 3
    obj = informer.get("default", "job3-pytorchjob")
    assert obj is not None
    assert (obj["apiVersion"], obj["kind"]) == ("work.karmada.io/v1alpha2", "ResourceBinding")
    assert informer.lists == 1


def test_added_modified_deleted_reach_cache_and_listeners(sandbox, custom, started):
    informer = started()
    changes = record(informer)
    assert informer.synced.wait(PATIENCE_S)
    created = create(custom, "a")
    key = ("default", "a-pytorchjob")
    wait_for(lambda: informer.get(*key) is not None, "ADDED")
    patched = custom.patch_namespaced_custom_object(
        GROUP, VERSION, "default", PLURAL, "a-pytorchjob", {"metadata": {"labels": {"x": "1"}}}
    )
    wait_for(lambda: (informer.get(*key) or {}).get("metadata", {}).get("labels"), "MODIFIED")
    custom.delete_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, "a-pytorchjob")
    wait_for(lambda: informer.get(*key) is None, "DELETED")
    wait_for(lambda: len(changes) == 3, "three changes")
    versions = [created["metadata"]["resourceVersion"], patched["metadata"]["resourceVersion"]]
    assert changes == [(f"{PLURAL}.{GROUP}", key, v) for v in versions] + [
        (f"{PLURAL}.{GROUP}", key, None)
    ]
    assert informer.resource_version >= patched["metadata"]["resourceVersion"]


@pytest.mark.parametrize("abrupt", [False, True], ids=["ended", "abrupt"])
def test_a_dropped_watch_resumes_without_relist_or_loss(sandbox, custom, faults, started, abrupt):
    seen = requests(sandbox)
    informer = started()
    changes = record(informer)
    assert informer.synced.wait(PATIENCE_S)
    create(custom, "before")
    wait_for(lambda: informer.get("default", "before-pytorchjob") is not None, "the first event")
    resume_from = informer.resource_version
    wait_for(lambda: faults.drop_watches(PLURAL, abrupt=abrupt) == 1, "the open watch")
    for i in range(5):
        create(custom, f"after{i}")
    wait_for(lambda: cache_state(informer) == server_state(sandbox), "the writes")
    watches = [q.get("resourceVersion") for q in seen if q.get("watch") == "true"]
    assert len(watches) >= 2
    assert watches[1] == resume_from
    assert informer.lists == 1
    assert [name for _, (_, name), _ in changes] == ["before-pytorchjob"] + [
        f"after{i}-pytorchjob" for i in range(5)
    ]


def test_410_gone_relists_and_the_cache_matches_the_server(sandbox, custom, faults, started):
    for i in range(3):
        create(custom, f"old{i}")
    watching = threading.Event()

    def watch_past_the_faults(method: str, path: str, query: dict[str, str]) -> None:
        if method == "GET" and path.endswith("/" + PLURAL) and query.get("watch") == "true":
            watching.set()  # after the fault's hook (appended before): the watch is served

    sandbox.request_hooks.append(watch_past_the_faults)
    informer = started()
    changes = record(informer)
    assert informer.synced.wait(PATIENCE_S)
    changes.clear()  # the first list's
    assert watching.wait(PATIENCE_S)
    # keep it from reconnecting while the server forgets its resume point
    rule = faults.fail_requests(500, method="GET", path=PLURAL)
    wait_for(lambda: faults.drop_watches(PLURAL) == 1, "the open watch")
    custom.delete_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, "old0-pytorchjob")
    custom.patch_namespaced_custom_object(
        GROUP, VERSION, "default", PLURAL, "old1-pytorchjob", {"metadata": {"labels": {"x": "y"}}}
    )
    for i in range(3):
        create(custom, f"new{i}")
    sandbox.store.set_event_log_limit(1)
    faults.clear(rule)
    wait_for(lambda: informer.lists == 2, "the relist")
    wait_for(lambda: cache_state(informer) == server_state(sandbox), "the cache to match")
    names = {key[1]: version for _, key, version in changes}
    assert names["old0-pytorchjob"] is None  # the relist told the listeners of the deletion
    assert set(names) == {"old0-pytorchjob", "old1-pytorchjob"} | {
        f"new{i}-pytorchjob" for i in range(3)
    }
    # a write after the relist still arrives through the new watch
    create(custom, "later")
    wait_for(lambda: informer.get("default", "later-pytorchjob") is not None, "the watch")


@pytest.mark.parametrize("code", [500, 429])
def test_errors_back_off_and_recover(sandbox, custom, faults, started, code, monkeypatch):
    create(custom, "x")
    faults.fail_requests(code, method="GET", path=PLURAL, count=4)
    waits: list[float] = []

    class Recorded(Backoff):
        def next(self) -> float:
            waits.append(super().next())
            return waits[-1]

    monkeypatch.setattr(informer_module, "Backoff", Recorded)
    informer = started(backoff_base=0.05, backoff_max=0.1)
    assert informer.synced.wait(PATIENCE_S)
    assert informer.errors == 4
    assert len(waits) == 4 and min(waits) >= 0.025  # it waited between attempts
    assert cache_state(informer) == server_state(sandbox)
    faults.fail_requests(code, method="GET", path=PLURAL, count=3)
    wait_for(lambda: faults.drop_watches(PLURAL) == 1, "the open watch")
    create(custom, "y")
    wait_for(lambda: informer.get("default", "y-pytorchjob") is not None, "recovery")
    assert informer.errors == 7


def test_stop_ends_the_open_watch(custom, started):
    informer = started(watch_timeout=10 * PATIENCE_S)
    assert informer.synced.wait(PATIENCE_S)
    create(custom, "x")
    wait_for(lambda: informer.get("default", "x-pytorchjob") is not None, "the watch")
    informer.stop(timeout=PATIENCE_S)  # a tenth of the watch's own timeout: the stop cut it
    assert informer._thread is not None and not informer._thread.is_alive()
    assert not [t for t in threading.enumerate() if t.name == "informer-" + informer.resource.key]


def test_a_kind_the_server_does_not_serve_breaks_nothing(api_client, custom, caplog):
    widgets = Resource("example.com", ("v2", "v1"), "widgets", "Widget", True)
    informers = Informers(api_client, [widgets, RESOURCE_BINDINGS], seed=1, **FAST)
    informers.start()
    try:
        assert informers.wait_synced(PATIENCE_S)
        assert informers[widgets.key].served is False
        assert informers[widgets.key].snapshot_items() == {}
        create(custom, "x")
        informer = informers[RESOURCE_BINDINGS.key]
        wait_for(lambda: informer.get("default", "x-pytorchjob") is not None, "the bindings")
    finally:
        informers.stop(timeout=2)
    warnings = [r for r in caplog.records if "not served" in r.getMessage()]
    assert len(warnings) == 1


def test_snapshot_from_the_caches_equals_one_from_a_direct_list(sandbox, api_client, custom):
    store = sandbox.store
    store.create("clusters.cluster.karmada.io", cluster("east", region="us-east"))
    store.create(
        "priorityclasses.scheduling.k8s.io",
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass"}
        | {"metadata": {"name": "high"}, "value": 1000},
    )
    store.create("pytorchjobs.kubeflow.org", pytorchjob("train", gpus=4))
    informers = Informers(api_client, seed=3, **FAST)
    informers.start()
    try:
        assert informers.wait_synced(PATIENCE_S)
        create(custom, "train")
        wait_for(
            lambda: informers[RESOURCE_BINDINGS.key].get("default", "train-pytorchjob"),
            "the binding",
        )
        from_caches = build_snapshot(informers.snapshot_objects())
    finally:
        informers.stop(timeout=3)
    direct = [
        (source_of(r), obj)
        for r in default_resources()
        for obj in store.list(r.key, version=r.versions[0])["items"]
    ]
    expected = build_snapshot(direct)
    assert from_caches == expected
    assert [c.name for c in from_caches.clusters] == ["east"]
    assert len(from_caches.bindings) == 1 and len(from_caches.workloads) == 1


def test_namespace_labels_come_from_the_watch_of_namespaces(sandbox, api_client, started):
    """What the webhook under ``serve`` matches a queue's namespaceSelector on: the watched
    Namespace's labels (with the name label), None for a namespace not seen yet."""
    core = CoreV1Api(api_client)
    core.create_namespace({"metadata": {"name": "ml", "labels": {"tenant": "llm"}}})
    informer = started(NAMESPACES)
    assert informer.synced.wait(PATIENCE_S)
    name_label = {"kubernetes.io/metadata.name": "ml"}
    assert namespace_labels(informer, "ml") == {"tenant": "llm", **name_label}
    assert namespace_labels(informer, "nowhere") is None
    core.patch_namespace("ml", {"metadata": {"labels": {"tenant": "vision"}}})
    relabelled = {"tenant": "vision", **name_label}
    wait_for(lambda: namespace_labels(informer, "ml") == relabelled, "the new labels")


def test_a_server_restarted_with_its_state_reset_is_relisted(sandbox, custom, started):
    """The API server comes back empty, its resourceVersions below the informer's: the watch
    from the old one stays silent (no event is newer), so the informer checks its resume point
    (a list not older than it: 504 ResourceVersionTooLarge) and relists."""
    for i in range(30):
        create(custom, f"old{i}")
    informer = started(watch_timeout=1)
    changes = record(informer)
    assert informer.synced.wait(PATIENCE_S)
    changes.clear()  # the first list's
    sandbox.restart(Store(freshness_timeout=0.05))
    for i in range(3):  # resourceVersions 4 to 6, far below the informer's
        create(custom, f"new{i}")
    wait_for(lambda: cache_state(informer) == server_state(sandbox), "the restarted server's state")
    assert informer.lists == 2
    heard = {key[1]: version for _, key, version in changes}
    assert {name for name, version in heard.items() if version is None} == {
        f"old{i}-pytorchjob" for i in range(30)
    }
    assert {name for name, version in heard.items() if version is not None} == {
        f"new{i}-pytorchjob" for i in range(3)
    }
    create(custom, "later")  # and the watch from the new list's resourceVersion runs
    wait_for(lambda: informer.get("default", "later-pytorchjob") is not None, "the new watch")


def test_a_watch_answered_too_large_resource_version_relists(sandbox, custom, started):
    """A server may refuse the watch itself (kube-apiserver does for a watch-list request):
    504 with cause ResourceVersionTooLarge means relist, not back off and watch again."""
    create(custom, "x")
    refused: list[str] = []

    def refuse_first_watch(method: str, path: str, query: dict[str, str]) -> None:
        if query.get("watch") == "true" and path.endswith(PLURAL) and not refused:
            refused.append(query.get("resourceVersion", ""))
            raise too_large_resource_version(int(refused[0] or 0) + 5, int(refused[0] or 0))

    sandbox.request_hooks.insert(0, refuse_first_watch)
    informer = started()
    assert informer.synced.wait(PATIENCE_S)
    wait_for(lambda: informer.lists == 2, "the relist")
    assert informer.errors == 0
    create(custom, "y")
    wait_for(lambda: informer.get("default", "y-pytorchjob") is not None, "the watch")
