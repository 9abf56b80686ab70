"""Placement by region and by the job's time in its queue: ``cluster.region`` (``spec.region``,
else the well-known topology label), ``job.queuedAt``, ``job.excludedClusters`` and
``job.excludedRegions`` in placement expressions, and ``spreadBy: Region``."""

from __future__ import annotations

import dataclasses
import datetime as dt
from pathlib import Path
from typing import Any

import pytest

from engine import annotations as ann
from engine.cycle import run_cycle
from engine.cycle.placement.division import divide
from engine.errors import PolicyLoadError
from engine.fleet.frozen import FrozenDict
from tests.cycle import builders
from tests.cycle.test_scenarios import decision_for, load_policies

NODE = {"nvidia.com/gpu": 8, "cpu": 64}
NOW = builders.NOW


def policies(tmp_path: Path, spec: dict[str, Any]):
    tmp_path.mkdir(parents=True, exist_ok=True)
    return load_policies(
        [
            {"kind": "Queue", "metadata": {"name": "q"}, "spec": {}},
            {"kind": "SchedulingPolicy", "metadata": {"name": "p"}, "spec": spec},
        ],
        tmp_path,
    )


def filtered(expression: str) -> dict[str, Any]:
    return {"placement": {"filters": [{"name": "f", "expression": expression}]}}


def decide(policy_set, clusters, jobs, annotations: dict[str, dict[str, str]] | None = None):
    """Decisions by job name; ``annotations``: job name → annotations added to its binding."""
    snapshot = builders.snapshot({"clusters": clusters, "jobs": jobs})
    extra = annotations or {}
    bindings = tuple(
        dataclasses.replace(b, annotations=FrozenDict({**b.annotations, **extra[name]}))
        if (name := b.resource.name) in extra
        else b
        for b in snapshot.bindings
    )
    result = run_cycle(dataclasses.replace(snapshot, bindings=bindings), policy_set, NOW)
    return {j["name"]: decision_for(result, j["name"]) for j in jobs}


def placed(decision) -> dict[str, int]:
    assert decision is not None and decision.action == "Admit", decision
    return {c.name: c.replicas for c in decision.clusters}


def gpu_job(name: str, pods: int = 1, kind: str = "PyTorchJob", at: int = 0) -> dict[str, Any]:
    return {"name": name, "kind": kind, "queue": "q", "pods": pods, "pod": NODE, "at": at}


def at(minutes_before_now: int) -> str:
    return ann.format_time(NOW - dt.timedelta(minutes=minutes_before_now))


# --- cluster.region ---------------------------------------------------------------------------


def test_cluster_region_falls_back_to_the_topology_label(tmp_path):
    clusters = [
        {"name": "a", "nodes": 2, "node": NODE, "region": "eu-west-1"},
        {"name": "b", "nodes": 2, "node": NODE, "labels": {"topology.kubernetes.io/region": "x"}},
        {"name": "c", "nodes": 2, "node": NODE, "region": "x", "used": 1},
    ]
    only_x = policies(tmp_path, filtered('cluster.region == "x"'))
    decision = decide(only_x, clusters, [gpu_job("j", pods=2)])["j"]
    assert placed(decision) == {"b": 2}
    assert dict(decision.cluster_reasons) == {}
    waiting = decide(only_x, clusters, [gpu_job("j", pods=3)])["j"]
    assert dict(waiting.cluster_reasons)["a"] == "filter f rejects it"


# --- job.queuedAt ----------------------------------------------------------------------------


def test_queued_at_is_the_bindings_queue_time_reset_by_a_requeue(tmp_path):
    """Created two hours ago, requeued ten minutes ago: a 30-minute wait counts from the
    requeue (``job.createdAt`` would let it into the cloud at once)."""
    clusters = [{"name": "cloud", "nodes": 2, "node": NODE}]
    wait = policies(tmp_path, filtered('now - job.queuedAt >= duration("30m")'))
    jobs = [gpu_job("old"), gpu_job("requeued")]
    requeued = {"requeued": {ann.QUEUED_AT: at(10)}}
    decided = decide(wait, clusters, jobs, requeued)
    assert placed(decided["old"]) == {"cloud": 1}
    assert decided["requeued"].action == "Pending"
    assert dict(decided["requeued"].cluster_reasons) == {"cloud": "filter f rejects it"}


def test_placement_reads_the_binding_fields_and_the_mapping_does_not(tmp_path):
    """The mapping (queue, priority, …) is kept per template generation, which a requeue
    does not change: only placement expressions see the binding's fields."""
    reads = "size(job.excludedClusters) + size(job.excludedRegions) == 0 && job.queuedAt < now"
    assert policies(tmp_path / "a", filtered(reads)).scheduling.placement.filters
    with pytest.raises(PolicyLoadError) as err:
        policies(tmp_path / "b", {"priority": "job.queuedAt > now ? 1 : 0"})
    assert "no field 'queuedAt' on job" in str(err.value)


# --- job.excludedClusters, job.excludedRegions ------------------------------------------------


