"""The bounds that narrow the preemption search (engine/cycle/preemption/search.py, victims.py) and
what they rest on in capacity.py.

- Room per pod shape: after ``release(groups)`` the nodes hold exactly ``room_freed(groups,
  shape)`` more pods of a shape, and ``node_deficits`` names exactly the pod groups the nodes
  lack room for, with how many pods they are short.
- The node bound: a cluster whose victims, all released, never free a node big enough is not
  tried, so a job reaches a cluster past the first ``EXAMINED`` by name whose victim does.
- Pruning is exact: skipping clusters that cannot rank before the best found (``least_rank``)
  never changes the victims ``choose`` picks.
- The quota side tries at most ``TRIED`` candidates (``could_clear``): a shortfall only the
  ``TRIED + 1``-th candidate could clear leaves the job waiting for quota, nothing preempted.
- What a queue's own lower-priority jobs hold (``VictimIndex.below``, which rules out a
  within-queue search that could never cover its shortfall) is their demand summed, however
  many were taken before.
- A cluster where no victim may be taken gets no bound (it is not ranked) when the job lacks
  room there, found from the queues that run jobs there; in a search that also reclaims, a
  cluster where only the queue's own lower-priority jobs run still has them.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from engine.cycle import Cycle
from engine.cycle.jobs.model import AdmittedJob, PodGroup
from engine.cycle.placement.capacity import ClusterState
from engine.cycle.preemption import ranking
from engine.cycle.preemption import search as preemption
from engine.cycle.preemption.bounds import could_clear
from engine.cycle.preemption.ranking import EXAMINED, Preemption
from engine.cycle.preemption.search import TRIED
from engine.cycle.preemption.victims import VictimIndex
from engine.cycle.reasons import Reason
from engine.policy.policyset import PolicySet
from tests.cycle import builders
from tests.cycle.test_capacity_cache import PODS, view
from tests.cycle.test_preemption_limits import (
    GPU,
    assert_preempting,
    assert_waits,
    cycle,
    load,
    queue,
    ref,
    table,
)
from tests.cycle.test_properties import keep_running_jobs_within_capacity


# --- 1. room per pod shape ---------------------------------------------------------------------
def shaped(a: int, b: int) -> dict[str, int]:
    return {"a": a, "b": b, PODS: 1}


SHAPE = st.tuples(st.integers(0, 4), st.integers(0, 4))
GROUPS = st.lists(st.tuples(SHAPE, st.integers(1, 6)), min_size=1, max_size=3).map(
    lambda groups: tuple(PodGroup(shaped(*s), n) for s, n in groups)
)


def counted(nodes: Mapping[tuple[int, int], int], shape: tuple[int, int]) -> int:
    """Pods of ``shape`` the nodes hold, counted node group by node group."""
    return sum(
        n * min(free // need for free, need in zip(f, shape, strict=True) if need)
        for f, n in nodes.items()
    )


@settings(max_examples=200, deadline=None, database=None)
@given(
    nodes=st.dictionaries(SHAPE, st.integers(1, 4), min_size=1, max_size=5),
    groups=GROUPS,
    asked=st.lists(SHAPE.filter(any), min_size=1, max_size=3),
)
def test_room_freed_is_the_room_a_release_gives_and_deficits_the_room_lacking(
    nodes: dict[tuple[int, int], int],
    groups: tuple[PodGroup, ...],
    asked: list[tuple[int, int]],
) -> None:
    """On nodes of two modelled resources (free totals unbounded, so ``max_pods`` is the room
    on the nodes), releasing pod groups adds ``room_freed`` pods of every shape asked; the
    deficits and the room are checked against a count of the nodes themselves."""
    state = ClusterState(view(nodes=1))
    state.model, state.nodes = ("a", "b"), dict(nodes)
    state.free = dict.fromkeys(("a", "b", PODS), 10**9)
    state.allocatable = dict(state.free)
    short = [
        ((g.requests["a"], g.requests["b"]), g.count - room)
        for g in groups
        if (g.requests["a"] or g.requests["b"])
        and g.count > (room := counted(nodes, (g.requests["a"], g.requests["b"])))
    ]
    assert state.node_deficits(groups) == short
    before = [state.max_pods(shaped(*s)) for s in asked]
    assert before == [counted(nodes, s) for s in asked]
    freed = [state.room_freed(groups, s) for s in asked]
    for s, f in zip(asked, freed, strict=True):
        assert state.rooms_freed([groups, groups[:1]], s) == [f, state.room_freed(groups[:1], s)]
    state.release(groups)
    after = [state.max_pods(shaped(*s)) for s in asked]
    assert after == [b + f for b, f in zip(before, freed, strict=True)]
    assert after == [counted(state.nodes, s) for s in asked]
    assert not state.node_deficits(groups)  # each pod's room came back as a node of its own


# --- 2. the node bound reaches past the first EXAMINED clusters --------------------------------
NODE = {GPU: 8, "cpu": 96, "memory": "512Gi"}
URGENT = {"name": "urgent", "queue": "q", "priority": 100, "pod": {GPU: 8, "cpu": 8}, "at": 60}
SHAPE_POLICIES = [queue("q", preemption={"withinQueue": "LowerPriority"}), queue("other")]


def spread(name: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Two 8-GPU nodes, each with one GPU held by a job of queue "other" (60 CPUs: one a node),
    the other 14 GPUs by one priority-1 job of q with 14 one-GPU pods: 14 GPUs by totals, one
    victim, but never 8 free on one node."""
    admitted = {"admitted": name, "at": 1}
    blockers = [
        {"name": f"{name}-other{i}", "queue": "other", "priority": 0, "pod": {GPU: 1, "cpu": 60}}
        | admitted
        for i in range(2)
    ]
    small = {"name": f"{name}-small", "queue": "q", "priority": 1, "pods": 14}
    small |= {"pod": {GPU: 1, "cpu": 1}} | admitted
    return {"name": name, "nodes": 2, "node": NODE}, [*blockers, small]


