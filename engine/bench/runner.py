"""``fleetgate bench``: time full and incremental cycles on a seeded synthetic fleet.

The fleet and policies are built first (not timed). Then ``repeats`` full cycles run over all
pending jobs with one JobCache, as the reconciler would keep it: the first cycle evaluates the
mapping CEL of every job, later ones reuse it (``first_cycle_seconds`` reports the cold one).
``cycle_seconds`` gives the median of the warm cycles (``warm_cycle_seconds``; the cold one
alone when ``repeats`` is 1, and then ``p50_of`` says ``cold``) and the slowest of all, the cold
one included.
Long-lived state is frozen out of the garbage collector's view (``gc.freeze``, after a full
collection, so nothing collectable is frozen): the built fleet, and the JobCache once the first
cycle has filled it, as a long-running process would after warming up. Each timed cycle runs
with the collector paused (``engine.gcpause``); see README, Performance.
After the last full cycle, ``repeats`` jobs arrive one at a time and each is decided by an
incremental cycle against the state the full cycle ended in.
``null_cycle_seconds`` times the null cycle (``engine.bench.nullcycle``) over the jobs and clusters
the full cycle read, ``NULL_PER_CYCLE`` times right after each warm full cycle (after the cold
one when it is the only one): interleaved, so that both see the machine at the same moments
when its speed wanders. ``ratio_to_null`` is the full cycle's p50 over the null cycle's: issue
34's measure of how far the cycle is from the floor.
``decisions_sha256`` digests what was decided (the last full cycle's decisions and queue reports
as JSON, then each arrival's decision): a refactor or a speed-up of the cycle must leave it
unchanged for the same arguments.
"""

from __future__ import annotations

import datetime as dt
import gc
import hashlib
import json
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from engine.bench.nullcycle import Prepared, null_cycle, prepare
from engine.bench.synthetic import arrival, synthetic_fleet, with_arrival
from engine.cycle import Action, Cycle, JobCache
from engine.gcpause import collector_paused
from engine.policy.policyset import PolicySet, load_policy_set

NOW = dt.datetime(2026, 1, 5, 12, 0, tzinfo=dt.UTC)
NULL_PER_CYCLE = 3  # null cycles timed after each warm full cycle


def load_documents(documents: Any) -> PolicySet:
    with tempfile.TemporaryDirectory(prefix="fleetgate-bench-") as folder:
        for i, doc in enumerate(documents):
            (Path(folder) / f"{i:05d}.yaml").write_text(yaml.safe_dump(doc), encoding="utf-8")
        return load_policy_set([folder])


def run(jobs: int, clusters: int, queues: int, seed: int, repeats: int) -> dict[str, Any]:
    started = time.perf_counter()
    fleet = synthetic_fleet(jobs=jobs, clusters=clusters, queues=queues, seed=seed, now=NOW)
    policies = load_documents(fleet.policy_documents)
    setup = time.perf_counter() - started
    cache = JobCache()
    full: list[float] = []
    cycle = None
    result = None
    # The fleet and policies live as long as the process: keep them out of the collector's
    # scans (frozen after a full collection, so nothing collectable is frozen).
    gc.collect()
    gc.freeze()
    rounds = max(repeats, 1)
    null: list[float] = []
    null_admitted = 0
    prepared: Prepared | None = None
    for index in range(rounds):
        t0 = time.perf_counter()
        with collector_paused():
            cycle = Cycle(fleet.snapshot, policies, NOW, cache)
            result = cycle.run()
        full.append(time.perf_counter() - t0)
        if prepared is None:  # every cycle reads the same snapshot: the same jobs and rooms
            prepared = _null_input(cycle)
        if index == 0 and rounds > 1:  # the cache is warm: keep it out of later collections
            cycle = result = None
            gc.collect()
            gc.freeze()
        else:
            null_admitted = _null_cycles(prepared, NULL_PER_CYCLE, null)
    assert cycle is not None and result is not None
    incremental: list[float] = []
    arrivals = []
    snapshot = fleet.snapshot
    for index in range(max(repeats, 1)):
        binding, workload = arrival(fleet, index, seed, NOW)
        snapshot = with_arrival(snapshot, binding, workload)
        t0 = time.perf_counter()
        with collector_paused():
            arrivals.append(cycle.arrive(snapshot, binding))
        incremental.append(time.perf_counter() - t0)
    pending = sum(1 for d in result.decisions if d.action != Action.PREEMPT)
    warm = full[1:] or full
    return {
        "jobs": jobs,
        "clusters": clusters,
        "queues": queues,
        "seed": seed,
        "pending": pending,
        "cycle_seconds": {
            "p50": round(statistics.median(warm), 4),
            "max": round(max(full), 4),
            "p50_of": "warm" if full[1:] else "cold",
        },
        "null_cycle_seconds": _summary(null),
        "null_admitted": null_admitted,
        "ratio_to_null": round(statistics.median(warm) / max(statistics.median(null), 1e-9), 1),
        "first_cycle_seconds": round(full[0], 4),
        "warm_cycle_seconds": [round(t, 4) for t in full[1:]],
        "incremental_seconds": _summary(incremental),
        "admitted": sum(1 for d in result.decisions if d.action == Action.ADMIT),
        "preempted": sum(1 for d in result.decisions if d.action == Action.PREEMPT),
        "cel_evaluations": result.stats.get("celEvaluations", 0),
        "decisions_sha256": _digest(result.to_json(), [a and a.to_json() for a in arrivals]),
        "setup_seconds": round(setup, 2),
        "peak_rss_mb": round(_peak_rss_mb(), 1),
        "python": sys.version.split()[0],
    }


def _null_input(cycle: Cycle) -> Prepared:
    """The null cycle's jobs and rooms (``engine.bench.nullcycle.prepare``): what ``cycle``
    read."""
    return prepare(
        ((job.order_key, job.demand) for job in cycle.pending),
        [state.free for state in cycle.clusters.values() if state.view.ready],
    )


def _null_cycles(prepared: Prepared, count: int, times: list[float]) -> int:
    """``count`` timed null cycles over ``prepared``, their times added to ``times``; returns
    how many jobs the null cycle admitted."""
    admitted = 0
    for _ in range(count):
        t0 = time.perf_counter()
        with collector_paused():
            admitted = null_cycle(prepared)
        times.append(time.perf_counter() - t0)
    return admitted


def _digest(*parts: Any) -> str:
    text = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _summary(values: list[float]) -> dict[str, float]:
    return {"p50": round(statistics.median(values), 4), "max": round(max(values), 4)}


def _peak_rss_mb() -> float:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 1024 if sys.platform != "darwin" else peak / 2**20
