"""Whole-group preemption (issue 21): preemption frees room for a group as a whole or not at all.

A group that does not fit at its turn searches victims under the same rules as a single job
(lower priority within its queue, reclaim from queues borrowing its guarantee); victims are
preempted only when, with them gone, the group's minimum places at once. Running members of
another group are never victims. Fleets are built with ``tests/cycle/test_groups.py``'s helpers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from engine import annotations as ann
from engine.cycle import run_cycle
from engine.cycle.model import Decision
from engine.cycle.reasons import Action, Reason
from tests.cycle import builders
from tests.cycle.test_groups import (  # noqa: F401 (fixture)
    QUEUES,
    by_name,
    gpu_clusters,
    loader,
    member,
    snapshot,
)


@pytest.fixture(scope="module")
def policies_of(loader: Callable) -> Callable:  # noqa: F811 (the fixture imported above)
    return loader


LOWER = {
    "kind": "Queue",
    "metadata": {"name": "q"},
    "spec": {"preemption": {"withinQueue": "LowerPriority"}},
}
MIN_MEMBER = {
    "kind": "SchedulingPolicy",
    "metadata": {"name": "default"},
    "spec": {"gang": {"admitOn": "MinMember"}},
}


def lone(name: str, where: str, priority: int, *, queue: str = "q", at: int = 0) -> dict[str, Any]:
    """A running job of one 8-GPU pod, in no group."""
    spec = {"name": name, "queue": queue, "pod": {"nvidia.com/gpu": 8}, "admitted": where}
    return {**spec, "priority": priority, "at": at}


def urgent(name: str, group: str, size: int, **extra: Any) -> dict[str, Any]:
    return member(name, group, size, priority=100, at=10, **extra)


def run(
    policies_of: Callable, clusters: list[dict[str, Any]], jobs: list[dict[str, Any]], policies: Any
) -> dict[str, Decision]:
    scenario = {"clusters": clusters, "jobs": jobs}
    return by_name(run_cycle(snapshot(scenario), policies_of(policies), builders.NOW))


def preempted(decisions: dict[str, Decision]) -> set[str]:
    return {name for name, d in decisions.items() if d.action == Action.PREEMPT}


def test_a_high_priority_group_preempts_lower_priority_jobs_to_fit_whole(
    policies_of: Callable,
) -> None:
    running = [lone("low1", "east", 0), lone("low2", "west", 0), lone("high", "north", 200)]
    group = [urgent("a", "g", 2), urgent("b", "g", 2)]
    clusters = gpu_clusters(east=1, west=1, north=1)
    decisions = run(policies_of, clusters, [*running, *group], [LOWER, QUEUES[1]])
    assert preempted(decisions) == {"low1", "low2"}
    assert {decisions[n].reason for n in "ab"} == {Reason.PREEMPTING}
    assert {decisions[n].action for n in "ab"} == {Action.PENDING}
    nominated = {decisions[n].clusters[0].name for n in "ab"}
    assert nominated == {"east", "west"}  # each member whole on a cluster of its own
    victims = ("team/low1-pytorchjob", "team/low2-pytorchjob")
    assert all(sorted(decisions[n].victims) == list(victims) for n in "ab")
    assert decisions["low1"].preemptor in {"team/a-pytorchjob", "team/b-pytorchjob"}
    assert "high" not in decisions
    # once the victims are gone, the next cycle admits the group whole
    decisions = run(policies_of, clusters, [running[2], *group], [LOWER, QUEUES[1]])
    assert {decisions[n].action for n in "ab"} == {Action.ADMIT}


def test_a_group_preemption_could_fit_only_partly_preempts_nobody(policies_of: Callable) -> None:
    group = [urgent("a", "g", 2), urgent("b", "g", 2)]
    clusters = gpu_clusters(east=1, west=1)
    # west's job has a higher priority than the group: only one member could get room
    running = [lone("low", "east", 0), lone("high", "west", 200)]
    decisions = run(policies_of, clusters, [*running, *group], [LOWER, QUEUES[1]])
    assert preempted(decisions) == set()
    assert {decisions[n].reason for n in "ab"} == {Reason.NO_CLUSTER_FITS}
    assert decisions["a"].message == decisions["b"].message
    assert "0 of 2 members fit at once, 2 needed" in decisions["a"].message
    # with west's job of a lower priority too, both are taken
    running = [lone("low", "east", 0), lone("high", "west", 50)]
    decisions = run(policies_of, clusters, [*running, *group], [LOWER, QUEUES[1]])
    assert preempted(decisions) == {"low", "high"}


def test_a_group_never_takes_a_strict_part_of_another_group(policies_of: Callable) -> None:
    # h1 and h2 (a running group of two, priority 0) are the lowest-priority jobs; x runs alone
    other = {"annotations": {ann.GROUP_MIN: "2"}, "priority": 0}
    running = [
        member("h1", "h", 2, admitted="east", **other),
        member("h2", "h", 2, admitted="west", **other),
        lone("x", "north", 50),
    ]
    clusters = gpu_clusters(east=1, west=1, north=1)
    one_is_enough = {"annotations": {ann.GROUP_MIN: "1"}}
    group = [urgent("a", "g", 2, **one_is_enough), urgent("b", "g", 2, **one_is_enough)]
    decisions = run(policies_of, clusters, [*running, *group], [LOWER, QUEUES[1]])
    assert preempted(decisions) == {"x"}
    assert {decisions[n].reason for n in "ab"} == {Reason.PREEMPTING}
    nominated = [d.clusters[0].name for n in "ab" if (d := decisions[n]).clusters]
    assert nominated == ["north"]  # the minimum, one member, nominated where x leaves
    # needing both members at once, the group would need h1 or h2: it preempts nobody
    group = [urgent("a", "g", 2), urgent("b", "g", 2)]
    decisions = run(policies_of, clusters, [*running, *group], [LOWER, QUEUES[1]])
    assert preempted(decisions) == set()
    assert {decisions[n].reason for n in "ab"} == {Reason.NO_CLUSTER_FITS}


def test_a_group_reclaims_its_guarantee_from_a_borrowing_queue(policies_of: Callable) -> None:
    policies = [
        {"kind": "Queue", "metadata": {"name": "a"}, "spec": {"guarantee": {"nvidia.com/gpu": 16}}},
        {
            "kind": "Queue",
            "metadata": {"name": "b"},
            "spec": {"guarantee": {"nvidia.com/gpu": 16}, "preemption": {"reclaim": "Any"}},
        },
    ]
    # a borrows 8 of b's guarantee; b's group of two 8-GPU members finds 8 GPUs of quota
    running = [
        lone("a1", "east", 10, queue="a", at=1),
        lone("a2", "east", 0, queue="a", at=2),
        lone("a3", "east", 10, queue="a", at=3),
    ]
    group = [{**member(n, "g", 2, at=10), "queue": "b"} for n in ("m1", "m2")]
    decisions = run(policies_of, gpu_clusters(east=4), [*running, *group], policies)
    assert preempted(decisions) == {"a2"}  # the lowest priority; a keeps its guarantee
    assert "queue a borrows above its guarantee; queue b reclaims it" in decisions["a2"].message
    assert {decisions[n].reason for n in ("m1", "m2")} == {Reason.PREEMPTING}
    assert {decisions[n].clusters[0].name for n in ("m1", "m2")} == {"east"}
    assert "insufficient unused quota" in decisions["m1"].message


def test_with_min_member_only_the_minimum_gets_room_and_quota(policies_of: Callable) -> None:
    capped = {**LOWER, "spec": {**LOWER["spec"], "max": {"nvidia.com/gpu": 24}}}
    running = [lone("low1", "east", 0, at=1), lone("low2", "east", 0, at=2)]
    minimum = {"annotations": {ann.GROUP_MIN: "2"}}
    group = [urgent(n, "g", 3, **minimum) for n in ("m1", "m2", "m3")]
    clusters = gpu_clusters(east=3)
    # quota: the minimum's 16 GPUs, 8 left under the max; room: 8 GPUs free, 16 needed
    decisions = run(policies_of, clusters, [*running, *group], [capped, QUEUES[1], MIN_MEMBER])
    assert len(preempted(decisions)) == 1
    assert {decisions[n].reason for n in ("m1", "m2", "m3")} == {Reason.PREEMPTING}
    assert sum(1 for n in ("m1", "m2", "m3") if decisions[n].clusters) == 2
    # with admitOn: All the whole group's 24 GPUs count: both running jobs go
    decisions = run(policies_of, clusters, [*running, *group], [capped, QUEUES[1]])
    assert preempted(decisions) == {"low1", "low2"}


def test_a_group_does_not_preempt_when_its_queue_does_not_allow_it(policies_of: Callable) -> None:
    running = [lone("low1", "east", 0), lone("low2", "west", 0)]
    group = [urgent("a", "g", 2), urgent("b", "g", 2)]
    decisions = run(policies_of, gpu_clusters(east=1, west=1), [*running, *group], QUEUES)
    assert preempted(decisions) == set()
    assert {decisions[n].reason for n in "ab"} == {Reason.NO_CLUSTER_FITS}
    # with it allowed, and spread on clusters, each member still gets a cluster of its own
    spread = {"annotations": {ann.GROUP_SPREAD: "clusters"}}
    group = [urgent("a", "g", 2, **spread), urgent("b", "g", 2, **spread)]
    clusters = gpu_clusters(east=2, west=1)
    running = [lone("low1", "east", 0), lone("low2", "east", 0), lone("low3", "west", 0)]
    decisions = run(policies_of, clusters, [*running, *group], [LOWER, QUEUES[1]])
    assert {decisions[n].clusters[0].name for n in "ab"} == {"east", "west"}
    assert len(preempted(decisions)) == 2 and "low3" in preempted(decisions)


def test_with_min_member_the_members_the_quota_counts_are_tried_alone(
    policies_of: Callable,
) -> None:
    # found by the property below: the most members at once (a on c0, the 2-pod big on c1, with
    # spread) hold 24 GPUs, above the max of 16, but the minimum of least demand (a and b,
    # 16 GPUs) fits too. Without this, a group could preempt for a minimum never admitted.
    capped = {"kind": "Queue", "metadata": {"name": "q"}, "spec": {"max": {"nvidia.com/gpu": 16}}}
    spread = {ann.GROUP_MIN: "2", ann.GROUP_SPREAD: "clusters"}
    group = [
        member("big", "g", 3, pods=2, at=0, annotations=spread),
        member("a", "g", 3, at=1, annotations=spread, placement={"clusters": ["c0"]}),
        member("b", "g", 3, at=2, annotations=spread),
    ]
    decisions = run(policies_of, gpu_clusters(c0=1, c1=2), group, [capped, MIN_MEMBER])
    assert {n: decisions[n].action for n in ("a", "b")} == {"a": Action.ADMIT, "b": Action.ADMIT}
    assert [decisions[n].clusters[0].name for n in ("a", "b")] == ["c0", "c1"]
    assert decisions["big"].reason == Reason.WAITING_FOR_QUOTA


def test_victims_taken_for_quota_and_not_needed_after_all_are_dropped(
    policies_of: Callable,
) -> None:
    capped = {**LOWER, "spec": {**LOWER["spec"], "max": {"nvidia.com/gpu": 32}}}
    running = [
        lone("small", "east", 0),
        {**lone("big", "east", 1), "pods": 2},
        lone("top", "west", 200),
    ]
    # room for both members now (a node free on each cluster), but the queue is at its max:
    # small (taken first, lowest priority) frees 8 GPUs of 16 short, big frees all 16
    group = [urgent("a", "g", 2), urgent("b", "g", 2)]
    decisions = run(policies_of, gpu_clusters(east=4, west=2), [*running, *group], [capped])
    assert preempted(decisions) == {"big"}
    assert {decisions[n].reason for n in "ab"} == {Reason.PREEMPTING}
    assert "queue q max 32 nvidia.com/gpu: 32 in use" in decisions["a"].message
