"""The simulator's fast Cluster reads equal the full path the reconciler's snapshot takes
(``read_cluster`` of the status ``engine.members`` reports), whatever the members hold."""

from __future__ import annotations

import dataclasses
import datetime as dt
from pathlib import Path

from engine.cycle import Baseline, run_cycle
from engine.fleet.clusters import read_cluster
from engine.members import Fleet, FleetSpec, JobSpec, PodGroup, cluster_object, load_fleet
from engine.resources import Resources
from simulate.loop import Options, Simulation
from simulate.objects import ClusterReader
from simulate.trace import read_trace

REPO = Path(__file__).resolve().parents[2]
T0 = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)
GI = 2**30


def _same(reader: ClusterReader, fleet: Fleet, name: str, now: dt.datetime) -> None:
    fast = reader.view()
    full = read_cluster(cluster_object(fleet[name], now))
    # the full path stamps the Ready condition with ``now`` the first time it sees it
    assert dataclasses.replace(fast, ready_changed_at=None) == dataclasses.replace(
        full, ready_changed_at=None
    )


def test_fast_views_match_the_status_controller() -> None:
    fleet = Fleet(load_fleet(REPO / "examples/fleet.yaml"), T0)
    readers = {m.name: ClusterReader(m, T0) for m in fleet}
    gpu = {"cpu": 16, "memory": 128 * GI, "nvidia.com/gpu": 4}
    jobs = [
        ("gpu-east", JobSpec("a", (PodGroup("w", 3, Resources(gpu)),), dt.timedelta(hours=1))),
        ("gpu-east", JobSpec("b", (PodGroup("w", 6, Resources(gpu)),), dt.timedelta(hours=2))),
        ("gpu-west", JobSpec("c", (PodGroup("w", 1, Resources(gpu)),), dt.timedelta(hours=1))),
    ]
    for name in readers:
        _same(readers[name], fleet, name, T0)
    for cluster, job in jobs:
        fleet[cluster].submit(job, T0)
    fleet.step(T0)  # a and c bind and start; b waits for room (allocating)
    for name in readers:
        _same(readers[name], fleet, name, T0)
    assert readers["gpu-east"].last.allocating  # b's pods are counted as allocating
    later = T0 + dt.timedelta(hours=1)
    fleet.step(later)  # a and c end; b binds
    for name in readers:
        _same(readers[name], fleet, name, later)
    fleet["gpu-west"].set_ready(False, later)
    down = readers["gpu-west"].view()
    assert not down.ready and down.allocated == readers["gpu-west"].last.allocated


def test_every_cycle_reads_the_clusters_the_full_path_reads(
    policies, trace_file, simulate, cluster
) -> None:  # type: ignore[no-untyped-def]
    # two 6-GPU pods leave alpha's two nodes 2 GPUs each; 4-GPU pods then fit alpha's totals,
    # not its nodes: the baseline sends them there, where they wait for a node (allocating)
    rows: list[dict[str, object]] = [
        {"name": f"big{i}", "submit": 0, "queue": "a", "tenant": "t", "duration": 5000,
         "replicas": 1, "pod_gpus": 6} for i in range(2)
    ]  # fmt: skip
    rows += [
        {"name": f"j{i}", "submit": 30 + 7 * i, "queue": "a", "tenant": "t",
         "duration": 300 + 40 * i, "replicas": 1, "pod_gpus": (4, 2, 1)[i % 3]}
        for i in range(30)
    ]  # fmt: skip
    checked = []

    def checking(inner):  # type: ignore[no-untyped-def]
        def decide(snapshot, policy_set, now, cache):  # type: ignore[no-untyped-def]
            for view in snapshot.clusters:
                member = sim_ref[0].members[view.name]
                full = read_cluster(cluster_object(member, now))
                assert dataclasses.replace(view, ready_changed_at=None) == dataclasses.replace(
                    full, ready_changed_at=None
                ), (view.name, now)
                checked.append(view.allocating)
            return inner(snapshot, policy_set, now, cache)

        return decide

    for inner in (run_cycle, Baseline()):  # the baseline leaves pods waiting for nodes
        sim_ref: list[Simulation] = []
        sim = Simulation(
            policies({"a": 1}), FleetSpec((cluster("alpha", 2), cluster("beta", 1, gpus=4))),
            read_trace(trace_file(rows)), Options(interval=10), checking(inner),
        )  # fmt: skip
        sim_ref.append(sim)
        sim.run()
        assert all(v == 0 for v in sim.unstarted.values())
    assert len(checked) > 50 and any(checked)  # some cycles saw pods waiting for nodes
