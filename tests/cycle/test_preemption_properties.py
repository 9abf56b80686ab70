"""Who may be a preemption victim, checked on every Preempt decision (issue 22), and the limit of
one preemption search per queue per cycle.

- Within the queue (``withinQueue: LowerPriority``): every victim of the preemptor's own queue
  has a strictly lower priority than the preemptor; an equal priority is never enough.
- Reclaim (docs/scheduling-cycle.md, "Reclaim"): a victim of another queue belongs to a queue
  that borrows, above its guarantee, a resource the preemptor is short of (its quota shortfall;
  when only room is short, a resource it asks for), and its queue keeps its guarantee of those
  resources once this preemptor's victims are gone; the preemptor fits its own guarantee in them.

The within-queue oracle reads priorities from the scenario. The reclaim oracle needs the quota
as it was when the preemptor searched (earlier admissions and preemptors of the cycle count, the
victims of earlier searches do not: they are leaving): a watching cycle
records, before each search, every queue's usage and the preemptor's shortfall, and the rule is
checked against those, independently of engine/cycle/preemption/victims.py.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
import yaml
from hypothesis import example, given

from engine.cycle import Cycle
from engine.cycle.jobs.model import PendingJob
from engine.cycle.model import CycleResult
from engine.cycle.quota.tree import QuotaNode
from engine.cycle.reasons import Action, Reason
from engine.policy.policyset import PolicySet, load_policy_set
from tests.cycle import builders
from tests.cycle.test_properties import SETTINGS, apply_preemptions, scenarios, table

GPU, CPU = "nvidia.com/gpu", "cpu"
GPU_NODE = {GPU: 8, CPU: 64, "memory": "512Gi"}


@dataclass(frozen=True)
class Search:
    """What the quota was when a job searched victims and found them."""

    queue: str
    demand: Mapping[str, int]
    short: Mapping[str, int]  # its quota shortfall
    needs: tuple[str, ...]  # the quota's resources it asks for
    usage: Mapping[str, Mapping[str, int]]  # queue → usage
    guarantee: Mapping[str, Mapping[str, int]]  # queue → guarantee


class Watching(Cycle):
    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.searches: dict[str, Search] = {}

    def _preempt(self, job: PendingJob, leaf: QuotaNode, why: str) -> bool:
        quota = self.quota
        # the victims of earlier searches are leaving: the quota is judged without them
        demand = {admitted.ref: admitted.demand for admitted in self.admitted}
        leaving = [
            (quota.nodes[d.queue], demand[d.binding])
            for d in self.decisions
            if d.action == Action.PREEMPT and d.queue in quota.nodes
        ]
        for node, amount in leaving:
            quota.remove(node, amount)
        try:
            seen = Search(
                leaf.name,
                dict(job.demand),
                quota.deficit(leaf, job.demand),
                tuple(r for r in quota.resources if job.demand.get(r, 0)),
                {name: dict(node.total) for name, node in quota.nodes.items()},
                {name: dict(node.guarantee) for name, node in quota.nodes.items()},
            )
        finally:
            for node, amount in leaving:
                quota.add(node, amount)
        found = super()._preempt(job, leaf, why)
        if found:
            self.searches[job.ref] = seen
        return found


@pytest.fixture(scope="module")
def load(tmp_path_factory: pytest.TempPathFactory) -> Any:
    cache: dict[str, PolicySet] = {}

    def loader(documents: Sequence[Mapping[str, Any]]) -> PolicySet:
        key = yaml.safe_dump(list(documents))
        if key not in cache:
            folder = tmp_path_factory.mktemp("policies")
            for i, doc in enumerate(documents):
                text = yaml.safe_dump({"apiVersion": "fleetgate.io/v1alpha1", **doc})
                (folder / f"{i:02}.yaml").write_text(text)
            cache[key] = load_policy_set([folder])
        return cache[key]

    return loader


def queue(name: str, **spec: Any) -> dict[str, Any]:
    return {"kind": "Queue", "metadata": {"name": name}, "spec": spec}


def watch(scenario: Mapping[str, Any], policies: PolicySet) -> tuple[Watching, CycleResult]:
    cycle = Watching(builders.snapshot(scenario), policies, builders.NOW)
    return cycle, cycle.run()


def ref(spec: Mapping[str, Any]) -> str:
    return f"team/{spec['name']}-{spec.get('kind', 'PyTorchJob').lower()}"


# --- within the queue --------------------------------------------------------------------------
EQUAL_PRIORITY = {
    "policies": [queue("q0", preemption={"withinQueue": "LowerPriority"})],
    "clusters": [{"name": "c0", "nodes": 1, "node": GPU_NODE}],
    "jobs": [
        {"name": "running", "queue": "q0", "priority": 1, "pod": {GPU: 8}, "admitted": "c0"},
        {"name": "same", "queue": "q0", "priority": 1, "pod": {GPU: 8}, "at": 1},
    ],
}
"""The only node runs a job of the same priority as the waiting one: no preemption."""

EQUAL_PRIORITY_FOR_QUOTA = {
    "policies": [
        queue("q0", max={GPU: 16}, preemption={"withinQueue": "LowerPriority"}),
    ],
    "clusters": [{"name": "c0", "nodes": 4, "node": GPU_NODE}],
    "jobs": [
        {"name": "low", "queue": "q0", "priority": 0, "pod": {GPU: 8}, "admitted": "c0"},
        {"name": "same", "queue": "q0", "priority": 1, "pod": {GPU: 8}, "admitted": "c0"},
        {"name": "waiting", "queue": "q0", "priority": 1, "pods": 2, "pod": {GPU: 8}, "at": 1},
    ],
}
"""q0 is at its max of 16 GPUs; the waiting priority-1 job needs 16 more: the priority-0 job
frees 8, the priority-1 one may not be taken, so nothing is preempted."""

EQUAL_PRIORITY_WHILE_RECLAIMING = {
    "policies": [
        queue(
            "a",
            guarantee={GPU: 16},
            preemption={"withinQueue": "LowerPriority", "reclaim": "Any"},
        ),
        queue("b", guarantee={GPU: 16}),
    ],
    "clusters": [{"name": "c0", "nodes": 4, "node": GPU_NODE}],
    "jobs": [
        {"name": "same", "queue": "a", "priority": 1, "pod": {GPU: 8}, "admitted": "c0"},
        {
            "name": "whole",
            "queue": "b",
            "priority": 0,
            "pods": 3,
            "pod": {GPU: 8},
            "admitted": "c0",
        },
        {"name": "new", "queue": "a", "priority": 1, "pod": {GPU: 8}, "at": 1},
    ],
}
"""b borrows 8 GPUs of a's guarantee in one 24-GPU job, which reclaim may not take (b would fall
below its guarantee); a's own running job has the waiting job's priority: no victim at all."""


@SETTINGS
@given(scenario=scenarios(preemptive=True))
@example(scenario=EQUAL_PRIORITY)
@example(scenario=EQUAL_PRIORITY_FOR_QUOTA)
@example(scenario=EQUAL_PRIORITY_WHILE_RECLAIMING)
def test_within_queue_victims_have_a_strictly_lower_priority(
    scenario: dict[str, Any], load: Any
) -> None:
    _, result = watch(scenario, load(scenario["policies"]))
    jobs = {ref(spec): spec for spec in scenario["jobs"]}
    problems = []
    for d in result.decisions:
        if d.action != Action.PREEMPT:
            continue
        victim, preemptor = jobs[d.binding], jobs[d.preemptor]
        if victim["queue"] == preemptor["queue"] and victim["priority"] >= preemptor["priority"]:
            problems.append(
                f"{d.binding} (priority {victim['priority']}) is preempted for {d.preemptor} "
                f"(priority {preemptor['priority']}) of the same queue {victim['queue']}"
            )
    assert not problems, "\n".join(problems) + "\n" + table(result)


# --- reclaim -----------------------------------------------------------------------------------
BORROWS_WHAT_IT_IS_NOT_SHORT_OF = {
    "policies": [
        queue("a", guarantee={GPU: 16, CPU: 16}, preemption={"reclaim": "Any"}),
        queue("b", guarantee={GPU: 16, CPU: 16}),
        queue("d", guarantee={GPU: 0, CPU: 16}),
    ],
    "clusters": [{"name": "c0", "nodes": 4, "node": GPU_NODE}],
    "jobs": [
        {"name": "b1", "queue": "b", "priority": 0, "pod": {GPU: 8, CPU: 40}, "admitted": "c0"},
        {"name": "b2", "queue": "b", "priority": 0, "pod": {GPU: 8, CPU: 40}, "admitted": "c0"},
        {"name": "d1", "queue": "d", "priority": 1, "pod": {GPU: 8, CPU: 1}, "admitted": "c0"},
        {"name": "mine", "queue": "a", "priority": 0, "pods": 2, "pod": {GPU: 8, CPU: 1}},
    ],
}
"""32 GPUs, 16 of them guaranteed to a, 16 to b. b uses its 16 GPUs and borrows cpu; d borrows
8 GPUs of a's guarantee. a's job of 16 GPUs is short of 8 GPUs of quota (and of room): d's job
is reclaimed, not one of b's, whose lower priority does not matter as b borrows no GPUs."""

