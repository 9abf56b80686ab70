"""Scenario tables: tests/scenarios/*.yaml, one cycle (or several) each, expected decisions.

A scenario file has ``description``, ``policies`` (Queue and SchedulingPolicy documents; the
SchedulingPolicy is optional), ``clusters`` and ``jobs`` (see tests/cycle/builders.py), and
``expect``: job name → the fields its decision must have (``action``, ``reason``,
``clusters`` as name → replicas, ``position``, ``message`` substrings as ``says``, ``preemptor``);
``~`` (null) instead of fields: the job gets no decision (a running job that is not preempted).
With ``cycles: N`` the cycle is run N times; after each, admitted jobs start running (and, with
``finishAfter: K`` on a job, stop K cycles later); ``expectAdmitted`` then gives per queue the
number of jobs admitted over all cycles.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from engine.cycle.cycle import run_cycle
from engine.cycle.model import CycleResult, Decision
from engine.policy.policyset import PolicySet, load_policy_set
from tests.conftest import REPO
from tests.cycle import builders

SCENARIOS = sorted((REPO / "tests" / "scenarios").glob("*.yaml"))


def load_policies(documents: list[dict[str, Any]], tmp_path: Path) -> PolicySet:
    folder = tmp_path / "policies"
    folder.mkdir()
    for i, doc in enumerate(documents):
        doc = {"apiVersion": "fleetgate.io/v1alpha1", **doc}
        (folder / f"{i:02}.yaml").write_text(yaml.safe_dump(doc))
    return load_policy_set([folder])


def decision_for(result: CycleResult, name: str) -> Decision | None:
    return next((d for d in result.decisions if d.workload.split("/")[-1] == name), None)


def check(decision: Decision | None, expected: dict[str, Any] | None, name: str) -> list[str]:
    if expected is None:
        if decision is None:
            return []
        return [f"{name}: expected no decision, got {decision.action} {decision.reason}"]
    if decision is None:
        return [f"{name}: no decision"]
    problems = []
    actual = decision.to_json()
    for key, want in expected.items():
        if key == "says":
            for text in [want] if isinstance(want, str) else want:
                if text not in decision.message:
                    problems.append(f"{name}: message {decision.message!r} lacks {text!r}")
        elif key == "clusters":
            got = {c.name: c.replicas for c in decision.clusters}
            if got != want:
                problems.append(f"{name}: clusters {got} != {want}")
        elif key == "clusterReasons":
            reasons = dict(decision.cluster_reasons)
            for cluster, text in want.items():
                if text not in reasons.get(cluster, ""):
                    problems.append(
                        f"{name}: {cluster} reason {reasons.get(cluster)!r} lacks {text!r}"
                    )
        elif actual.get(key) != want:
            problems.append(f"{name}: {key} {actual.get(key)!r} != {want!r} ({decision.message})")
    return problems


def advance(scenario: dict[str, Any], result: CycleResult, cycle: int) -> None:
    """Admitted jobs start running; running jobs with ``finishAfter`` end when it is due."""
    jobs = {j["name"]: j for j in scenario["jobs"]}
    for spec in list(scenario["jobs"]):
        due = spec.get("startedIn")
        if due is not None and "finishAfter" in spec and cycle - due + 1 >= spec["finishAfter"]:
            scenario["jobs"].remove(spec)
    for d in result.decisions:
        name = d.workload.split("/")[-1]
        if d.action == "Admit" and name in jobs:
            jobs[name]["admitted"] = {c.name: c.replicas for c in d.clusters}
            jobs[name]["startedIn"] = cycle


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_scenario(path: Path, tmp_path: Path) -> None:
    scenario = yaml.safe_load(path.read_text())
    assert scenario.get("description"), "every scenario says what it shows"
    policies = load_policies(scenario["policies"], tmp_path)
    admitted: Counter[str] = Counter()
    result = None
    for cycle in range(int(scenario.get("cycles", 1))):
        result = run_cycle(builders.snapshot(scenario), policies, builders.NOW)
        admitted.update(d.queue for d in result.decisions if d.action == "Admit")
        advance(scenario, result, cycle)
    assert result is not None
    problems = []
    for name, expected in (scenario.get("expect") or {}).items():
        problems += check(decision_for(result, name), expected, name)
    for queue, count in (scenario.get("expectAdmitted") or {}).items():
        if admitted[queue] != count:
            problems.append(
                f"queue {queue}: {admitted[queue]} admitted over the cycles, not {count}"
            )
    table = "\n".join(
        f"  {d.action:8} {d.workload:40} {d.reason:18} {d.message}" for d in result.decisions
    )
    assert not problems, "\n".join(problems) + "\n" + table


def test_every_scenario_is_loaded() -> None:
    assert len(SCENARIOS) >= 2
