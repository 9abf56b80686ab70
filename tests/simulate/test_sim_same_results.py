"""A faster simulator decides the same: fleetgate and the baseline on a small production-like
trace write ``summary.json`` (``wall_s`` aside) and ``jobs.csv`` byte for byte as the files
kept in ``tests/simulate/data/same-results/expected/``, which were written before issue 34's
speed-ups of the cycle and the loop (and must be written again only by a change meant to
change results: ``python tests/simulate/test_sim_same_results.py``, then review the diff).

The case (``data/same-results/``): 316 jobs of ``simulate.generate --profile production`` (the
trace's first line has the command) on 2 clusters of 8 nodes of 96 cores / 768Gi / 8 GPUs;
ten queues guaranteed 12 GPUs each that borrow and reclaim (``reclaim: Any``, ``maxPerJob``,
``lateAfter``): the fleet runs full, jobs queue, fleetgate preempts. Failures are drawn with
``--fail-rate 0.05``, one cluster goes down for 10 minutes and the other for good
(``faults.csv``), so requeues, backoffs, exclusions and give-ups happen on both sides.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from engine.cycle.baseline import Baseline
from engine.members import load_fleet
from engine.policy.policyset import load_policy_set
from simulate.live import Options, read_faults
from simulate.loop import Simulation
from simulate.report import JOBS_FILE, SUMMARY_FILE, write_jobs, write_summary
from simulate.results import RunResult
from simulate.trace import read_trace

CASE = Path(__file__).resolve().parent / "data" / "same-results"
EXPECTED = CASE / "expected"


def runs() -> list[RunResult]:
    policies = load_policy_set([CASE / "policies"])
    fleet = load_fleet(CASE / "fleet.yaml")
    trace = read_trace(CASE / "trace.csv")
    faults = read_faults(CASE / "faults.csv")
    found = []
    for label, decide in (("head", None), ("baseline", Baseline())):
        options = Options(seed=7, label=label, fail_rate=0.05, faults=faults)
        run = Simulation(policies, fleet, trace, options, decide).run()
        run.summary["wall_s"] = 0.0  # the one figure that differs from run to run
        found.append(run)
    return found


def write(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    done = runs()
    write_summary(folder / SUMMARY_FILE, done)
    write_jobs(folder / JOBS_FILE, done)


def test_the_results_are_the_ones_kept(tmp_path: Path) -> None:
    write(tmp_path)
    for name in (SUMMARY_FILE, JOBS_FILE):
        found = (tmp_path / name).read_text().splitlines()
        kept = (EXPECTED / name).read_text().splitlines()
        assert found == kept, f"{name} differs from {EXPECTED / name}"
    head, baseline = (run["jobs"] for run in json.loads(found_summary(tmp_path))["runs"])
    assert head["preemptions"] > 0 and head["failures"] > 0  # the case takes those paths
    assert baseline["failures"] > 0 and baseline["gave_up"] > 0


def found_summary(folder: Path) -> str:
    return (folder / SUMMARY_FILE).read_text()


if __name__ == "__main__":
    write(EXPECTED)
    print(f"wrote {EXPECTED}", file=sys.stderr)