RECLAIM_KEEPS_THE_GUARANTEE = {
    "policies": [
        queue("a", guarantee={GPU: 16}, preemption={"reclaim": "Any"}),
        queue("b", guarantee={GPU: 16}),
        queue("x", guarantee={GPU: 0}),
    ],
    "clusters": [{"name": "c0", "nodes": 4, "node": GPU_NODE}],
    "jobs": [
        {"name": "b1", "queue": "b", "priority": 0, "pod": {GPU: 8}, "admitted": "c0"},
        {"name": "b2", "queue": "b", "priority": 0, "pod": {GPU: 8}, "admitted": "c0"},
        {"name": "b3", "queue": "b", "priority": 0, "pod": {GPU: 8}, "admitted": "c0"},
        {"name": "x1", "queue": "x", "priority": 1, "pod": {GPU: 8}, "admitted": "c0"},
        {"name": "mine", "queue": "a", "priority": 0, "pods": 2, "pod": {GPU: 8}},
    ],
}
"""The fleet's 32 GPUs are all used: b borrows 8, x 8. a's 16-GPU job reclaims one job of b (b
keeps its 16) and x's, though b's other jobs have the lower priority."""


SECOND_RECLAIM = {
    "policies": [
        queue("a", guarantee={GPU: 22}),
        queue("big", priority=1, guarantee={GPU: 8}, preemption={"reclaim": "Any"}),
        queue("small", guarantee={GPU: 8}, preemption={"reclaim": "Any"}),
    ],
    "clusters": [{"name": "c0", "nodes": 4, "node": GPU_NODE, "models": False}],
    "jobs": [
        *(
            {"name": f"a{i}", "queue": "a", "priority": 0, "pod": {GPU: 1}, "admitted": "c0"}
            for i in range(32)
        ),
        {"name": "big", "queue": "big", "priority": 0, "pod": {GPU: 8}, "at": 1},
        {"name": "small", "queue": "small", "priority": 0, "pod": {GPU: 3}, "at": 1},
    ],
}
"""a runs 32 one-GPU jobs on the fleet's 32 GPUs, 10 above its guarantee. ``big`` (the higher
queue priority: it goes first) reclaims 8 of them; once they have left, a runs 24, so ``small``
may take only 2 more of them, not the 3 it needs: it waits."""


