"""Scripted faults: a cluster that stays NotReady past the grace has its jobs requeued and
placed elsewhere; a failed job is requeued with backoff, and given up after its last attempt."""

from __future__ import annotations

from simulate.live import Fault, read_faults


def _gangs(n: int, duration: int = 5000) -> list[dict[str, object]]:
    return [{"name": f"g{i}", "submit": 0, "queue": "a", "tenant": "t", "duration": duration,
             "gpus": 8} for i in range(n)]  # fmt: skip


def test_cluster_down_past_grace_moves_its_jobs(policies, trace_file, simulate, cluster) -> None:  # type: ignore[no-untyped-def]
    trace = trace_file(_gangs(2))
    faults = (Fault(600, "cluster-down", "east"),)
    sim, result = simulate(
        policies({"a": 1}, grace="2m"), [cluster("east", 2), cluster("west", 2)], trace,
        faults=faults,
    )  # fmt: skip
    moved = [j for j in sim.jobs if j.failures]
    assert moved, "a job on the failed cluster was requeued"
    for job in moved:
        record = job.record()
        assert record.state == "succeeded" and record.cluster == "west"
        # reclaimed at the end of the grace (600 + 120 s), admitted again once backed off
        assert job.admitted_at is not None and job.admitted_at >= 720 + 30
        assert job.finished_at == job.admitted_at + 5000
    jobs = result.summary["jobs"]
    assert jobs["rescheduled"] == len(moved) and jobs["failures"] == len(moved)
    assert jobs["gpu_hours_lost"] == round(8 * 720 * len(moved) / 3600, 3)


def test_cluster_back_before_grace_keeps_its_jobs(policies, trace_file, simulate, cluster) -> None:  # type: ignore[no-untyped-def]
    trace = trace_file(_gangs(2))
    faults = (Fault(600, "cluster-down", "east"), Fault(660, "cluster-up", "east"))
    _, result = simulate(
        policies({"a": 1}, grace="2m"), [cluster("east", 2), cluster("west", 2)], trace,
        faults=faults,
    )  # fmt: skip
    assert result.summary["jobs"]["failures"] == 0
    assert all(r.state == "succeeded" and r.finished == 5000 for r in result.jobs)


def test_failed_job_requeues_then_gives_up(policies, trace_file, simulate, cluster) -> None:  # type: ignore[no-untyped-def]
    trace = trace_file(_gangs(1, duration=1000))
    fails = tuple(Fault(t, "fail-job", "g0") for t in (100, 400, 900, 1500))
    sim, result = simulate(policies({"a": 1}, attempts=3), [cluster("east", 1)], trace,
                           faults=fails, interval=10)  # fmt: skip
    job = sim.jobs[0]
    record = result.jobs[0]
    # failed at 100 and excluded from its only cluster for backoffMax (5m): the fault at 400
    # finds it waiting; admitted again at 400, failed at 900, again at 1200, failed at 1500
    assert record.state == "gave_up" and job.failures == 3 and job.admissions == 3
    assert record.admitted == 1200 and record.finished == 1500
    assert result.summary["jobs"]["gave_up"] == 1


def test_fault_script_errors_name_the_line(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "faults.csv"
    path.write_text("at,action,target\n90m,cluster-down,east\nsoon,cluster-up,east\n"
                    "10,explode,east\n", encoding="utf-8")  # fmt: skip
    try:
        read_faults(path)
    except Exception as err:  # noqa: BLE001 - the message is what is checked
        text = str(err)
    else:
        raise AssertionError("read_faults accepted a broken script")
    assert f"{path}:3: at 'soon'" in text
    assert f"{path}:4: action 'explode'" in text
    path.write_text("at,action,target\n90m,cluster-down,east\n", encoding="utf-8")
    assert read_faults(path) == (Fault(5400.0, "cluster-down", "east"),)
