"""Leader election on a Lease through the sandbox and the real ``kubernetes`` client.

Each replica is a :class:`LeaderElector` on its own fake monotonic clock; the tests call
``try_acquire_or_renew`` themselves (no election thread), so every step is deterministic. The
sandbox's own record of writes (``sandbox.writelog``) says who wrote what.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import kubernetes
import pytest

from engine.policy.reload import PolicyHolder
from reconciler.apply import NotLeader
from reconciler.leader import LeaderElectionError, LeaderElector, LeaseConfig
from reconciler.loop import Reconciler
from reconciler.settings import ReconcilerSettings
from sandbox.faults import Faults
from sandbox.karmada import KarmadaControllers
from sandbox.server import Sandbox
from sandbox.writelog import IN_PROCESS, WriteLog
from tests.conftest import REPO
from tests.reconciler.conftest import time_limit
from tests.reconciler.test_loop import (  # fixtures and helpers of the loop's end-to-end tests
    Clock,
    binding,
    caught_up,
    clock,
    custom,
    eventually,
    fleet_world,
    submit,
)

__all__ = ["clock", "custom", "fleet_world"]  # fixtures used by name

NS = "kube-system"
LEASE = "fleetgate-reconciler"
RB_KEY = "resourcebindings.work.karmada.io"


@pytest.fixture(autouse=True)
def bounded() -> Iterator[None]:
    with time_limit(60):
        yield


class Ticks:
    """A monotonic clock that moves only when told."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def elector(api: kubernetes.client.ApiClient, identity: str, ticks: Ticks) -> LeaderElector:
    config = LeaseConfig(LEASE, NS, identity, 15.0, 10.0, 2.0)
    return LeaderElector(api, config, clock=ticks)


def lease(api: kubernetes.client.ApiClient) -> dict:
    read = kubernetes.client.CoordinationV1Api(api).read_namespaced_lease(
        LEASE, NS, _preload_content=False
    )
    return json.loads(read.data)["spec"]


@pytest.fixture
def writes(sandbox: Sandbox) -> WriteLog:
    return WriteLog().attach(sandbox)


def test_the_first_replica_creates_the_lease_and_renews_it(api_client):
    a_clock, b_clock = Ticks(), Ticks()
    a, b = elector(api_client, "a", a_clock), elector(api_client, "b", b_clock)
    assert not a.is_leader()
    assert a.try_acquire_or_renew() and a.is_leader()
    first = lease(api_client)
    assert (first["holderIdentity"], first["leaseTransitions"]) == ("a", 0)
    assert first["leaseDurationSeconds"] == 15

    assert not b.try_acquire_or_renew() and not b.is_leader()  # held, not expired
    a_clock.advance(2)
    assert a.try_acquire_or_renew()
    renewed = lease(api_client)
    assert renewed["holderIdentity"] == "a"
    assert renewed["acquireTime"] == first["acquireTime"]
    assert renewed["renewTime"] != first["renewTime"]
    assert renewed["leaseTransitions"] == 0


def test_a_follower_takes_over_once_the_lease_expired_by_its_own_clock(api_client):
    a_clock, b_clock = Ticks(), Ticks()
    stopped: list[str] = []
    a, b = elector(api_client, "a", a_clock), elector(api_client, "b", b_clock)
    a.on_stopped = lambda: stopped.append("a")
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()  # b first sees the record now
    b_clock.advance(14.9)
    assert not b.try_acquire_or_renew()
    b_clock.advance(0.2)  # 15 s of b's clock with no change of the record
    assert b.try_acquire_or_renew() and b.is_leader()
    taken = lease(api_client)
    assert (taken["holderIdentity"], taken["leaseTransitions"]) == ("b", 1)
    # a's clock did not move: its own renew deadline has not passed, but its next attempt
    # reads another holder and stops it at once
    assert a.is_leader()
    assert not a.try_acquire_or_renew()
    assert not a.is_leader() and stopped == ["a"]


def test_a_renewal_resets_the_followers_wait(api_client):
    a_clock, b_clock = Ticks(), Ticks()
    a, b = elector(api_client, "a", a_clock), elector(api_client, "b", b_clock)
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()
    b_clock.advance(10)
    a_clock.advance(2)
    assert a.try_acquire_or_renew()  # renewTime changes: b sees a new record
    assert not b.try_acquire_or_renew()
    b_clock.advance(10)  # 20 s since b first looked, 10 s since it saw the renewal
    assert not b.try_acquire_or_renew()
    assert lease(api_client)["holderIdentity"] == "a"