def test_a_job_reaches_the_one_cluster_past_the_first_examined_whose_victim_frees_a_node(
    tmp_path: Path,
) -> None:
    """More than ``EXAMINED`` clusters come first by name, each with a lower-priority victim
    whose 1-GPU pods cover the 8-GPU job by totals; only "z", last, has a victim with an 8-GPU
    pod. That victim, and only it, is preempted."""
    names = [f"c{i}" for i in range(EXAMINED + 1)]
    clusters, jobs = [], []
    for name in names:
        c, js = spread(name)
        clusters.append(c)
        jobs += js
    z_low = {"name": "z-low", "queue": "q", "priority": 5, "pod": {GPU: 8, "cpu": 8}}
    scenario = {
        "clusters": [*clusters, {"name": "z", "nodes": 1, "node": NODE}],
        "jobs": [*jobs, z_low | {"admitted": "z", "at": 2}, URGENT],
    }
    result = cycle(scenario, load(SHAPE_POLICIES, tmp_path / "p"))
    assert_preempting(result, "urgent", {ref("z-low")}, "z", 1)


# --- 3. pruning by least_rank never changes the choice -----------------------------------------
def never_prunes(*_: object) -> tuple[int, int, int, str]:
    return (0, -(10**9), -(10**12), "")


Chosen = tuple[str, tuple[str, ...], frozenset[str]] | None


def chosen(scenario: Mapping[str, Any], policies: PolicySet, prune: bool) -> list[Chosen]:
    """What each ``choose`` of one cycle returned (cluster, victims, reclaimed)."""
    found: list[Chosen] = []
    choose = ranking.choose

    def recording(*args: Any) -> Preemption | None:
        p = choose(*args)
        found.append(None if p is None else (p.cluster, tuple(v.ref for v in p.victims), p.reclaim))
        return p

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ranking, "choose", recording)
        if not prune:
            mp.setattr(preemption.Search, "least_rank", never_prunes)
        cycle(scenario, policies)
    return found


