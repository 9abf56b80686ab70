"""Properties of ``spec.preemption``'s limits (issue 28): whatever the fleet, queues and jobs,
no victim was preempted ``maxPerJob`` times already, none was admitted less than
``minRuntime`` ago, and one cycle preempts at most ``maxVictimsPerCycle`` jobs."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from engine.cycle import run_cycle
from engine.cycle.reasons import Action, Reason
from engine.policy.policyset import PolicySet
from tests.cycle import builders
from tests.cycle.test_properties import SETTINGS, load, scenarios

__all__ = ["load"]  # the fixture, used by name

GPU = "nvidia.com/gpu"


@st.composite
def limited(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any]]:
    """Queue ``a`` borrows most of a cluster with running jobs of random size, priority,
    admission time and past preemptions; queues ``b`` and ``c`` reclaim their guarantees with
    pending jobs; the limits are drawn too."""
    nodes = draw(st.integers(2, 6))
    limits = {
        "minRuntime": draw(st.sampled_from(["1m", "30m", "90m"])),
        "maxPerJob": draw(st.integers(0, 3)),
        "maxVictimsPerCycle": draw(st.integers(1, 3)),
    }
    half = nodes * 4
    policies: list[dict[str, Any]] = [
        {"kind": "Queue", "metadata": {"name": "a"}, "spec": {"guarantee": {GPU: 0}}},
        *(
            {
                "kind": "Queue",
                "metadata": {"name": q},
                "spec": {"guarantee": {GPU: half}, "preemption": {"reclaim": "Any"}},
            }
            for q in ("b", "c")
        ),
        {
            "kind": "SchedulingPolicy",
            "metadata": {"name": "default"},
            "spec": {"preemption": limits},
        },
    ]
    jobs: list[dict[str, Any]] = []
    used = 0
    for i in range(draw(st.integers(nodes, nodes * 3))):
        gpus = draw(st.sampled_from([1, 2, 4, 8, 8, 8]))
        if used + gpus > nodes * 8:
            break
        used += gpus
        jobs.append(
            {
                "name": f"a{i}",
                "queue": "a",
                "pod": {GPU: gpus},
                "priority": draw(st.integers(0, 2)),
                "admitted": "east",
                "at": draw(st.integers(0, 119)),
                "preemptions": draw(st.integers(0, 4)),
            }
        )
    for q in ("b", "c"):
        jobs.append(
            {
                "name": f"{q}-job",
                "queue": q,
                "pods": draw(st.integers(1, 2)),
                "pod": {GPU: 8},
                "at": 119,
            }
        )
    scenario = {
        "policies": policies,
        "clusters": [
            {"name": "east", "nodes": nodes, "node": {GPU: 8, "cpu": 64, "memory": "512Gi"}}
        ],
        "jobs": jobs,
    }
    return scenario, limits


@SETTINGS
@given(case=limited())
def test_no_victim_is_protected_by_the_limits(
    case: tuple[dict[str, Any], dict[str, Any]], load: Callable[..., PolicySet]
) -> None:
    scenario, limits = case
    result = run_cycle(builders.snapshot(scenario), load(scenario["policies"]), builders.NOW)
    victims = [d for d in result.decisions if d.action == Action.PREEMPT]
    assert len(victims) <= limits["maxVictimsPerCycle"]
    specs = {f"team/{j['name']}-{j.get('kind', 'PyTorchJob').lower()}": j for j in scenario["jobs"]}
    runtime = {"1m": 60, "30m": 1800, "90m": 5400}[limits["minRuntime"]]
    for d in victims:
        spec = specs[d.binding]
        assert spec.get("preemptions", 0) < limits["maxPerJob"], d.binding
        admitted = builders.EPOCH + dt.timedelta(minutes=float(spec.get("at", 0)))
        assert (builders.NOW - admitted).total_seconds() >= runtime, d.binding


@st.composite
def waiting(draw: st.DrawFn) -> tuple[dict[str, Any], int]:
    """Queues with jobs queued between 5 hours and a minute ago on a part-used cluster, and
    ``spec.reservations`` with ``after: 2h`` and a drawn ``max``."""
    scenario = draw(scenarios())
    most = draw(st.integers(1, 3))
    documents = [d for d in scenario["policies"] if d["kind"] != "SchedulingPolicy"]
    documents.append(
        {
            "kind": "SchedulingPolicy",
            "metadata": {"name": "default"},
            "spec": {"reservations": {"after": "2h", "max": most}},
        }
    )
    for job in scenario["jobs"]:
        if not job.get("admitted"):
            job["at"] = draw(st.integers(-180, 119))
    return {**scenario, "policies": documents}, most


@SETTINGS
@given(case=waiting())
def test_reservations_go_to_long_waiters_at_most_one_per_queue(
    case: tuple[dict[str, Any], int], load: Callable[..., PolicySet]
) -> None:
    scenario, most = case
    result = run_cycle(builders.snapshot(scenario), load(scenario["policies"]), builders.NOW)
    reserved = [d for d in result.decisions if d.reason == Reason.RESERVED]
    assert len(reserved) <= most
    assert len({d.queue for d in reserved}) == len(reserved)
    specs = {f"team/{j['name']}-{j.get('kind', 'PyTorchJob').lower()}": j for j in scenario["jobs"]}
    for d in reserved:
        queued = builders.EPOCH + dt.timedelta(minutes=float(specs[d.binding].get("at", 0)))
        assert (builders.NOW - queued).total_seconds() >= 7200, d.binding
    for d in result.decisions:
        if d.reason == Reason.RESERVED_FOR:
            assert reserved, "held back with no reservation held"
