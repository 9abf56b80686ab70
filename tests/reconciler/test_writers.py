"""A pass's writes on several threads (reconciler.writers): against the HTTPS sandbox, with
fleetgate's webhook and Karmada's controllers (the fixtures of test_loop), the real client.

Overlap is shown without timing: the sandbox holds binding PATCHes at a barrier that only
opens once several are in flight at once, which one-at-a-time writes never reach.
"""

# ruff: noqa: F811 (test_loop's fixtures, imported, are parameters here)
from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import kubernetes
import pytest

from engine import annotations as ann
from engine.policy.reload import PolicyHolder
from reconciler.apply import Applier
from reconciler.loop import Reconciler
from reconciler.settings import ReconcilerSettings
from reconciler.writers import WritePool, pool_size, widen_pool
from sandbox.faults import Faults
from sandbox.server import Sandbox
from tests.conftest import REPO
from tests.reconciler.conftest import time_limit
from tests.reconciler.test_loop import (  # noqa: F401 (fixtures)
    Clock,
    binding,
    caught_up,
    clock,
    custom,
    fleet_world,
    submit,
)

TEST_SECONDS = 60
JOBS = 6
WORKERS = 4
BINDINGS = "/resourcebindings/"


@pytest.fixture(autouse=True)
def bounded() -> Iterator[None]:
    with time_limit(TEST_SECONDS):
        yield


def reconciler_with(
    api_client: kubernetes.client.ApiClient,
    clock: Clock,
    write_workers: int,
    gate: Callable[[], bool] | None = None,
) -> Reconciler:
    holder = PolicyHolder.for_paths([REPO / "policies"])
    assert holder.reload(), holder.status.errors
    settings = ReconcilerSettings(request_timeout=10, write_workers=write_workers)
    rec = Reconciler(api_client, holder, settings, clock=clock, gate=gate)
    rec.start(loop=False)
    assert rec.wait_synced(15)
    return rec


def record_writes(applier: Applier) -> list[tuple[str, str, int]]:
    """(binding ref, patch/status/event, thread id) of each write the Applier sends."""
    seen: list[tuple[str, str, int]] = []
    patch, event = applier._patch, applier._event

    def _patch(obj: Any, body: Any, status: bool) -> Any:
        seen.append((_ref(obj), "status" if status else "patch", threading.get_ident()))
        return patch(obj, body, status)

    def _event(obj: Any, writes: Any, now: Any) -> None:
        seen.append((_ref(obj), "event", threading.get_ident()))
        event(obj, writes, now)

    applier._patch = _patch  # type: ignore[method-assign]
    applier._event = _event  # type: ignore[method-assign]
    return seen


def _ref(obj: Any) -> str:
    meta = obj["metadata"]
    return f"{meta['namespace']}/{meta['name']}"


def held_until_overlap(sandbox: Sandbox, parties: int) -> threading.Barrier:
    """Spec PATCHes of bindings wait (in the server) until ``parties`` of them are in flight."""
    barrier = threading.Barrier(parties, timeout=15)
    faults = Faults(seed=1, sleep=lambda _seconds: barrier.wait())
    faults.attach(sandbox)
    faults.delay_requests(0.001, method="PATCH", path=BINDINGS + r"[^/]+$", count=parties)
    return barrier


def submitted(custom: Any, fleet_world: Any, rec: Reconciler) -> list[str]:
    names = [f"job-{i}" for i in range(JOBS)]
    for name in names:
        submit(custom, name, workers=2)
    fleet_world.run_once()
    caught_up(rec, custom)
    return [f"research/{name}-pytorchjob" for name in names]


def test_writes_overlap_each_in_order_and_all_land(
    sandbox: Sandbox, api_client, custom, fleet_world, clock: Clock
):
    rec = reconciler_with(api_client, clock, write_workers=WORKERS)
    try:
        refs = submitted(custom, fleet_world, rec)
        barrier = held_until_overlap(sandbox, parties=3)
        seen = record_writes(rec.applier)
        summary = rec.run_once()
    finally:
        rec.stop()
    assert not barrier.broken  # three spec PATCHes were in the server at once
    assert (summary.applied, summary.conflicts, summary.errors) == (JOBS, 0, 0), summary
    assert sorted(ref for ref, _ in summary.applied_to) == sorted(refs)
    for ref in refs:  # one thread per binding, its writes in order: spec, status, Event
        steps = [(what, thread) for r, what, thread in seen if r == ref]
        order = [what for what, _ in steps]
        assert order[0] == "patch" and order[-1] == "event", (ref, order)
        assert order == sorted(order, key=["patch", "status", "event"].index), (ref, order)
        assert len({thread for _, thread in steps}) == 1, (ref, steps)
    for ref in refs:  # each decided on the server: admitted, or pending with its reason
        written = binding(custom, ref.split("/")[1].removesuffix("-pytorchjob"))
        notes = written["metadata"]["annotations"]
        assert written["spec"].get("clusters") or ann.PENDING in notes, written
    assert rec.last is summary


