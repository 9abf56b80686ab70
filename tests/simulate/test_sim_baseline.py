"""The baseline checks totals only; fleetgate checks node shape. Where free GPUs are scattered
over nodes, the baseline sends a job where it cannot start."""

from __future__ import annotations

from engine.cycle import Baseline


def _fragmenting() -> list[dict[str, object]]:
    # two 6-GPU pods fill alpha's two 8-GPU nodes to 2 free GPUs each (4 free in total);
    # then one 4-GPU pod: only beta's single 4-GPU node can hold it
    rows: list[dict[str, object]] = [
        {"name": f"big{i}", "submit": 0, "queue": "a", "tenant": "t", "duration": 20000,
         "replicas": 1, "pod_gpus": 6} for i in range(2)
    ]  # fmt: skip
    # x comes after the bigs' room is counted by the cluster status alone (clusterStatusLag)
    rows.append({"name": "x", "submit": 30, "queue": "a", "tenant": "t", "duration": 600,
                 "replicas": 1, "pod_gpus": 4})  # fmt: skip
    return rows


def test_node_shape_decides_where_a_job_can_start(policies, trace_file, simulate, cluster) -> None:  # type: ignore[no-untyped-def]
    trace = trace_file(_fragmenting())
    clusters = [cluster("alpha", 2), cluster("beta", 1, gpus=4)]
    policy_set = policies({"a": 1}, startup="5m")
    _, head = simulate(policy_set, clusters, trace, interval=10)
    base_sim, base = simulate(policy_set, clusters, trace, Baseline(), interval=10)
    x_head = next(r for r in head.jobs if r.name == "x")
    x_base = next(r for r in base.jobs if r.name == "x")
    assert [r.cluster for r in head.jobs if r.name.startswith("big")] == ["alpha", "alpha"]
    assert [r.cluster for r in base.jobs if r.name.startswith("big")] == ["alpha", "alpha"]
    # fleetgate: alpha has 4 GPUs free but no node with 4, so x goes to beta at once
    assert x_head.state == "succeeded" and x_head.cluster == "beta" and x_head.wait == 0
    assert head.summary["jobs"]["failures"] == 0
    # baseline: alpha's totals fit, x waits there unbound until its startup timeout, is
    # requeued with alpha excluded, and only then lands on beta
    x_job = next(j for j in base_sim.jobs if j.trace.name == "x")
    assert x_job.failures == 1 and x_job.admissions == 2
    assert x_base.state == "succeeded" and x_base.cluster == "beta"
    assert x_base.wait is not None and x_base.wait >= 300
    assert base.summary["jobs"]["rescheduled"] == 1
    assert base.summary["policy_version"] == head.summary["policy_version"]


def test_baseline_round_robins_queues_by_priority(policies, trace_file, simulate, cluster) -> None:  # type: ignore[no-untyped-def]
    # one 8-GPU node; every job needs all of it: the order of admission is the order decided
    rows = [{"name": f"{q}{i}", "submit": i, "queue": q, "tenant": "t", "duration": 100,
             "gpus": 8} for q in ("a", "b") for i in range(3)]  # fmt: skip
    rows.append({"name": "urgent", "submit": 5, "queue": "b", "tenant": "t", "duration": 100,
                 "gpus": 8, "priority": 50})  # fmt: skip
    trace = trace_file(rows)
    _, result = simulate(policies({"a": 1, "b": 1}), [cluster("one", 1)], trace,
                         Baseline(), interval=10)  # fmt: skip
    order = [r.name for r in sorted(result.jobs, key=lambda r: (r.admitted, r.name))]
    # a0 starts alone at 0; then priority first, then a and b in turn, FIFO within each
    assert order == ["a0", "urgent", "a1", "b0", "a2", "b1", "b2"]
