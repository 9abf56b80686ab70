"""``fleetgate demo`` end to end (a subprocess, bounded), judged by its JSON summary; and the
pieces it is made of that need no server: the job mix and how a binding reads as a job state."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from sandbox.demo.jobs import TENANT_MIX, plan
from sandbox.demo.observe import job_state
from tests.conftest import REPO, require_tool

DEMO_SECONDS = 240  # the subprocess is killed after this; the demo stops itself at --timeout
FLEET = "apis/visibility.fleetgate.io/v1alpha1/fleets/current"
ARGS = ("--plain", "-o", "json", "--jobs", "24", "--speed", "180", "--timeout", "150")


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("screenshots")


@pytest.fixture(scope="module")
def ran(shots: Path) -> tuple[dict[str, Any], list[str], dict[str, Any]]:
    """The demo's summary, the lines it printed while it ran, and the fleet its dashboard
    served then (read through ``fleetgate dashboard``'s address, as a browser would); with
    ``--screenshots`` as docs/dashboard.md shows it (``make dashboard-screenshots``)."""
    require_tool("chromium"), require_tool("chromedriver")
    command = [sys.executable, "-m", "fleetgate", "demo", *ARGS, "--screenshots", str(shots)]
    process = subprocess.Popen(
        command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    lines: list[str] = []
    try:
        assert process.stderr is not None
        for line in process.stderr:  # its live lines (-o json puts the summary on stdout)
            lines.append(line)
            if line.startswith("dashboard: "):
                break
        address = lines[-1].split()[1] if lines and lines[-1].startswith("dashboard: ") else ""
        assert address.startswith("http://127.0.0.1:"), lines
        with urllib.request.urlopen(f"{address}{FLEET}", timeout=30) as answer:
            fleet = json.loads(answer.read())
        out, err = process.communicate(timeout=DEMO_SECONDS)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)
    assert process.returncode == 0, err[-4000:]
    return json.loads(out), lines, fleet


@pytest.fixture(scope="module")
def summary(ran) -> dict[str, Any]:
    return ran[0]


def test_the_screenshots_are_the_dashboards_four_pages(ran, shots: Path) -> None:
    for page in ("fleet", "queues", "jobs", "job"):
        data = (shots / f"dashboard-{page}.png").read_bytes()
        assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 10_000, page
    assert "--screenshots docs/images" in (REPO / "Makefile").read_text()
    assert "make dashboard-screenshots" in (REPO / "docs" / "dashboard.md").read_text()


def test_the_dashboard_serves_the_running_demos_fleet(ran) -> None:
    _, lines, fleet = ran
    assert lines[-1].rstrip().endswith("(while the demo runs)")
    assert fleet["kind"] == "Fleet" and fleet["policy"]["version"]
    assert [c["name"] for c in fleet["clusters"]] == ["cpu-spot", "gpu-east", "gpu-west"]


def test_every_tenant_has_jobs_admitted(summary):
    assert set(summary["tenants"]) == set(TENANT_MIX)
    for tenant, seen in summary["tenants"].items():
        assert seen["submitted"] > 0, tenant
        assert seen["admitted"] > 0, (tenant, summary["tenants"])


def test_no_job_is_lost(summary):
    jobs = summary["jobs"]
    assert jobs["planned"] == 24
    assert jobs["submitted"] + jobs["refused"] == jobs["planned"]
    assert jobs["lost"] == []
    assert sum(jobs["states"].values()) == jobs["planned"]
    assert set(jobs["states"]) <= {"succeeded", "failed", "running", "pending", "refused"}


def test_the_failed_clusters_jobs_are_rescheduled_or_wait_with_a_reason(summary):
    failure = summary["failure"]
    gpu_clusters = {c["name"] for c in summary["clusters"] if c["resource"] == "nvidia.com/gpu"}
    assert failure["cluster"] in gpu_clusters
    assert failure["downAtSeconds"] is not None
    assert failure["affected"], "the failure hit a cluster running no job"
    assert any(job["attempts"] >= 1 for job in failure["affected"]), failure["affected"]
    for job in failure["affected"]:
        assert failure["cluster"] in job["was"]
        # requeued by fleetgate for the failure (or preempted meanwhile), then admitted again,
        # or still waiting with the reason on its binding; never left on the failed cluster
        assert job["outcome"] in ("rescheduled", "requeued"), job
        if job["outcome"] == "requeued":
            assert job["state"] == "pending" and job["reason"] and job["message"], job


def test_the_summary_numbers_hang_together(summary):
    for queue in summary["queues"]:
        assert queue["admitted"] <= queue["submitted"], queue
        if queue["waitP50Seconds"] is not None:
            assert 0 <= queue["waitP50Seconds"] <= queue["waitP95Seconds"], queue
        assert 0 <= queue["fleetShare"] <= 1, queue
    for cluster in summary["clusters"]:
        assert 0 <= cluster["utilisation"] <= 1, cluster
    assert {c["name"] for c in summary["clusters"]} == {"gpu-east", "gpu-west", "cpu-spot"}


# -- without a server -------------------------------------------------------------------------


def test_the_job_mix_follows_the_seed():
    first, again, other = plan(30, seed=7), plan(30, seed=7), plan(30, seed=8)
    assert [(j.at, j.name, j.template) for j in first] == [
        (j.at, j.name, j.template) for j in again
    ]
    assert [j.name for j in first] != [j.name for j in other]
    assert {j.tenant for j in first} == set(TENANT_MIX)
    assert len({j.binding for j in first}) == 30
    assert [j.at for j in first] == sorted(j.at for j in first)
    for job in first:
        meta = job.template["metadata"]
        assert "uid" not in meta and "status" not in job.template
        assert not any("karmada.io/" in k for k in meta.get("labels", {}))


def binding(**parts: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {"metadata": {"name": "a-job", "namespace": "research"}}
    obj["metadata"]["annotations"] = parts.pop("annotations", {})
    obj["spec"] = {"clusters": [{"name": c} for c in parts.pop("clusters", [])]}
    obj["status"] = {"aggregatedStatus": parts.pop("aggregated", [])}
    return obj


def done(cluster: str, kind: str = "Succeeded") -> dict[str, Any]:
    return {"clusterName": cluster, "status": {"conditions": [{"type": kind, "status": "True"}]}}


def test_a_binding_reads_as_the_state_of_its_job():
    pending = binding(
        annotations={
            "fleetgate.io/pending": "WaitingForQuota: queue research: 8 more nvidia.com/gpu",
            "fleetgate.io/attempts": "2",
        }
    )
    assert job_state(pending).state == "pending"
    assert job_state(pending).reason == "WaitingForQuota"
    assert job_state(pending).message == "queue research: 8 more nvidia.com/gpu"
    assert job_state(pending).attempts == 2
    assert job_state(binding()).state == "held"
    running = binding(clusters=["gpu-east"], aggregated=[done("gpu-west")])
    assert (job_state(running).state, job_state(running).clusters) == ("running", ("gpu-east",))
    assert job_state(binding(clusters=["gpu-east"], aggregated=[done("gpu-east")])).state == (
        "succeeded"
    )
    split = binding(clusters=["a", "b"], aggregated=[done("a"), done("b", "Failed")])
    assert job_state(split).state == "failed"
    half = binding(clusters=["a", "b"], aggregated=[done("a")])
    assert job_state(half).state == "running"


def test_a_preempted_or_ended_job_says_so_and_when():
    preempted = binding(annotations={"fleetgate.io/pending": "WaitingForQuota: 8 more"})
    preempted["status"]["conditions"] = [
        {"type": "Scheduled", "status": "False", "reason": "FleetgatePreempted"}
    ]
    assert job_state(preempted).preempted
    assert not job_state(binding(annotations={"fleetgate.io/pending": "Backoff: 1m"})).preempted
    ended = done("gpu-east")
    ended["status"]["completionTime"] = "2025-03-10T10:05:00Z"
    ended["status"]["conditions"][0]["lastTransitionTime"] = "2025-03-10T10:04:59Z"
    state = job_state(binding(clusters=["gpu-east"], aggregated=[ended]))
    assert state.finished_at is not None
    assert state.finished_at.isoformat() == "2025-03-10T10:05:00+00:00"
