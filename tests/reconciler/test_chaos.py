"""The chaos run (``make chaos``; a smaller one in ``make test``): two ``fleetgate serve``
replicas with leader election, a burst of one-GPU jobs, and the leader SIGSTOPped and SIGKILLed
mid-burst, in turn. The world of the kill test (``tests/reconciler/test_kill.py``): the sandbox
60 times real time, fleetgate's webhook, Karmada's simulated controllers; jobs run their 30 s
and finish.

A SIGSTOP comes the moment the leader has just written a binding (its write threads busy), and
lasts until the other replica holds the Lease and has written a binding itself; then SIGCONT.
A SIGKILL comes the same way, and the killed replica is restarted as the next follower.
Afterwards, from the sandbox's record of writes and the store's history:

- no binding write came from a replica that did not hold the Lease at that moment (the lease
  terms rebuilt from the Lease writes, in commit order): the woken replica's writes are fenced
  (``reconciler.fence``);
- every job was admitted exactly once and ran to success;
- the reconciler's writes per binding: median at most 5.

The summary line (printed with ``-s``) is what docs/reconciler.md quotes. ``CHAOS_JOBS``,
``CHAOS_STOPS``, ``CHAOS_KILLS`` set the size (``make chaos``: 1000, 6, 6).
"""

from __future__ import annotations

import os
import re
import signal
import statistics
import time
from pathlib import Path

from sandbox.writelog import LEASES
from tests.reconciler.conftest import time_limit
from tests.reconciler.killjobs import RECONCILER, binding_name, small_job
from tests.reconciler.test_kill import (
    KUBEFLOW,
    RB_KEY,
    Submitter,
    World,
    lease_terms_violations,
    replicas,
    start_replica,
    wait_for,
    world,
)

__all__ = ["world"]  # the fixture, used by name

JOBS = int(os.environ.get("CHAOS_JOBS", "150"))
STOPS = int(os.environ.get("CHAOS_STOPS", "2"))
KILLS = int(os.environ.get("CHAOS_KILLS", "1"))
FENCED = re.compile(r"past the lease deadline")
BURST = 40  # jobs submitted at once right before each signal


def holder(world: World) -> str:
    leases = world.writes.entries(LEASES)
    return leases[-1].holder or "" if leases else ""


def wrote_binding(world: World, identity: str, since: int, among: set[str] | None = None) -> bool:
    return any(
        w.user == RECONCILER + identity and (among is None or w.name in among)
        for w in world.writes.entries(RB_KEY, since=since)
    )


def test_sigstop_and_sigkill_of_the_leader_mid_burst(world: World, tmp_path: Path):
    began = time.monotonic()
    events = ["stop"] * STOPS + ["kill"] * KILLS
    events = [e for pair in zip(events[::2], events[1::2], strict=False) for e in pair] + (
        events[-1:] if len(events) % 2 else []
    )  # stop, kill, stop, …
    points = [JOBS * (i + 1) / (len(events) + 1) for i in range(len(events))]
    logs = tmp_path / "replicas"
    logs.mkdir()
    stopped = killed = 0
    bursts: set[str] = set()
    with time_limit(600), replicas() as started:
        by_name = {}
        for name in ("chaos-a", "chaos-b"):
            by_name[name] = start_replica(world, started, name, logs / f"{name}.log")
        wait_for(lambda: holder(world) in by_name, 120, "a leader")  # two starts
        submitter = Submitter(world, JOBS, "chaos")
        submitter.start()
        restarts = 0
        try:
            for event, point in zip(events, points, strict=True):
                wait_for(lambda p=point: world.seen.done() >= p, 300, f"{point:.0f} jobs done")
                # a live replica leads (after a SIGKILL the Lease names the dead one until the
                # follower takes over)
                wait_for(lambda: holder(world) in by_name, 60, "a live leader")
                leader_name = holder(world)
                leader = by_name[leader_name]
                since = world.writes.last_seq
                # a burst the leader is writing when the signal comes: its write threads busy
                for j in range(BURST):
                    name = f"burst-{len(bursts):02d}-{j:02d}"
                    world.custom.create_namespaced_custom_object(*KUBEFLOW, small_job(name))
                burst = {binding_name(f"burst-{len(bursts):02d}-{j:02d}") for j in range(BURST)}
                bursts |= burst
                wait_for(  # a guard, not a measure: generous for a CI machine's busiest minute
                    lambda n=leader_name, s=since, b=burst: wrote_binding(world, n, s, b),
                    180,
                    "the leader writes the burst",
                )
                if event == "stop":
                    leader.process.send_signal(signal.SIGSTOP)
                    stopped += 1
                    other = next(n for n in by_name if n != leader_name)
                    since = world.writes.last_seq
                    wait_for(lambda o=other: holder(world) == o, 60, f"{other} takes over")
                    wait_for(
                        lambda o=other, s=since: wrote_binding(world, o, s), 60, f"{other} writes"
                    )
                    leader.process.send_signal(signal.SIGCONT)
                else:
                    leader.process.send_signal(signal.SIGKILL)
                    leader.wait(10)
                    killed += 1
                    restarts += 1
                    name = f"{leader_name}-{restarts}"
                    del by_name[leader_name]
                    by_name[name] = start_replica(world, started, name, logs / f"{name}.log")
            everything = {binding_name(n) for n in submitter.names} | bursts
            wait_for(
                lambda: submitter.submitted == JOBS and everything <= world.seen.finished,
                300,
                "every job finished",
            )
        finally:
            submitter.stopping.set()
            submitter.join(30)
        assert submitter.error is None, submitter.error
    wall = time.monotonic() - began

    names = [binding_name(n) for n in submitter.names] + sorted(bursts)
    violations, counts = lease_terms_violations(world)
    per_binding: dict[str, int] = {}
    for entry in world.writes.entries(RB_KEY):
        if entry.user.startswith(RECONCILER) and entry.name in per_binding | dict.fromkeys(names):
            per_binding[entry.name] = per_binding.get(entry.name, 0) + 1
    writes = [per_binding.get(n, 0) for n in names]
    fenced = sum(len(FENCED.findall(p.read_text(errors="replace"))) for p in logs.iterdir())
    histogram = {n: writes.count(n) for n in sorted(set(writes))}
    print(
        f"\nchaos: {JOBS} jobs, {stopped} SIGSTOPs and {killed} SIGKILLs of the leader in "
        f"{wall:.0f}s wall; binding writes by a replica not holding the Lease: "
        f"{len(violations)}; writes cut off by the fence: {fenced}; jobs admitted other than "
        f"once: {sum(world.seen.admitted.get(n) != 1 for n in names)}; writes per binding: "
        f"median {statistics.median(writes)}, max {max(writes)}, {histogram}; by replica: "
        f"{counts}"
    )
    assert (stopped, killed) == (STOPS, KILLS)
    assert world.writes.dropped == 0
    assert violations == []
    assert [n for n in names if world.seen.admitted.get(n) != 1] == []
    assert [n for n in names if n not in world.seen.finished] == []
    assert statistics.median(writes) <= 5