@pytest.fixture(scope="module")
def quota_policies(tmp_path_factory: pytest.TempPathFactory) -> dict[int | None, PolicySet]:
    """Queue q (lower-priority preemption), with no max or a max of GPUs."""
    return {
        most: load(
            [queue("q", preemption={"withinQueue": "LowerPriority"}, **limit)],
            tmp_path_factory.mktemp("policies") / "p",
        )
        for most, limit in [(None, {}), *((m, {"max": {GPU: m}}) for m in (8, 16, 24))]
    }


@st.composite
def small_fleets(draw: st.DrawFn) -> dict[str, Any]:
    """2–4 clusters of 1–2 8-GPU nodes, each node (nearly) filled by jobs of q of priority
    -3–3, and "urgent" (priority 10, 1–2 pods of 2–8 GPUs) pending in q."""
    clusters, jobs = [], []
    for c in range(draw(st.integers(2, 4))):
        name, nodes = f"c{c}", draw(st.integers(1, 2))
        clusters.append({"name": name, "nodes": nodes, "node": NODE, "used": 0})
        for _ in range(nodes):
            left = 8 - draw(st.sampled_from([0, 0, 1, 2, 4]))
            while left:
                gpus = draw(st.sampled_from([g for g in (1, 2, 4, 8) if g <= left]))
                pods = draw(st.sampled_from([1, 2] if gpus * 2 <= left else [1]))
                left -= gpus * pods
                jobs.append(
                    {"name": f"run{len(jobs)}", "queue": "q", "at": len(jobs), "admitted": name}
                    | {"priority": draw(st.integers(-3, 3)), "pods": pods, "pod": {GPU: gpus}}
                )
    urgent = {"name": "urgent", "queue": "q", "priority": 10, "at": 60}
    urgent |= {"pods": draw(st.integers(1, 2)), "pod": {GPU: draw(st.sampled_from([2, 4, 8]))}}
    scenario = {"clusters": clusters, "jobs": [*jobs, urgent]}
    keep_running_jobs_within_capacity(scenario)  # a 2-pod job may not fit where it was drawn
    return scenario


def whole_nodes(pods: int, *placed: tuple[str, int, tuple[int, ...]]) -> dict[str, Any]:
    """(cluster, 8-GPU nodes, priorities): a node held by an 8-GPU job of q per priority, and
    "urgent" wanting ``pods`` 8-GPU pods."""
    jobs = [
        {"name": f"on-{c}-{k}", "queue": "q", "priority": p, "admitted": c, "pod": {GPU: 8}}
        | {"at": i + k / 10}
        for i, (c, _, priorities) in enumerate(placed)
        for k, p in enumerate(priorities)
    ]
    urgent = {"name": "urgent", "queue": "q", "priority": 10, "at": 60, "pods": pods}
    clusters = [{"name": c, "nodes": n, "node": NODE} for c, n, _ in placed]
    return {"clusters": clusters, "jobs": [*jobs, urgent | {"pod": {GPU: 8}}]}


def halves(priority: int, *clusters: str) -> dict[str, Any]:
    """Clusters without resource models (totals only), each full with two jobs of q of
    ``priority``: one holds the GPUs, one the CPUs. "urgent" needs some of both, so two
    victims on one cluster, and no single one, make room; later clusters get lower
    priorities (negative: the default priority is the PriorityClass value, which can be)."""
    node = {GPU: 8, "cpu": 64}
    jobs = []
    for i, c in enumerate(clusters):
        for name, pod in (("gpus", {GPU: 8, "cpu": 1}), ("cpus", {"cpu": 63})):
            jobs.append(
                {"name": f"{name}-{c}", "queue": "q", "priority": priority - 5 * i}
                | {"admitted": c, "pod": pod, "at": len(jobs)}
            )
    urgent = {"name": "urgent", "queue": "q", "priority": 10, "at": 60, "pod": {GPU: 8, "cpu": 8}}
    clusters_ = [{"name": c, "nodes": 1, "node": node, "models": False} for c in clusters]
    return {"clusters": clusters_, "jobs": [*jobs, urgent]}


