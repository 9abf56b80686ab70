"""Scenario tables: tests/scenarios/*.yaml, one cycle (or several) each, expected decisions.

A scenario file has ``description``, ``policies`` (Queue and SchedulingPolicy documents; the
SchedulingPolicy is optional), ``clusters`` and ``jobs`` (see tests/cycle/builders.py), and
``expect``: job name → the fields its decision must have (``action``, ``reason``,
``clusters`` as name → replicas, ``position``, ``message`` substrings as ``says``, ``preemptor``);
``~`` (null) instead of fields: the job gets no decision (a running job that is not preempted).
With ``cycles: N`` the cycle is run N times; after each, admitted jobs start running (and, with
``finishAfter: K`` on a job, stop K cycles later); ``expectAdmitted`` then gives per queue the
number of jobs admitted over all cycles, and ``expectShares`` (``resource``, ``shares`` as
queue → fraction, ``tolerance``) the fraction of that resource each queue got, summed over the
whole demand of the jobs admitted in all cycles. A job with ``finishAfter`` and ``outcome``
(``succeeded`` or ``failed``) is not removed when it ends: its binding stays, reporting that
outcome (for ``fleetgate.io/after`` dependencies).

A scenario must expect something: a decision for at least one of its jobs (``expect``),
``expectAdmitted`` or ``expectShares``; every job and queue it names must be in the scenario.
"""

from __future__ import annotations

from collections import Counter
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
import yaml

from engine.cycle import run_cycle
from engine.cycle.model import CycleResult, Decision
from engine.policy.policyset import PolicySet, load_policy_set
from tests.conftest import REPO
from tests.cycle import builders

SCENARIO_DIR = REPO / "tests" / "scenarios"
SCENARIOS = sorted(SCENARIO_DIR.glob("*.yaml"))


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
            if "outcome" in spec:  # it ends and stays, its clusters reporting the outcome
                spec["finished"] = spec.pop("outcome")
            else:
                scenario["jobs"].remove(spec)
    for d in result.decisions:
        name = d.workload.split("/")[-1]
        if d.action == "Admit" and name in jobs:
            jobs[name]["admitted"] = {c.name: c.replicas for c in d.clusters}
            jobs[name]["startedIn"] = cycle


def expectation_errors(scenario: dict[str, Any]) -> list[str]:
    """Why a scenario would check nothing, or check a job or queue it does not have."""
    jobs = {j["name"] for j in scenario.get("jobs") or ()}
    queues = {
        d["metadata"]["name"] for d in scenario.get("policies") or () if d.get("kind") == "Queue"
    }
    expect = scenario.get("expect") or {}
    admitted = scenario.get("expectAdmitted") or {}
    shares = scenario.get("expectShares") or {}
    errors = []
    if not (expect or admitted or shares):
        errors.append("expects nothing: list expect, expectAdmitted or expectShares")
    errors += [f"expect names {name!r}, not one of its jobs" for name in expect if name not in jobs]
    for field, named in (("expectAdmitted", admitted), ("expectShares", shares.get("shares", {}))):
        errors += [f"{field} names {q!r}, not one of its queues" for q in named if q not in queues]
    if shares and not (shares.get("resource") and shares.get("shares") and "tolerance" in shares):
        errors.append("expectShares needs resource, shares and tolerance")
    return errors


def share_problems(expected: dict[str, Any], admitted: Counter[str]) -> list[str]:
    total = sum(admitted.values())
    if not total:
        return [f"no {expected['resource']} admitted over the cycles"]
    tolerance = Fraction(str(expected["tolerance"]))
    problems = []
    for queue, want in expected["shares"].items():
        got = Fraction(admitted[queue], total)
        if abs(got - Fraction(str(want))) > tolerance:
            problems.append(
                f"queue {queue}: {float(got):.3f} of the admitted {expected['resource']} "
                f"({admitted[queue]} of {total}), not {want} ± {expected['tolerance']}"
            )
    return problems


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_scenario(path: Path, tmp_path: Path) -> None:
    scenario = yaml.safe_load(path.read_text())
    assert scenario.get("description"), "every scenario says what it shows"
    assert not (errors := expectation_errors(scenario)), f"{path.name}: {errors}"
    policies = load_policies(scenario["policies"], tmp_path)
    demand = {j["name"]: builders.job(j)[1].total for j in scenario["jobs"]}
    shared = (scenario.get("expectShares") or {}).get("resource", "")
    admitted: Counter[str] = Counter()
    admitted_amount: Counter[str] = Counter()
    result = None
    for cycle in range(int(scenario.get("cycles", 1))):
        result = run_cycle(builders.snapshot(scenario), policies, builders.NOW)
        for d in result.decisions:
            if d.action == "Admit":
                admitted[d.queue] += 1
                admitted_amount[d.queue] += demand[d.workload.split("/")[-1]].get_amount(shared)
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
    if scenario.get("expectShares"):
        problems += share_problems(scenario["expectShares"], admitted_amount)
    table = "\n".join(
        f"  {d.action:8} {d.workload:40} {d.reason:18} {d.message}" for d in result.decisions
    )
    assert not problems, "\n".join(problems) + "\n" + table


def test_every_file_in_the_scenario_folder_is_run() -> None:
    assert SCENARIOS
    assert sorted(SCENARIO_DIR.iterdir()) == SCENARIOS


@pytest.mark.parametrize(
    ("scenario", "error"),
    [
        ({"jobs": [{"name": "a"}], "expect": {}}, "expects nothing"),
        ({"jobs": [{"name": "a"}], "expect": {"b": None}}, "expect names 'b'"),
        ({"policies": [], "expectAdmitted": {"q": 1}}, "expectAdmitted names 'q'"),
        (
            {"policies": [{"kind": "Queue", "metadata": {"name": "q"}}],
             "expectShares": {"shares": {"q": 1}}},
            "needs resource, shares and tolerance",
        ),
    ],
    ids=["no expectations", "unknown job", "unknown queue", "shares without tolerance"],
)  # fmt: skip
def test_a_scenario_that_checks_nothing_or_the_wrong_thing_is_an_error(
    scenario: dict[str, Any], error: str
) -> None:
    assert any(error in e for e in expectation_errors(scenario))


def test_shares_outside_the_tolerance_are_reported() -> None:
    expected = {"resource": "gpu", "shares": {"a": 0.5, "b": 0.5}, "tolerance": 0.05}
    assert share_problems(expected, Counter(a=55, b=45)) == []
    assert share_problems(expected, Counter(a=60, b=40)) == [
        "queue a: 0.600 of the admitted gpu (60 of 100), not 0.5 ± 0.05",
        "queue b: 0.400 of the admitted gpu (40 of 100), not 0.5 ± 0.05",
    ]
