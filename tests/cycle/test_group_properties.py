"""Properties of co-admission groups on random fleets (issue 21).

Random clusters of 8-GPU nodes, one to three groups of two to four members (some members not
created yet, some already running, some limited to a few clusters, spread or not, a minimum
below the size or not) competing with each other and with jobs in no group, under a queue
``max`` and either ``gang.admitOn``. Whatever the fleet:

* no cycle admits a strict subset of a group below its minimum (counting members already
  running): groups competing for the same clusters never end up both half-admitted;
* no cluster is over-committed by what the cycle admits, and spread groups use distinct
  clusters;
* every member gets a decision, and the members of a group that is not admitted all get the
  same reason and message.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import annotations as ann
from engine.cycle import run_cycle
from engine.cycle.model import Decision
from engine.cycle.reasons import Action, Reason
from tests.cycle import builders
from tests.cycle.test_groups import loader, member, snapshot  # noqa: F401 (fixture)


@pytest.fixture(scope="module")
def policies_of(loader: Callable) -> Callable:  # noqa: F811 (the fixture imported above)
    return loader


SETTINGS = settings(max_examples=60, deadline=None)
NODE = {"nvidia.com/gpu": 8, "cpu": 64, "memory": "512Gi"}


@st.composite
def fleets(draw: st.DrawFn) -> dict[str, Any]:
    clusters = [
        {"name": f"c{i}", "nodes": draw(st.integers(1, 4)), "node": NODE}
        for i in range(draw(st.integers(2, 4)))
    ]
    names = [c["name"] for c in clusters]
    jobs: list[dict[str, Any]] = []
    groups: dict[str, dict[str, Any]] = {}
    for g in range(draw(st.integers(1, 3))):
        size = draw(st.integers(2, 4))
        minimum = draw(st.integers(1, size))
        spread = draw(st.booleans())
        annotations = {ann.GROUP_MIN: str(minimum)}
        if spread:
            annotations[ann.GROUP_SPREAD] = "clusters"
        present = size - (1 if draw(st.integers(0, 5)) == 0 else 0)  # now and then one missing
        groups[f"g{g}"] = {"size": size, "min": minimum, "spread": spread, "members": []}
        for m in range(present):
            name = f"g{g}m{m}"
            extra: dict[str, Any] = {"at": draw(st.integers(0, 30)), "annotations": annotations}
            if draw(st.integers(0, 3)) == 0:
                extra["placement"] = {
                    "clusters": draw(st.lists(st.sampled_from(names), min_size=1, unique=True))
                }
            if m == 0 and draw(st.integers(0, 4)) == 0:
                extra["admitted"] = draw(st.sampled_from(names))
            jobs.append(member(name, f"g{g}", size, pods=draw(st.integers(1, 3)), **extra))
            groups[f"g{g}"]["members"].append(name)
    for s in range(draw(st.integers(0, 3))):
        pods = draw(st.integers(1, 3))
        at = draw(st.integers(0, 30))
        jobs.append(
            {"name": f"s{s}", "queue": "q", "pods": pods, "pod": {"nvidia.com/gpu": 8}, "at": at}
        )
    keep_running_within_capacity(clusters, jobs)
    policies = [
        {
            "kind": "Queue",
            "metadata": {"name": "q"},
            "spec": {"max": {"nvidia.com/gpu": 8 * draw(st.integers(2, 16))}},
        },
        {
            "kind": "SchedulingPolicy",
            "metadata": {"name": "default"},
            "spec": {"gang": {"admitOn": draw(st.sampled_from(["All", "MinMember"]))}},
        },
    ]
    return {"clusters": clusters, "jobs": jobs, "groups": groups, "policies": policies}


def keep_running_within_capacity(
    clusters: list[dict[str, Any]], jobs: list[dict[str, Any]]
) -> None:
    """A running member that does not fit its cluster's nodes is made pending again."""
    nodes = {c["name"]: c["nodes"] for c in clusters}
    for job in jobs:
        where = job.get("admitted")
        if where is not None:
            if job["pods"] <= nodes[where]:
                nodes[where] -= job["pods"]
            else:
                del job["admitted"]


def run(fleet: dict[str, Any], policies_of: Callable) -> dict[str, Any]:
    built = snapshot({"clusters": fleet["clusters"], "jobs": fleet["jobs"]})
    result = run_cycle(built, policies_of(fleet["policies"]), builders.NOW)
    return {d.workload.split("/")[-1]: d for d in result.decisions}


def admits(decision: Decision | None) -> bool:
    return decision is not None and decision.action == Action.ADMIT


@SETTINGS
@given(fleet=fleets())
def test_no_cycle_admits_a_group_below_its_minimum(
    fleet: dict[str, Any], policies_of: Callable
) -> None:
    decisions = run(fleet, policies_of)
    jobs = {j["name"]: j for j in fleet["jobs"]}
    for name, group in fleet["groups"].items():
        running = [m for m in group["members"] if "admitted" in jobs[m]]
        admitted = [m for m in group["members"] if admits(decisions.get(m))]
        if len(group["members"]) < group["size"]:
            assert not admitted, f"{name}: admitted {admitted} while a member is missing"
        if admitted:
            assert len(admitted) + len(running) >= group["min"], (
                f"{name}: admitted {admitted} (+{len(running)} running) below its minimum "
                f"{group['min']}: {[decisions[m].message for m in admitted]}"
            )