def test_a_conflict_among_concurrent_writes_marks_only_its_binding_dirty(
    sandbox: Sandbox, api_client, custom, fleet_world, clock: Clock
):
    rec = reconciler_with(api_client, clock, write_workers=WORKERS)
    try:
        refs = submitted(custom, fleet_world, rec)
        faults = Faults(seed=1).attach(sandbox)
        faults.fail_requests(409, method="PATCH", path=BINDINGS + "job-2-pytorchjob$", count=1)
        summary = rec.run_once()
        assert (summary.applied, summary.conflicts, summary.errors) == (JOBS - 1, 1, 0), summary
        assert set(rec.dirty) == {"research/job-2-pytorchjob"}
        assert sorted(r for r, _ in summary.applied_to) == sorted(set(refs) - set(rec.dirty))
        caught_up(rec, custom)
        again = rec.run_once()  # a fresh read shows it unchanged: decided and written now
        assert (again.applied, again.conflicts) == (1, 0), again
        assert not rec.dirty
    finally:
        rec.stop()


def test_losing_the_lease_mid_pass_stops_every_later_write(
    sandbox: Sandbox, api_client, custom, fleet_world, clock: Clock
):
    leading = threading.Event()
    leading.set()
    rec = reconciler_with(api_client, clock, write_workers=WORKERS, gate=leading.is_set)
    try:
        submitted(custom, fleet_world, rec)
        requests: list[str] = []

        def lose_lease(method: str, path: str, _query: dict[str, str]) -> None:
            if method in ("PATCH", "POST") and (BINDINGS in path or "/events" in path):
                requests.append(f"{method} {path}")
                leading.clear()  # the first write the server sees: the lease is gone

        sandbox.request_hooks.insert(0, lose_lease)
        summary = rec.run_once()
    finally:
        rec.stop()
    # only spec patches that passed the gate before the first one reached the server went
    # out: no status, no Event, nothing written after
    assert requests, "no write was sent at all"
    assert all(r.startswith("PATCH") and not r.endswith("/status") for r in requests), requests
    assert len(requests) <= WORKERS, requests
    # a binding whose spec patch went out counts as applied (a pending reason: its Event is
    # best-effort) or failed (an admission whose status was not sent); the rest were skipped
    assert summary.applied + summary.errors == len(requests), (summary, requests)
    assert summary.skipped == JOBS - len(requests) >= JOBS - WORKERS, summary


def test_the_pool_runs_tasks_at_once_and_returns_results_in_order():
    pool = WritePool(3)
    barrier = threading.Barrier(3, timeout=15)

    def task(i: int) -> int:
        if i < 3:
            barrier.wait()  # the first three only end once all three run at once
        return i * i

    try:
        assert pool.run([lambda i=i: task(i) for i in range(7)]) == [i * i for i in range(7)]
    finally:
        pool.close()


def test_the_pool_ends_every_task_before_raising_the_first_error():
    pool = WritePool(2)
    ended: list[int] = []

    def task(i: int) -> int:
        if i == 1:
            raise KeyError("a bug")
        ended.append(i)
        return i

    try:
        with pytest.raises(KeyError):
            pool.run([lambda i=i: task(i) for i in range(6)])
    finally:
        pool.close()
    assert sorted(ended) == [0, 2, 3, 4, 5]
    with pytest.raises(ValueError, match="write workers"):
        WritePool(0)


def test_the_client_keeps_a_connection_per_writer_and_watch(api_client):
    widen_pool(api_client, pool_size(12, 10))
    assert api_client.configuration.connection_pool_maxsize == 26
    assert api_client.rest_client.pool_manager.connection_pool_kw["maxsize"] == 26


def test_serve_takes_the_number_of_write_workers():
    import argparse

    from reconciler.cli import add_parser

    parser = argparse.ArgumentParser(prog="fleetgate", exit_on_error=False)
    add_parser(parser.add_subparsers(dest="command"))
    base = ["serve", "--kubeconfig", "k", "--policies", "p"]
    assert parser.parse_args(base).write_workers == 16
    assert parser.parse_args([*base, "--write-workers", "12"]).write_workers == 12
    with pytest.raises(SystemExit):
        parser.parse_args([*base, "--write-workers", "0"])