# each won by a cluster tried after a first best (see the test below)
EXAMPLES = {
    # two victims on each cluster, c1's of lower (negative) priority, none of them enough alone
    "negative": {"scenario": halves(-5, "c0", "c1"), "most": None},
    # c1's lone victim frees exactly the node the job lacks, with a lower priority (``alone``)
    "alone": {"scenario": whole_nodes(1, ("c0", 1, (2,)), ("c1", 1, (1,))), "most": None},
    # two victims a cluster, none of them enough alone
    "pairs": {"scenario": whole_nodes(2, ("c0", 2, (2, 2)), ("c1", 2, (1, 1))), "most": None},
    # quota short by 8: c1 has room, and the priority-0 job on c2 clears the quota for it
    "quota": {
        "scenario": whole_nodes(1, ("c0", 1, (3,)), ("c1", 2, (3,)), ("c2", 1, (0,))),
        "most": 24,
    },
}


@settings(max_examples=60, deadline=None, database=None)
@given(scenario=small_fleets(), most=st.sampled_from([None, None, 8, 16, 24]))
@example(**EXAMPLES["alone"])
@example(**EXAMPLES["pairs"])
@example(**EXAMPLES["quota"])
@example(**EXAMPLES["negative"])
def test_skipping_clusters_that_cannot_rank_first_never_changes_the_victims(
    scenario: dict[str, Any], most: int | None, quota_policies: dict[int | None, PolicySet]
) -> None:
    """Every ``choose`` of a cycle returns the same cluster and victims as with ``least_rank``
    never ruling a cluster out."""
    policies = quota_policies[most]
    assert chosen(scenario, policies, prune=True) == chosen(scenario, policies, prune=False)


@pytest.mark.parametrize(
    ("example", "cluster", "victims"),
    [
        ("alone", "c1", {"on-c1-0"}),
        ("pairs", "c1", {"on-c1-0", "on-c1-1"}),
        ("quota", "c1", {"on-c2-0"}),
        ("negative", "c1", {"gpus-c1", "cpus-c1"}),
    ],
)
def test_the_examples_are_won_by_a_cluster_tried_after_the_first_best(
    example: str, cluster: str, victims: set[str], quota_policies: dict[int | None, PolicySet]
) -> None:
    """The examples above test pruning: c0, tried first, finds victims, and a later cluster
    must still be tried, for it finds better ones."""
    scenario, most = EXAMPLES[example]["scenario"], EXAMPLES[example]["most"]
    [(found, chosen_victims, _)] = chosen(scenario, quota_policies[most], prune=True)
    assert (found, set(chosen_victims)) == (cluster, {ref(v) for v in victims})
    no_c1 = {**scenario, "clusters": [c for c in scenario["clusters"] if c["name"] != cluster]}
    assert chosen(no_c1, quota_policies[most], prune=True)  # another cluster would do


# --- 4. the quota side tries at most TRIED candidates ------------------------------------------
@dataclass(frozen=True, slots=True)
class Held:
    demand: Mapping[str, int]
    mapped: Any = None


def candidates(*demands: Mapping[str, int], queue: str = "q") -> Sequence[AdmittedJob]:
    mapped = SimpleNamespace(queue=queue)
    return cast(Sequence[AdmittedJob], [Held(d, mapped) for d in demands])


def test_could_clear_counts_only_the_first_tried_candidates_holding_a_resource() -> None:
    ones = candidates(*[{GPU: 1}] * 5)
    assert could_clear({GPU: 5}, ones, 5)
    assert not could_clear({GPU: 5}, ones, 4)  # a fifth candidate would be needed
    assert not could_clear({GPU: 6}, ones, 10)  # all of them hold too little
    assert could_clear({}, ones, 0)


