"""``benchmarks/cycle_instructions.py`` counts one warm cycle of the fleet ``fleetgate bench``
builds: the child under callgrind runs the same cycle (it admits what the bench admits), the
count covers that cycle and not the setup before it, and a repeat gives the same count."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from engine.bench.runner import run
from tests.conftest import require_tool

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "cycle_instructions.py"


@pytest.fixture(autouse=True)
def _callgrind() -> None:
    """The instruction count needs callgrind (Debian package valgrind)."""
    require_tool("valgrind")
    require_tool("callgrind_control")


def count(jobs: int) -> dict[str, int]:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--jobs", str(jobs), "--clusters", "3", "--queues", "5"],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return json.loads(done.stdout)


def test_the_count_is_of_one_warm_cycle_of_the_bench_fleet() -> None:
    small, again, large = count(200), count(200), count(800)
    assert small["admitted"] == run(200, 3, 5, seed=1, repeats=2)["admitted"]
    assert small["warm_cycle_instructions"] > 0
    # fixed hash seed: a repeat counts the same to within a hair
    assert abs(again["warm_cycle_instructions"] / small["warm_cycle_instructions"] - 1) < 0.01
    # the setup is not counted: more jobs, more counted, and far below the billions that
    # importing the engine and running the cold cycle take
    assert large["warm_cycle_instructions"] > 2 * small["warm_cycle_instructions"]
    assert small["warm_cycle_instructions"] < 1_000_000_000
