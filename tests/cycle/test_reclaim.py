"""Reclaim with jobs that ask for several resources: a borrower keeps its guarantee only of
the resources the preemptor is short of.

The property test builds fleets where the answer can be counted by hand: nodes of 8 GPUs,
one-pod 8-GPU jobs (one node each), cpu and memory plentiful in quota and on the nodes, so the
preemptor is short of GPUs only. Borrower ``a`` runs ``running`` jobs, each with its own cpu
and memory, against a cpu and memory guarantee that may be far above or below what it uses;
``b`` (reclaim Any) asks for ``pods`` nodes within its GPU guarantee. A reclaim is possible
exactly when the free nodes are too few and ``a`` can give up the missing nodes' jobs while
keeping its GPU guarantee.

b's pods ask for no more cpu and memory than any of a's: the node model gives a released pod's
room back as a node of its own (it does not know which node the pod ran on), so only a victim
pod at least as large as the preemptor's makes room for it.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.cycle.reasons import Action, Reason
from tests.cycle.test_preemption_limits import GPU, GPU_NODE, cycle, load, preempted, queue, ref


@st.composite
def fleets(draw: st.DrawFn) -> dict:
    nodes = draw(st.integers(2, 6))
    running = draw(st.integers(1, nodes))
    a_nodes = draw(st.integers(0, min(running, nodes - 1)))  # a's GPU guarantee, in nodes
    pods = draw(st.integers(1, nodes - a_nodes))  # b's job stays within b's GPU guarantee
    jobs = [
        {
            "name": f"a{i}",
            "queue": "a",
            "priority": draw(st.integers(0, 3)),
            "at": i,
            "pod": {
                GPU: 8,
                "cpu": draw(st.integers(1, 16)),
                "memory": f"{draw(st.integers(1, 64))}Gi",
            },
            "admitted": "east",
        }
        for i in range(running)
    ]
    jobs.append(
        {"name": "b-job", "queue": "b", "pods": pods, "at": 10}
        | {"pod": {GPU: 8, "cpu": 1, "memory": "1Gi"}}
    )
    a_cpu = draw(st.integers(0, 2 * sum(j["pod"]["cpu"] for j in jobs[:-1])))
    return {
        "nodes": nodes,
        "running": running,
        "a_nodes": a_nodes,
        "pods": pods,
        "a_guarantee": {GPU: 8 * a_nodes, "cpu": a_cpu, "memory": "64Gi"},
        "jobs": jobs,
    }


@settings(max_examples=80, deadline=None)
@given(fleets())
def test_a_reclaim_the_rule_allows_is_made(fleet: dict) -> None:
    nodes, running, a_nodes, pods = (
        fleet["nodes"],
        fleet["running"],
        fleet["a_nodes"],
        fleet["pods"],
    )
    policies = [
        queue("a", guarantee=fleet["a_guarantee"]),
        queue(
            "b",
            guarantee={GPU: 8 * (nodes - a_nodes), "cpu": 1000, "memory": "4Ti"},
            preemption={"reclaim": "Any"},
        ),
    ]
    scenario = {
        "clusters": [{"name": "east", "nodes": nodes, "node": GPU_NODE}],
        "jobs": fleet["jobs"],
    }
    with tempfile.TemporaryDirectory() as folder:
        result = cycle(scenario, load(policies, Path(folder) / "p"))
    job = result.decision(ref("b-job"))
    assert job is not None
    missing = pods - (nodes - running)  # nodes b lacks
    if missing <= 0:
        assert job.action == Action.ADMIT, job
    elif running - missing >= a_nodes:  # a keeps its GPU guarantee without `missing` jobs
        assert (job.action, job.reason) == (Action.PENDING, Reason.PREEMPTING), job
        victims = preempted(result)
        assert len(victims) == missing and set(victims.values()) == {ref("b-job")}
        assert set(job.victims) == set(victims)
    else:
        assert job.action == Action.PENDING and job.reason != Reason.PREEMPTING, job
        assert not preempted(result)
