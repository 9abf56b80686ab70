"""The API server restarts with its state reset, under a running reconciler: its informers
(every kind it watches, through the real ``kubernetes`` client over HTTPS) drop what no longer
exists and see what was created after the restart, though every new resourceVersion is below
the ones they held (issue 29, item 7)."""

from __future__ import annotations

from collections.abc import Iterator

import kubernetes
import pytest

from engine.policy.reload import PolicyHolder
from reconciler.informer import Key, key_of
from reconciler.informers import Informers
from reconciler.loop import Reconciler
from reconciler.resources import RESOURCE_BINDINGS
from reconciler.settings import ReconcilerSettings
from sandbox.server import Sandbox
from sandbox.store import Store
from tests.conftest import REPO
from tests.reconciler.conftest import time_limit
from tests.reconciler.test_loop import eventually
from tests.sandbox.builders import binding, pytorchjob

PATIENCE_S = 60.0  # a bound against a hang, not a measure
FAST = {"backoff_base": 0.05, "backoff_max": 0.5, "watch_timeout": 1}


@pytest.fixture(autouse=True)
def bounded() -> Iterator[None]:
    with time_limit(60):
        yield


@pytest.fixture
def rec(api_client: kubernetes.client.ApiClient) -> Iterator[Reconciler]:
    holder = PolicyHolder.for_paths([REPO / "policies"])
    assert holder.reload(), holder.status.errors
    informers = Informers(api_client, seed=5, **FAST)
    reconciler = Reconciler(
        api_client, holder, ReconcilerSettings(request_timeout=10), informers=informers
    )
    reconciler.start(loop=False)
    try:
        assert reconciler.wait_synced(PATIENCE_S)
        yield reconciler
    finally:
        reconciler.stop()


def submit(sandbox: Sandbox, name: str) -> None:
    """A PyTorchJob and its ResourceBinding (no webhook, no Karmada: written as they are)."""
    sandbox.store.create("pytorchjobs.kubeflow.org", pytorchjob(name))
    sandbox.store.create(RESOURCE_BINDINGS.key, binding(name))


def seen_by_a_pass(rec: Reconciler) -> tuple[list[str], list[str]]:
    """(bindings, workloads) the snapshot of a new pass holds."""
    rec.run_once()
    snapshot = rec.last_snapshot
    assert snapshot is not None
    return (
        sorted(b.ref for b in snapshot.bindings),
        sorted(f"{key[-2]}/{key[-1]}" for key in snapshot.workloads),  # (…, namespace, name)
    )


def caches(rec: Reconciler) -> dict[str, set[Key]]:
    return {k: set(i.snapshot_items()) for k, i in rec.informers.informers.items() if i.served}


def served(sandbox: Sandbox, rec: Reconciler) -> dict[str, set[Key]]:
    return {
        k: {key_of(o) for o in sandbox.store.list(k)["items"]}
        for k, i in rec.informers.informers.items()
        if i.served
    }


def test_a_reset_api_server_is_relisted_by_every_informer(sandbox: Sandbox, rec: Reconciler):
    bindings = rec.informers[RESOURCE_BINDINGS.key]
    for i in range(30):
        submit(sandbox, f"old{i:02d}")
    eventually(lambda: len(bindings.snapshot_items()) == 30, PATIENCE_S)  # the 30 jobs
    held = bindings.resource_version
    assert seen_by_a_pass(rec)[0] == [
        f"ResourceBinding/default/old{i:02d}-pytorchjob" for i in range(30)
    ]

    sandbox.restart(Store(freshness_timeout=0.05))
    for name in ("new-a", "new-b"):
        submit(sandbox, name)
    assert sandbox.store.resource_version < int(held)  # the counter starts again below

    expected = (
        ["ResourceBinding/default/new-a-pytorchjob", "ResourceBinding/default/new-b-pytorchjob"],
        ["default/new-a", "default/new-b"],
    )
    # the restarted server's jobs alone
    eventually(lambda: seen_by_a_pass(rec) == expected, PATIENCE_S)
    assert bindings.lists == 2
    # every cache holds what the restarted server holds: an informer whose resume point the
    # new counter had already reached (an empty kind, listed before the 30 jobs) watches on
    eventually(lambda: caches(rec) == served(sandbox, rec), PATIENCE_S)
    submit(sandbox, "later")  # and watches again from the new list
    eventually(lambda: bindings.get("default", "later-pytorchjob") is not None, PATIENCE_S)