def reclaim_problems(victim: Any, preemptor: str, seen: Search, taken: Mapping[str, int]) -> list:
    """Why ``victim`` (a Preempt decision of another queue) breaks the reclaim rule."""
    owner = victim.queue
    usage, guarantee = seen.usage.get(owner, {}), seen.guarantee.get(owner, {})
    contested = sorted(seen.short) or list(seen.needs)
    borrowed = [r for r in contested if usage.get(r, 0) > guarantee.get(r, 0)]
    problems = []
    if not borrowed:
        problems.append(
            f"{victim.binding} is reclaimed for {preemptor}, but queue {owner} borrows none of "
            f"{contested} (uses {usage}, guaranteed {guarantee})"
        )
    mine, own = seen.usage.get(seen.queue, {}), seen.guarantee.get(seen.queue, {})
    for r in contested:
        if mine.get(r, 0) + seen.demand.get(r, 0) > own.get(r, 0):
            problems.append(f"{preemptor} reclaims, but does not fit its guarantee of {r}")
    for r in contested if seen.short else borrowed:  # the resources the owner keeps
        if taken.get(r, 0) and usage.get(r, 0) - taken[r] < guarantee.get(r, 0):
            problems.append(
                f"reclaiming {victim.binding} for {preemptor} takes queue {owner} below its "
                f"guarantee of {r}: {usage.get(r, 0)} - {taken[r]} < {guarantee.get(r, 0)}"
            )
    return problems