def test_a_leader_that_cannot_renew_stops_writing_at_the_renew_deadline(
    sandbox: Sandbox, api_client
):
    ticks = Ticks()
    a = elector(api_client, "a", ticks)
    assert a.try_acquire_or_renew()
    faults = Faults(seed=1).attach(sandbox)
    faults.fail_requests(500, method="PUT|GET", path="/leases/")
    ticks.advance(4)
    assert not a.try_acquire_or_renew()
    assert a.is_leader()  # 4 s < the 10 s renew deadline
    ticks.advance(5.9)
    assert a.is_leader()
    ticks.advance(0.1)  # no attempt needed: the gate itself sees the deadline pass
    assert not a.is_leader()


def test_release_frees_the_lease_for_the_next_replica_at_once(api_client, writes: WriteLog):
    a_clock, b_clock = Ticks(), Ticks()
    a, b = elector(api_client, "a", a_clock), elector(api_client, "b", b_clock)
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()
    assert a.release() and not a.is_leader()
    assert not lease(api_client).get("holderIdentity")
    assert b.try_acquire_or_renew()  # no wait for the lease duration
    assert lease(api_client)["leaseTransitions"] == 1
    assert not a.release()  # not the leader any more: nothing to release
    holders = [w.holder for w in writes.entries("leases.coordination.k8s.io")]
    assert holders == ["a", "", "b"]


def test_inconsistent_settings_are_refused_with_the_setting_named():
    with pytest.raises(LeaderElectionError, match="renew deadline"):
        LeaseConfig(LEASE, NS, "a", lease_duration=10, renew_deadline=10)
    with pytest.raises(LeaderElectionError, match="retry period"):
        LeaseConfig(LEASE, NS, "a", renew_deadline=2, retry_period=2)
    with pytest.raises(LeaderElectionError, match="identity"):
        LeaseConfig(LEASE, NS, "")


# -- the gate: the reconciler writes only while it leads ------------------------------------


@pytest.fixture
def gated(
    api_client, sandbox: Sandbox, clock: Clock
) -> Iterator[tuple[Reconciler, LeaderElector, Ticks]]:
    """A reconciler gated by an elector (identity "a") that leads; its fake clock."""
    ticks = Ticks()
    leader = elector(api_client, "a", ticks)
    assert leader.try_acquire_or_renew()
    holder = PolicyHolder.for_paths([REPO / "policies"])
    assert holder.reload(), holder.status.errors
    rec = Reconciler(
        api_client,
        holder,
        ReconcilerSettings(request_timeout=10),
        clock=clock,
        gate=leader.is_leader,
    )
    try:
        rec.start(loop=False)
        assert rec.wait_synced(15)
        yield rec, leader, ticks
    finally:
        rec.stop()


def test_a_replica_past_its_renew_deadline_writes_nothing(
    custom, fleet_world: KarmadaControllers, gated, writes: WriteLog
):
    rec, leader, ticks = gated
    submit(custom, "first", workers=2)
    fleet_world.run_once()
    caught_up(rec, custom)
    ticks.advance(10)  # no renewal for the renew deadline
    writes.clear()
    summary = rec.run_once()
    assert (summary.applied, summary.errors) == (0, 0), summary
    assert summary.skipped >= 1
    assert [w for w in writes.entries(RB_KEY) if w.user != IN_PROCESS] == []
    assert not binding(custom, "first")["spec"].get("clusters")
    with pytest.raises(NotLeader, match="not the leader"):
        rec.applier._patch(binding(custom, "first"), {"metadata": {}}, status=False)

    assert leader.try_acquire_or_renew()  # leads again
    summary = rec.run_once()
    assert summary.applied == 1, summary
    assert binding(custom, "first")["spec"]["clusters"]


def test_a_follower_keeps_a_warm_cache_and_admits_as_soon_as_it_leads(
    api_client, custom, fleet_world: KarmadaControllers, clock: Clock, writes: WriteLog
):
    leader_ticks, follower_ticks = Ticks(), Ticks()
    leader = elector(api_client, "leader", leader_ticks)
    assert leader.try_acquire_or_renew()
    follower = elector(api_client, "follower", follower_ticks)
    holder = PolicyHolder.for_paths([REPO / "policies"])
    assert holder.reload()
    rec = Reconciler(
        api_client,
        holder,
        ReconcilerSettings(debounce=0.05),
        clock=clock,
        gate=follower.is_leader,
    )
    follower.on_started = rec.wake
    try:
        rec.start()
        assert rec.wait_synced(15)
        submit(custom, "first", workers=2)
        fleet_world.run_once()
        caught_up(rec, custom)  # the follower's cache holds the new binding
        assert rec.passes == 0  # and it ran no pass
        assert not follower.try_acquire_or_renew()
        follower_ticks.advance(15)  # the leader stopped renewing
        assert follower.try_acquire_or_renew()
        eventually(lambda: bool(binding(custom, "first")["spec"].get("clusters")))
        eventually(lambda: rec.passes >= 1)  # the pass that wrote it ends
    finally:
        rec.stop()