def test_could_clear_skips_candidates_that_hold_none_of_a_resource() -> None:
    """Candidates holding no GPUs do not use up the GPU tries, and a resource held only by
    candidates after more than ``tried`` others is still within reach."""
    mixed = candidates(*[{"cpu": 1}] * 6, {GPU: 2}, {"cpu": 1}, {GPU: 2})
    assert could_clear({GPU: 4, "cpu": 2}, mixed, 2)
    assert not could_clear({GPU: 4}, mixed, 1)
    assert not could_clear({GPU: 1, "cpu": 8}, mixed, 10)  # 7 CPUs held in all


def test_could_clear_counts_no_more_from_a_queue_than_taking_its_jobs_may_free() -> None:
    """A reclaimed queue gives up no more than it has above its guarantee: past that, its
    candidates count for nothing, though they still use up tries."""
    borrower = candidates(*[{GPU: 4}] * 3, queue="borrower")
    own = candidates({GPU: 4}, queue="q")
    assert could_clear({GPU: 12}, borrower, 10)
    assert not could_clear({GPU: 12}, borrower, 10, {"borrower": {GPU: 8}})
    assert could_clear({GPU: 12}, [*borrower, *own], 10, {"borrower": {GPU: 8}})
    assert not could_clear({GPU: 12}, [*borrower, *own], 3, {"borrower": {GPU: 8}})
    assert not could_clear({GPU: 4}, borrower, 10, {"borrower": {GPU: 0}})  # at its guarantee


def quota_scenario(tiny: int) -> dict[str, Any]:
    """Queue q at its CPU max: ``tiny`` 1-CPU jobs of priority 1, then "big" (priority 50, 7
    whole 64-CPU nodes) in victim order. "urgent" needs 7 free nodes (room it has) and 448
    CPUs of quota: only "big" covers it, the ``tiny + 1``-th candidate."""
    admitted = {"queue": "q", "admitted": "east"}
    smalls = [
        {"name": f"s{i:03}", "priority": 1, "pod": {"cpu": 1}, "at": 1 + i / 1000} | admitted
        for i in range(tiny)
    ]
    big = {"name": "big", "priority": 50, "pods": 7, "pod": {"cpu": 64}, "at": 0} | admitted
    urgent = {"name": "urgent", "queue": "q", "priority": 100, "pods": 7, "pod": {"cpu": 64}}
    return {
        "clusters": [{"name": "east", "nodes": 21, "node": {"cpu": 64, "memory": "512Gi"}}],
        "jobs": [*smalls, big, urgent | {"at": 60}],
    }


@pytest.mark.parametrize("tiny", [TRIED - 1, TRIED])
def test_a_quota_shortfall_only_a_candidate_past_tried_covers_waits(
    tiny: int, tmp_path: Path
) -> None:
    """With "big" the ``TRIED``-th candidate holding CPUs, urgent preempts it alone (the tiny
    ones taken on the way are dropped); one place later, urgent waits for quota and nothing
    is preempted, though "big" would still cover the shortfall."""
    policies = load(
        [queue("q", max={"cpu": tiny + 448}, preemption={"withinQueue": "LowerPriority"})],
        tmp_path / "p",
    )
    result = cycle(quota_scenario(tiny), policies)
    if tiny < TRIED:
        assert_preempting(result, "urgent", {ref("big")}, "east", 7)
    else:
        d = assert_waits(result, "urgent", {Reason.WAITING_FOR_QUOTA})
        assert d.message.startswith(f"queue q max {tiny + 448} cpu"), table(result)


# --- 5. what a queue's lower-priority jobs hold -----------------------------------------------
def indexed(queue: str, priority: int, demand: Mapping[str, int], i: int) -> AdmittedJob:
    """An admitted job as the victim index reads it (``victim_order`` and the indexes)."""
    return cast(
        AdmittedJob,
        SimpleNamespace(
            ref=f"ns/v{i}",
            mapped=SimpleNamespace(queue=queue, priority=priority),
            admitted_at=dt.datetime(2026, 1, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=i),
            binding=SimpleNamespace(uid=f"u{i}"),
            usage={"east": dict(demand)},
            demand=dict(demand),
        ),
    )


HELD = st.fixed_dictionaries({}, optional={GPU: st.integers(0, 8), "cpu": st.integers(0, 64)})