@SETTINGS
@given(scenario=scenarios(preemptive=True))
@example(scenario=BORROWS_WHAT_IT_IS_NOT_SHORT_OF)
@example(scenario=RECLAIM_KEEPS_THE_GUARANTEE)
@example(scenario=SECOND_RECLAIM)
def test_reclaim_victims_borrow_what_the_preemptor_is_short_of(
    scenario: dict[str, Any], load: Any
) -> None:
    cycle, result = watch(scenario, load(scenario["policies"]))
    demand = {job.ref: job.demand for job in cycle.admitted}
    problems = []
    for d in result.decisions:
        if d.reason != Reason.PREEMPTING:
            continue
        seen = cycle.searches[d.binding]
        victims = [v for v in result.decisions if v.preemptor == d.binding]
        taken: dict[str, dict[str, int]] = {}  # queue → what this preemptor takes from it
        for v in victims:
            for r, amount in demand[v.binding].items():
                taken.setdefault(v.queue, {})[r] = taken.get(v.queue, {}).get(r, 0) + amount
        for v in victims:
            if v.queue != d.queue:
                problems += reclaim_problems(v, d.binding, seen, taken[v.queue])
    assert not problems, "\n".join(problems) + "\n" + table(result)


# --- one search per queue per cycle ------------------------------------------------------------
TWO_PREEMPTORS = {
    "policies": [queue("q", preemption={"withinQueue": "LowerPriority"})],
    "clusters": [{"name": "east", "nodes": 2, "node": GPU_NODE}],
    "jobs": [
        {"name": "low1", "queue": "q", "priority": 0, "pod": {GPU: 8}, "admitted": "east", "at": 0},
        {"name": "low2", "queue": "q", "priority": 0, "pod": {GPU: 8}, "admitted": "east", "at": 1},
        {"name": "first", "queue": "q", "priority": 5, "pod": {GPU: 8}, "at": 2},
        {"name": "second", "queue": "q", "priority": 5, "pod": {GPU: 8}, "at": 3},
    ],
}
"""Both nodes run priority-0 jobs; two priority-5 jobs of the same queue could each preempt one.
As in Kueue (one head per ClusterQueue per cycle), only the first searches this cycle."""

NO_VICTIMS_SPENDS_NO_SEARCH = {
    "policies": [queue("q", max={GPU: 16}, preemption={"withinQueue": "LowerPriority"})],
    "clusters": [{"name": "east", "nodes": 4, "node": GPU_NODE}],
    "jobs": [
        {"name": "low", "queue": "q", "priority": 0, "pod": {GPU: 8}, "admitted": "east"},
        {"name": "same", "queue": "q", "priority": 1, "pod": {GPU: 8}, "admitted": "east"},
        {"name": "big", "queue": "q", "priority": 1, "pods": 2, "pod": {GPU: 8}, "at": 1},
        {"name": "small", "queue": "q", "priority": 1, "pod": {GPU: 8}, "at": 2},
    ],
}
"""q is at its max of 16 GPUs. ``big`` needs 16 more, and the one lower-priority job frees 8:
hopeless, so it spends no search, and ``small`` (8 GPUs) preempts ``low``."""


def decisions(result: CycleResult) -> dict[str, tuple[str, str]]:
    return {d.workload.split("/")[-1]: (str(d.action), str(d.reason)) for d in result.decisions}


def test_a_queue_searches_victims_for_one_job_per_cycle(load: Any) -> None:
    scenario = copy.deepcopy(TWO_PREEMPTORS)
    policies = load(scenario["policies"])
    _, first = watch(scenario, policies)
    got = decisions(first)
    assert got["first"] == ("Pending", "Preempting"), table(first)
    assert got["second"] == ("Pending", "NoClusterFits"), table(first)
    assert sorted(n for n, (a, _) in got.items() if a == "Preempt") == ["low2"], table(first)
    # the victim is gone and ``first`` runs where it was nominated: ``second`` searches now
    apply_preemptions(scenario, first, settled=True)
    _, again = watch(scenario, policies)
    got = decisions(again)
    assert got["second"] == ("Pending", "Preempting"), table(again)
    assert [n for n, (a, _) in got.items() if a == "Preempt"] == ["low1"], table(again)


def test_a_job_without_enough_victims_leaves_the_search_to_the_next(load: Any) -> None:
    scenario = copy.deepcopy(NO_VICTIMS_SPENDS_NO_SEARCH)
    _, result = watch(scenario, load(scenario["policies"]))
    got = decisions(result)
    assert got["big"] == ("Pending", "WaitingForQuota"), table(result)
    assert got["small"] == ("Pending", "Preempting"), table(result)
    assert got["low"] == ("Preempt", "Preempted"), table(result)
    assert "same" not in got, table(result)
