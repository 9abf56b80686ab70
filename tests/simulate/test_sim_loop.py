"""The loop: same seed, same summary; every job accounted for exactly once; --until."""

from __future__ import annotations

import random
from collections import Counter

from simulate.results import GPU


def _mixed(n: int, seed: int = 3) -> list[dict[str, object]]:
    rng = random.Random(seed)
    rows = []
    t = 0.0
    for i in range(n):
        t += rng.expovariate(1 / 40)
        rows.append({"name": f"j{i}", "submit": round(t, 1), "queue": rng.choice("ab"),
                     "tenant": rng.choice(("t1", "t2")), "duration": rng.randint(60, 1800),
                     "gpus": rng.choice((1, 2, 4, 8, 16)),
                     "priority": rng.choice((0, 0, 10))})  # fmt: skip
    return rows


def test_same_seed_gives_the_same_summary(policies, trace_file, simulate, cluster) -> None:  # type: ignore[no-untyped-def]
    trace = trace_file(_mixed(150))
    clusters = [cluster("east", 3), cluster("west", 2)]
    runs = [
        simulate(policies({"a": 1, "b": 2}), clusters, trace, seed=7, fail_rate=0.2)[1]
        for _ in range(2)
    ]
    first, second = (dict(r.summary, wall_s=None) for r in runs)
    assert first == second
    assert runs[0].jobs == runs[1].jobs
    assert runs[0].summary["jobs"]["failures"] > 0  # the seeded failures did happen
    other = simulate(policies({"a": 1, "b": 2}), clusters, trace, seed=8, fail_rate=0.2)[1]
    assert dict(other.summary, wall_s=None) != first  # the seed is what drives them


def test_every_job_ends_once_and_none_is_lost(policies, trace_file, simulate, cluster) -> None:  # type: ignore[no-untyped-def]
    rows = _mixed(150)
    rows.append({"name": "too-big", "submit": 5, "queue": "a", "tenant": "t1", "duration": 60,
                 "gpus": 64})  # fmt: skip
    trace = trace_file(rows)
    clusters = [cluster("east", 3), cluster("west", 2)]
    sim, result = simulate(policies({"a": 1, "b": 1}), clusters, trace, fail_rate=0.1)
    states = Counter(r.state for r in result.jobs)
    assert sorted(r.name for r in result.jobs) == sorted(str(r["name"]) for r in rows)
    assert set(states) <= {"succeeded", "gave_up", "pending"}  # ran to the end: none running
    jobs = result.summary["jobs"]
    assert jobs["total"] == len(rows) == jobs["finished"] + jobs["pending"] + jobs["running"]
    assert jobs["rejected"] == 1 and states["pending"] == 1  # the 64-GPU gang: GangTooLarge
    for job in sim.jobs:
        # each admission ended exactly once: in success, a failure requeue or a preemption
        assert job.admissions == (job.state == "succeeded") + job.failures + job.preemptions
        if job.state == "succeeded":
            assert job.finished_at is not None and job.admitted_at is not None
            assert job.finished_at >= job.admitted_at + job.trace.duration - 1e-3  # µs clock
    for member in sim.members:  # nothing left behind on the members
        assert member.job_keys() == ()
        assert member.allocated().get_amount(GPU) == 0


def test_until_stops_with_jobs_still_waiting_or_running(
    policies, trace_file, simulate, cluster
) -> None:  # type: ignore[no-untyped-def]
    rows = _mixed(150)
    trace = trace_file(rows)
    _, result = simulate(policies({"a": 1, "b": 1}), [cluster("east", 2)], trace, until=2000)
    jobs = result.summary["jobs"]
    assert result.summary["until_s"] == 2000
    assert jobs["running"] > 0 and jobs["pending"] > 0
    assert jobs["finished"] + jobs["pending"] + jobs["running"] == len(rows)
    late = [r for r in result.jobs if r.submitted > 2000]
    assert late and all(r.state == "pending" and r.admitted is None for r in late)
    assert jobs["not_submitted"] == len(late)
    assert all(r.finished is None or r.finished <= 2000 for r in result.jobs)


def test_the_summary_fills_every_field_of_the_contract(
    policies, trace_file, simulate, cluster
) -> None:  # type: ignore[no-untyped-def]
    rows = [dict(r, stage="s1" if i % 2 else "s2") for i, r in enumerate(_mixed(40))]
    _, result = simulate(policies({"a": 1, "b": 1}), [cluster("east", 2)], trace_file(rows))
    s = result.summary
    assert {"label", "policy_version", "seed", "until_s", "wall_s", "jobs", "queues",
            "tenants", "clusters", "fairness", "stages"} <= set(s)  # fmt: skip
    assert {"total", "finished", "succeeded", "failed", "gave_up", "pending", "running",
            "rescheduled", "preemptions", "gpu_hours_lost"} <= set(s["jobs"])  # fmt: skip
    for queue in s["queues"].values():
        assert {"tenant", "weight", "guarantee", "jobs", "admitted", "wait_s", "completion_s",
                "share_mean"} <= set(queue)  # fmt: skip
        assert set(queue["wait_s"]) == {"p50", "p95", "p99", "max"}
    for tenant in s["tenants"].values():
        assert {"jobs", "admitted", "wait_s", "share_mean"} <= set(tenant)
    assert set(s["clusters"]["east"]) == {"utilisation", "fragmentation_gpu_mean"}
    assert 0 < s["clusters"]["east"]["utilisation"][GPU] <= 1
    assert {"window_s", "jain_mean", "jain_min"} <= set(s["fairness"])
    assert {name: v["jobs"] for name, v in s["stages"].items()} == {"s1": 20, "s2": 20}
    series = result.series
    assert len(series.times) > 10 and len(series.fairness) == len(series.times)
    assert all(len(v) == len(series.times) for v in series.cluster_fragmentation.values())
    assert all(
        len(values) == len(series.times)
        for per in series.queue_usage.values()
        for values in per.values()
    )
    assert series.queue_guarantee == {"a": {}, "b": {}}
