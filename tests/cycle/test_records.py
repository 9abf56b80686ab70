"""``CycleResult.jobs``: a record of every managed job the cycle read, agreeing with its
decisions; built once, on first use."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
import yaml

from engine.cycle import JobState, run_cycle
from engine.cycle.model import ClusterAssignment, JobTable
from tests.cycle import builders
from tests.cycle.test_scenarios import SCENARIOS, load_policies

GPU = "nvidia.com/gpu"
NODE = {GPU: 8, "cpu": 64, "memory": "512Gi"}


def scenario() -> dict:
    later = builders.NOW + dt.timedelta(minutes=30)
    return {
        "policies": [
            {"kind": "Queue", "metadata": {"name": "q"}, "spec": {}},
            {"kind": "Queue", "metadata": {"name": "r"}, "spec": {}},
        ],
        "clusters": [{"name": "east", "nodes": 2, "node": NODE}],
        "jobs": [
            {"name": "wait", "queue": "q", "pods": 4, "pod": {GPU: 8}, "at": 5},
            {"name": "run", "queue": "r", "pods": 1, "pod": {GPU: 8}, "admitted": "east"},
            {"name": "done", "queue": "q", "pods": 1, "pod": {GPU: 2}, "admitted": "east",
             "finished": "succeeded"},
            {"name": "later", "queue": "r", "pods": 1, "pod": {GPU: 1},
             "backoffUntil": later.isoformat().replace("+00:00", "Z"), "attempts": 1},
            {"name": "other", "queue": "q", "pods": 1, "pod": {GPU: 1}, "managed": False},
        ],
    }  # fmt: skip


def test_every_managed_job_has_a_record_in_the_state_it_was_read(tmp_path: Path):
    spec = scenario()
    result = run_cycle(
        builders.snapshot(spec), load_policies(spec["policies"], tmp_path), builders.NOW
    )
    jobs = result.jobs
    assert list(jobs) == sorted(jobs)
    by_name = {ref.split("/")[1].rsplit("-", 1)[0]: record for ref, record in jobs.items()}
    assert {n: r.state for n, r in by_name.items()} == {
        "wait": JobState.PENDING,
        "run": JobState.ADMITTED,
        "done": JobState.FINISHED,
        "later": JobState.BACKOFF,
    }
    run = by_name["run"]
    assert (run.queue, run.clusters, run.demand[GPU]) == (
        "r",
        (ClusterAssignment("east", 1),),
        8000,
    )
    assert run.admitted_at == builders.EPOCH and run.in_flight == frozenset()
    assert by_name["wait"].queued_at == builders.EPOCH + dt.timedelta(minutes=5)
    assert (by_name["wait"].demand[GPU], by_name["wait"].clusters) == (32000, ())
    assert (by_name["done"].queue, by_name["later"].queue) == ("q", "r")
    assert by_name["wait"].workload == "PyTorchJob/team/wait"


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_records_agree_with_the_decisions(path: Path, tmp_path: Path):
    spec = yaml.safe_load(path.read_text())
    snapshot = builders.snapshot(spec)
    result = run_cycle(snapshot, load_policies(spec["policies"], tmp_path), builders.NOW)
    for d in result.decisions:
        record = result.jobs[d.binding]
        assert (record.queue, record.tenant, record.priority) == (d.queue, d.tenant, d.priority)
        assert record.workload == d.workload
        if d.group is not None and record.state == JobState.PENDING:
            assert record.group == d.group.name and record.group_state == d.group
    unplaced = {
        f"{b.namespace}/{b.name}"
        for b in snapshot.bindings
        if b.labels.get("fleetgate.io/managed") == "true" and not b.clusters
    }
    assert unplaced <= set(result.jobs)


def test_the_table_is_built_once_and_only_when_read():
    calls = []

    def build() -> dict:
        calls.append(1)
        return {}

    table = JobTable(build)
    assert calls == []
    assert len(table) == 0 and list(table) == [] and table.get("x") is None
    assert calls == [1]