@SETTINGS
@given(fleet=fleets())
def test_groups_never_over_commit_and_spread_uses_distinct_clusters(
    fleet: dict[str, Any], policies_of: Callable
) -> None:
    decisions = run(fleet, policies_of)
    jobs = {j["name"]: j for j in fleet["jobs"]}
    free = {c["name"]: c["nodes"] for c in fleet["clusters"]}
    for job in jobs.values():
        if "admitted" in job:
            free[job["admitted"]] -= job["pods"]
    taken: Counter[str] = Counter()
    for name, d in decisions.items():
        if d.action == Action.ADMIT:
            (where,) = d.clusters
            taken[where.name] += jobs[name]["pods"]
    assert all(taken[c] <= free[c] for c in free), (taken, free)
    for name, group in fleet["groups"].items():
        if not group["spread"]:
            continue
        used = [
            decisions[m].clusters[0].name if admits(decisions.get(m)) else jobs[m].get("admitted")
            for m in group["members"]
        ]
        used = [u for u in used if u]
        assert len(used) == len(set(used)), f"{name}: spread members share a cluster: {used}"


@SETTINGS
@given(fleet=fleets())
def test_every_member_is_decided_and_a_refused_group_says_one_thing(
    fleet: dict[str, Any], policies_of: Callable
) -> None:
    decisions = run(fleet, policies_of)
    jobs = {j["name"]: j for j in fleet["jobs"]}
    for name, group in fleet["groups"].items():
        pending = [m for m in group["members"] if "admitted" not in jobs[m]]
        assert all(m in decisions for m in pending), f"{name}: a member has no decision"
        said = defaultdict(set)
        for m in pending:
            said[decisions[m].action].add((decisions[m].reason, decisions[m].message))
        if Action.ADMIT not in said and pending:
            assert len(said) == 1 and len(next(iter(said.values()))) == 1, (name, dict(said))
        for m in pending:
            group_state = decisions[m].group
            assert group_state is not None and group_state.size == group["size"]


@st.composite
def contested_fleets(draw: st.DrawFn) -> dict[str, Any]:
    """``fleets`` where groups have priorities, lone jobs of several priorities run, and the
    queue preempts lower priorities (with its ``max``, so quota as well as room may be short);
    now and then it also has a guarantee and reclaims from queue ``o``, whose jobs borrow."""
    fleet = draw(fleets())
    reclaim = draw(st.booleans())
    names = [c["name"] for c in fleet["clusters"]]
    priorities = {g: draw(st.sampled_from([0, 100, 100])) for g in fleet["groups"]}
    for job in fleet["jobs"]:
        group = next((g for g, v in fleet["groups"].items() if job["name"] in v["members"]), None)
        if group is not None:
            job["priority"] = priorities[group]
    for r in range(draw(st.integers(1, 6))):
        queue = draw(st.sampled_from(["q", "o", "o"])) if reclaim else "q"
        job = {"name": f"r{r}", "queue": queue, "pods": draw(st.integers(1, 2))}
        job.update(pod={"nvidia.com/gpu": 8}, at=draw(st.integers(0, 30)))
        job.update(
            priority=draw(st.sampled_from([0, 0, 50, 150])), admitted=draw(st.sampled_from(names))
        )
        fleet["jobs"].append(job)
    keep_running_within_capacity(fleet["clusters"], fleet["jobs"])
    queue = fleet["policies"][0]
    queue["spec"] = {**queue["spec"], "preemption": {"withinQueue": "LowerPriority"}}
    if reclaim:
        queue["spec"]["guarantee"] = {"nvidia.com/gpu": queue["spec"]["max"]["nvidia.com/gpu"]}
        queue["spec"]["preemption"]["reclaim"] = "Any"
        other = {"guarantee": {"nvidia.com/gpu": 8}}
        fleet["policies"].append({"kind": "Queue", "metadata": {"name": "o"}, "spec": other})
    return fleet


@settings(max_examples=100, deadline=None)
@given(fleet=contested_fleets())
def test_a_group_preempts_only_victims_without_which_its_minimum_places(
    fleet: dict[str, Any], policies_of: Callable
) -> None:
    decisions = run(fleet, policies_of)
    jobs = {j["name"]: j for j in fleet["jobs"]}
    members = {m for group in fleet["groups"].values() for m in group["members"]}
    victims = {n for n, d in decisions.items() if d.action == Action.PREEMPT}
    assert not victims & members, f"a running member of a group was preempted: {victims}"
    for name, group in fleet["groups"].items():
        refs = {f"team/{m}-pytorchjob" for m in group["members"]}
        taken = {n for n in victims if decisions[n].preemptor in refs}
        pending = [m for m in group["members"] if "admitted" not in jobs[m]]
        said = {decisions[m].reason for m in pending}
        if not taken:
            assert Reason.PREEMPTING not in said or len(said) == 1, (name, said)
            continue
        assert said == {Reason.PREEMPTING}, f"{name}: victims {taken} but its members say {said}"
        lowest = min(jobs[m].get("priority", 0) for m in group["members"])
        within = [v for v in taken if jobs[v]["queue"] == "q"]  # the others are reclaimed
        assert all(jobs[v].get("priority", 0) < lowest for v in within), (name, taken)
        # the next cycle, with those victims gone and no other job waiting: the minimum places
        kept = [j for j in fleet["jobs"] if j["name"] not in taken]
        kept = [j for j in kept if "admitted" in j or j["name"] in group["members"]]
        again = run({**fleet, "jobs": kept}, policies_of)
        admitted = [m for m in pending if admits(again.get(m))]
        running = len(group["members"]) - len(pending)
        assert admitted and len(admitted) + running >= group["min"], (
            f"{name}: preempted {sorted(taken)}, then admitted {admitted} (+{running} running), "
            f"minimum {group['min']}: {[again[m].message for m in pending]}"
        )