@settings(max_examples=200, deadline=None, database=None)
@given(
    jobs=st.lists(st.tuples(st.sampled_from("qr"), st.integers(-3, 3), HELD), max_size=12),
    rounds=st.lists(st.tuples(st.sets(st.integers(0, 11)), st.integers(-4, 4)), max_size=4),
)
def test_below_sums_the_queues_untaken_jobs_of_lower_priority(
    jobs: list[tuple[str, int, dict[str, int]]], rounds: list[tuple[set[int], int]]
) -> None:
    victims = [indexed(q, p, held, i) for i, (q, p, held) in enumerate(jobs)]
    index = VictimIndex(victims)
    for taking, priority in rounds:
        for name in "qr":
            expected: dict[str, int] = {}
            for v in victims:
                mine = v.mapped.queue == name and v.mapped.priority < priority
                if mine and v.ref not in index.taken:
                    for r, amount in v.demand.items():
                        expected[r] = expected.get(r, 0) + amount
            found = index.below(name, priority)
            assert {r: a for r, a in found.items() if a} == {r: a for r, a in expected.items() if a}
        fresh = [i for i in taking if i < len(victims) and victims[i].ref not in index.taken]
        index.take(victims[i] for i in fresh)


# --- 6. clusters where no victim may be taken --------------------------------------------------
NOBODY_POLICIES = [
    queue("a", guarantee={GPU: 16}, preemption={"reclaim": "Any", "withinQueue": "LowerPriority"}),
    queue("b", guarantee={GPU: 4}),
    queue("c", guarantee={GPU: 20}),
]


def test_no_bound_where_no_victim_may_be_taken_and_own_jobs_count_beside_reclaim(
    tmp_path: Path,
) -> None:
    """a-urgent (8 GPUs on one node, within a's guarantee: a search that reclaims from b,
    which borrows) fits no cluster now. On "east" only b's two 1-GPU jobs may be taken (b-big
    would take b below its guarantee), too little room; on "frag" 8 GPUs are free, 4 a node,
    held by c, which does not borrow: no victim, no bound. On "west", where no queue that
    lends to a runs anything, a's own lower-priority a-low is taken."""
    one_node = {GPU: 8, "cpu": 8}
    jobs = [
        {"name": "b-big", "queue": "b", "priority": 0, "pod": one_node, "admitted": "east"},
        *(
            {"name": f"b-small{i}", "queue": "b", "priority": 0, "pod": {GPU: 1, "cpu": 1}}
            | {"admitted": "east", "at": 1 + i}
            for i in range(2)
        ),
        {"name": "c-east", "queue": "c", "priority": 0, "pod": {GPU: 2, "cpu": 60}}
        | {"admitted": "east"},
        {"name": "c-frag", "queue": "c", "priority": 0, "pods": 2, "pod": {GPU: 4, "cpu": 60}}
        | {"admitted": "frag"},
        {"name": "a-low", "queue": "a", "priority": 1, "pod": one_node, "admitted": "west"},
        {"name": "a-urgent", "queue": "a", "priority": 100, "pod": one_node, "at": 60},
    ]
    clusters = [{"name": n, "nodes": k, "node": NODE} for n, k in (("east", 2), ("frag", 2))]
    scenario = {"clusters": [*clusters, {"name": "west", "nodes": 1, "node": NODE}], "jobs": jobs}
    policies = load(NOBODY_POLICIES, tmp_path / "p")
    assert_preempting(cycle(scenario, policies), "a-urgent", {ref("a-low")}, "west", 1)

    state = Cycle(builders.snapshot(scenario), policies, builders.NOW)
    job = next(j for j in state.pending if j.ref == ref("a-urgent"))
    leaf, a = state.quota.nodes["a"], policies.queue("a")
    assert a is not None
    search = preemption.Search(job, leaf, a, state.quota, state.victims)
    assert search.owners == {"b"}
    assert search.lower_bound(state.clusters["west"]) == 1
    assert search.lower_bound(state.clusters["frag"]) is None  # room in total, not on a node
