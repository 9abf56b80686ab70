"""Measure memoised CEL evaluation (MemoEvaluator) for the shipped placement rules.

    .venv/bin/python benchmarks/cel_memo.py [--calls N] [--jobs J --clusters C]

Prints microseconds per projection ``key()``, per cache hit (``evaluate`` and ``evaluate_key``)
and per miss, for the filters and for filters + scores of policies/scheduling.yaml, then one
simulated cycle: J jobs × C clusters, with values shaped as ``engine.cycle.JobValues`` gives them
them, three ways (see ``cycle``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from engine.policy import cel
from engine.policy.celcheck import DYN
from engine.policy.memo import MemoEvaluator

POLICY = Path(__file__).resolve().parent.parent / "policies" / "scheduling.yaml"
GPU_MODEL = "gpu.fleetgate.io/model"


def job(n: int) -> dict[str, Any]:
    """A job like ``JobValues`` gives; read-parts vary over 3 models × 2 sizes × 2 queues."""
    gpus = 32.0 if n % 2 else 8.0
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "namespace": f"team-{n % 40}",
        "name": f"train-{n}",
        "uid": f"uid-{n}",
        "labels": {GPU_MODEL: ("h100", "a100", "l4")[n % 3], "team": f"t{n % 40}", "run": str(n)},
        "annotations": {"note": f"job {n}"},
        "queue": "prod-inference" if n % 5 == 0 else "research",
        "specQueue": "",
        "tenant": "research",
        "priority": 100,
        "priorityClassName": "high",
        "components": [
            {"name": "master", "replicas": 1, "requests": {"cpu": 4.0, "nvidia.com/gpu": 8.0}},
            {"name": "worker", "replicas": 3, "requests": {"cpu": 4.0, "nvidia.com/gpu": 8.0}},
        ],
        "total": {"cpu": 16.0, "memory": 2.0**36, "nvidia.com/gpu": gpus, "pods": 4.0},
        "minMember": 4,
        "resizable": False,
        "createdAt": dt.datetime(2026, 11, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=n),
        "object": {"spec": {"runPolicy": {"suspend": True}}},
    }


def cluster(n: int) -> dict[str, Any]:
    return {
        "name": f"cluster-{n}",
        "labels": {
            GPU_MODEL: ("h100", "a100")[n % 2],
            "topology.kubernetes.io/region": f"region-{n % 7}",
            **({"fleetgate.io/capacity-type": "spot"} if n % 4 == 0 else {}),
        },
        "provider": "aws",
        "region": f"region-{n % 7}",
        "zones": ["a", "b"],
        "allocatable": {"cpu": 1024.0, "memory": 2.0**43, "nvidia.com/gpu": 64.0},
        "free": {"cpu": 512.0, "memory": 2.0**42, "nvidia.com/gpu": 48.0},
        "ready": True,
        "taints": [],
    }


def programs(section: str) -> list[cel.CelProgram]:
    placement = yaml.safe_load(POLICY.read_text())["spec"]["placement"]
    compiled = []
    for rule in placement[section]:
        program = cel.compile_expression(rule["expression"], cel.PLACEMENT_VARS, DYN)
        assert isinstance(program, cel.CelProgram), program
        compiled.append(program)
    return compiled


def per_call(fn: Callable[[], Any], calls: int, rounds: int = 5) -> float:
    """Median over rounds of the mean microseconds per call."""
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        samples.append((time.perf_counter() - start) / calls * 1e6)
    return round(statistics.median(samples), 2)


def measure(group: list[cel.CelProgram], calls: int) -> dict[str, Any]:
    values = {"job": job(1), "cluster": cluster(1)}
    memo = MemoEvaluator(group, cel.PLACEMENT_VARS)
    key = memo.key(values)
    memo.evaluate(values)
    fresh = [MemoEvaluator(group, cel.PLACEMENT_VARS) for _ in range(50)]
    return {
        "programs": len(group),
        "paths": len(memo.projector.paths),
        "us_per_key": per_call(lambda: memo.key(values), calls),
        "us_per_hit_evaluate": per_call(lambda: memo.evaluate(values), calls),
        "us_per_hit_evaluate_key": per_call(lambda: memo.evaluate_key(key, values), calls),
        "us_per_miss": per_call(lambda: fresh.pop().evaluate(values), 1, rounds=50),
        "us_per_direct_evaluation_of_all": per_call(
            lambda: [p.evaluate(cel.activation(cel.PLACEMENT_VARS, **values)) for p in group],
            max(calls // 100, 10),
        ),
    }


def cycle(group: list[cel.CelProgram], jobs: int, clusters: int) -> dict[str, Any]:
    """Every job against every cluster: a key walked per pair; parts projected once per job and
    cluster; and jobs grouped by their part, evaluated once per (group, cluster)."""
    job_values = [job(n) for n in range(jobs)]
    cluster_values = [cluster(n) for n in range(clusters)]

    memo = MemoEvaluator(group, cel.PLACEMENT_VARS)
    start = time.perf_counter()
    for j in job_values:
        for c in cluster_values:
            memo.evaluate({"job": j, "cluster": c})
    walked = time.perf_counter() - start

    parted = MemoEvaluator(group, cel.PLACEMENT_VARS)
    assert parted.roots == ("cluster", "job")
    start = time.perf_counter()
    cluster_parts = [parted.part("cluster", c) for c in cluster_values]
    for j in job_values:
        job_part = parted.part("job", j)
        for c, cluster_part in zip(cluster_values, cluster_parts, strict=True):
            parted.evaluate_key((cluster_part, job_part), {"job": j, "cluster": c})
    with_parts = time.perf_counter() - start

    grouped = MemoEvaluator(group, cel.PLACEMENT_VARS)
    start = time.perf_counter()
    cluster_parts = [grouped.part("cluster", c) for c in cluster_values]
    by_part: dict[Any, list[dict[str, Any]]] = {}
    for j in job_values:
        by_part.setdefault(grouped.part("job", j), []).append(j)
    results = {
        job_part: [
            grouped.evaluate_key((cluster_part, job_part), {"job": members[0], "cluster": c})
            for c, cluster_part in zip(cluster_values, cluster_parts, strict=True)
        ]
        for job_part, members in by_part.items()
    }
    by_groups = time.perf_counter() - start
    assert len(results) == len(by_part)
    pairs = jobs * clusters
    return {
        "jobs": jobs,
        "clusters": clusters,
        "misses": memo.misses,
        "hits": memo.hits,
        "distinct_job_parts": len(by_part),
        "us_per_pair_key_per_pair": round(walked / pairs * 1e6, 2),
        "us_per_pair_parts_per_variable": round(with_parts / pairs * 1e6, 2),
        "us_per_pair_jobs_grouped_by_part": round(by_groups / pairs * 1e6, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--jobs", type=int, default=2_000)
    parser.add_argument("--clusters", type=int, default=100)
    args = parser.parse_args()
    filters, scores = programs("filters"), programs("scores")
    results = {
        "filters": measure(filters, args.calls),
        "filters_and_scores": measure(filters + scores, args.calls),
        "cycle_filters_and_scores": cycle(filters + scores, args.jobs, args.clusters),
    }
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
