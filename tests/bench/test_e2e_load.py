"""``benchmarks/e2e_load.py`` (``make bench-e2e``) on a few jobs, both ways it runs: the jobs
streamed in while the reconciler runs, and ``--backlog`` (every binding held by the webhook
before the reconciler starts). Every job is decided, and the numbers the docs quote are there."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "e2e_load.py"
JOBS = 24


@pytest.mark.parametrize("backlog", [False, True], ids=["streamed", "backlog"])
def test_every_job_is_decided_and_counted(backlog: bool):
    command = [sys.executable, str(SCRIPT), "--jobs", str(JOBS), "--timeout", "120"]
    if backlog:
        command.append("--backlog")
    done = subprocess.run(command, capture_output=True, text=True, timeout=240, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert result["everyJobDecided"] is True
    assert result["decided"] == JOBS and result["refused"] == []
    assert result["admitted"] + result["pending"] == JOBS
    assert result["admitted"] > 0 and result["pending"] > 0  # 64 GPUs: some wait, with reasons
    assert result["bindsPerSecond"] > 0
    assert {"sandbox", "webhook", "this"} <= result["cpuSeconds"].keys()
    assert result["webhookCpuMsPerReview"] > 0
    assert sum(p["decisions"] for p in result["passes"]) >= JOBS
    writes = result["writesPerBinding"]  # from the sandbox's record of who wrote what
    assert writes["dropped"] == 0
    assert writes["admitted"]["bindings"] == result["admitted"]
    # an admission (spec patch, Scheduled condition, running-since at most), and its reason
    # once before when it waited a pass first (on a busy machine a job can arrive mid-pass); a
    # waiting job's reason once, again only if the reason changed
    assert 2 <= writes["admitted"]["max"] <= 4
    assert writes["waiting"]["median"] == 1
    if backlog:
        assert result["backlog"]["bindings"] == JOBS
        assert result["createSeconds"] == 0  # the clock starts with the reconciler
        assert result["backlog"]["submitSeconds"] > 0
    else:
        assert "backlog" not in result
        assert result["createSeconds"] > 0