def test_another_region_than_the_one_the_job_failed_in(tmp_path):
    clusters = [
        {"name": "east-1", "nodes": 2, "node": NODE, "region": "us-east-1", "used": 1},
        {"name": "east-2", "nodes": 2, "node": NODE, "region": "us-east-1"},
        {"name": "west", "nodes": 4, "node": NODE, "region": "us-west-2"},
    ]
    policy = filtered("!(cluster.region in job.excludedRegions)")
    jobs = [gpu_job("failed"), gpu_job("expired", at=1), gpu_job("fresh", at=2)]
    notes = {
        "failed": {ann.EXCLUDED_CLUSTERS: f"east-1={at(-30)}"},
        "expired": {ann.EXCLUDED_CLUSTERS: f"east-1={at(5)}"},  # ended five minutes ago
    }
    decided = decide(policies(tmp_path, policy), clusters, jobs, notes)
    failed = decided["failed"]
    assert placed(failed) == {"west": 1}  # not east-2: same region as the failed east-1
    assert placed(decided["expired"]) == {"east-1": 1}  # BinPack: the fullest
    assert placed(decided["fresh"]) == {"east-2": 1}  # east-2 and west equally full: by name


def test_excluded_clusters_lists_the_exclusions_in_force(tmp_path):
    clusters = [{"name": n, "nodes": 2, "node": NODE} for n in ("a", "b", "c")]
    policy = filtered('job.excludedClusters == ["a", "c"] ? cluster.name == "b" : false')
    notes = {"j": {ann.EXCLUDED_CLUSTERS: f"c={at(-9)},a={at(-9)},b={at(1)},bad"}}
    assert placed(decide(policies(tmp_path, policy), clusters, [gpu_job("j")], notes)["j"]) == {
        "b": 1
    }


# --- spreadBy: Region --------------------------------------------------------------------------


def regional(name: str, region: str, nodes: int, used: int = 0) -> dict[str, Any]:
    return {"name": name, "nodes": nodes, "used": used, "node": NODE, "region": region}


def test_spread_by_region_divides_a_job_one_cluster_could_hold(tmp_path):
    """8 pods; us-east-1 has room for 12 (east-a 8, east-b 4), us-west-2 for 4: 6 and 2. The
    region's share fills its best cluster first (Spread: the emptiest), not both."""
    clusters = [
        regional("east-a", "us-east-1", 8),
        regional("east-b", "us-east-1", 4),
        regional("west", "us-west-2", 4),
    ]
    by_region = {"placement": {"strategy": "Spread", "spreadBy": "Region"}}
    decided = decide(policies(tmp_path / "r", by_region), clusters, [gpu_job("s", 8, "Job")])
    assert placed(decided["s"]) == {"east-a": 6, "west": 2}
    by_cluster = {"placement": {"strategy": "Spread"}}
    decided = decide(policies(tmp_path / "c", by_cluster), clusters, [gpu_job("s", 8, "Job")])
    assert placed(decided["s"]) == {"east-a": 8}  # fits one cluster: not divided


def test_spread_by_region_leaves_a_gang_whole(tmp_path):
    clusters = [regional("east", "us-east-1", 4), regional("west", "us-west-2", 4)]
    by_region = {"placement": {"strategy": "Spread", "spreadBy": "Region"}}
    decided = decide(policies(tmp_path, by_region), clusters, [gpu_job("g", 2)])
    assert placed(decided["g"]) == {"east": 2}


def test_spread_by_region_in_one_region_is_not_divided(tmp_path):
    clusters = [regional("a", "us-east-1", 4), regional("b", "us-east-1", 4, used=1)]
    by_region = {"placement": {"strategy": "Spread", "spreadBy": "Region"}}
    decision = decide(policies(tmp_path, by_region), clusters, [gpu_job("s", 3, "Job")])["s"]
    assert placed(decision) == {"a": 3}
    assert decision.message == "admitted to a"


def test_spread_by_needs_the_spread_strategy(tmp_path):
    with pytest.raises(PolicyLoadError) as err:
        policies(tmp_path, {"placement": {"spreadBy": "Region"}})
    assert "spec.placement.spreadBy: spreadBy needs strategy: Spread" in str(err.value)


def test_division_by_region_counts_a_cluster_without_a_region_as_its_own():
    order = ["a", "b", "c", "d"]  # best first
    room = {"a": 4, "b": 4, "c": 4, "d": 4}
    regions = {"a": "r1", "b": "r1", "c": "", "d": ""}
    # r1 has room 8 of 16: 5 of 10 pods, on a first; c and d are regions of one: 2 each; the
    # one left over by rounding goes to the best cluster with room
    assert divide(order, room, 10, True, regions.__getitem__) == {"a": 4, "b": 2, "c": 2, "d": 2}
    assert divide(order, room, 10, True) == {"a": 4, "b": 2, "c": 2, "d": 2}
    assert divide(order, room, 10, False) == {"a": 4, "b": 4, "c": 2}
