"""ClusterState's caches never answer for a state that has changed since.

The fit answers (``fits``, ``misfit``) are kept per pod signature while the state's ``version``
is the one they were found at; the room per pod shape (``max_pods``, ``nodes_with_room``) until
``place`` or ``release``; a ``copy`` shares both until either changes. The oracle is a state
built anew and given the same changes without being asked anything in between.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import vectors
from engine.cycle.jobs.model import PodGroup
from engine.cycle.jobs.reading import pod_key
from engine.cycle.placement import nodes as nodes_of
from engine.cycle.placement.capacity import ClusterState, Misfit
from engine.cycle.placement.nodebounds import Upper
from engine.fleet.frozen import FrozenDict
from engine.fleet.model import ClusterView, ResourceModel
from tests.cycle import builders

GPU, CPU, PODS = "nvidia.com/gpu", "cpu", "pods"
NODE = {GPU: 8, CPU: 64}

Groups = tuple[PodGroup, ...]
# ("place" | "release", groups), or ("take", resource, milli): the cycle's own edit of ``free``
# when it nominates a preemptor (cycle.py ``_preempt``), which bumps ``version`` by hand
Change = tuple[Any, ...]


def view(nodes: int = 2, used: int = 0) -> ClusterView:
    return builders.cluster({"name": "east", "nodes": nodes, "node": NODE, "used": used})


def pods(*groups: tuple[int, int, int]) -> Groups:
    """(pods, GPUs per pod, CPUs per pod) per group."""
    return tuple(
        PodGroup({k: v for k, v in ((GPU, gpu * 1000), (CPU, cpu * 1000)) if v} | {PODS: 1000}, n)
        for n, gpu, cpu in groups
    )


def need(groups: Sequence[PodGroup]) -> dict[str, int]:
    return vectors.total((g.requests, g.count) for g in groups)


def change(state: ClusterState, step: Change) -> None:
    if step[0] == "place":
        state.place(step[1])
    elif step[0] == "release":
        state.release(step[1])
    else:  # as Cycle._preempt does
        _, resource, milli = step
        state.free[resource] = state.free.get(resource, 0) - milli
        state.version += 1


def replayed(cluster: ClusterView, steps: Sequence[Change]) -> ClusterState:
    """A state given ``steps`` and asked nothing before: nothing cached."""
    state = ClusterState(cluster)
    for step in steps:
        change(state, step)
    return state


def answers(state: ClusterState, groups: Groups) -> tuple[bool, Misfit | None, int, int]:
    first = groups[0].requests
    fits, misfit = state.fits(groups, need(groups)), state.misfit(groups, need(groups))
    assert fits == (misfit is None)  # misfit places the pods; fits may say no sooner
    return fits, misfit, state.max_pods(first), state.nodes_with_room(first)


def test_place_then_fits_again_sees_the_pods_placed() -> None:
    state = ClusterState(view(nodes=2))
    job = pods((2, 8, 8))
    assert state.fits(job, need(job))
    assert state.misfit(job, need(job)) is None
    assert state.nodes_with_room(job[0].requests) == 2
    state.place(pods((1, 4, 8)))
    assert not state.fits(job, need(job))
    misfit = state.misfit(job, need(job))
    assert misfit is not None
    assert misfit.message == "needs 16 nvidia.com/gpu, 12 free"
    assert state.max_pods(job[0].requests) == 1
    assert state.nodes_with_room(job[0].requests) == 1
    state.place(pods((1, 1, 1)))  # best fit: onto the node with 4 free
    misfit = state.misfit(job, need(job))
    assert misfit is not None
    assert misfit.message == "needs 16 nvidia.com/gpu, 11 free"
    assert state.max_pods(job[0].requests) == 1
    state.place(pods((1, 8, 8)))
    assert state.max_pods(job[0].requests) == 0
    assert state.nodes_with_room(job[0].requests) == 0


def test_node_shape_misfit_after_place() -> None:
    state = ClusterState(view(nodes=2))
    job = pods((2, 6, 8))
    assert state.fits(job, need(job))
    state.place(pods((1, 4, 8)))  # 12 GPUs stay free, but no longer 6 on each node
    assert not state.fits(job, need(job))
    misfit = state.misfit(job, need(job))
    assert misfit is not None
    assert misfit.node_pods == 1
    assert misfit.message.startswith("1 of 2 pods needing 8 cpu, 6 nvidia.com/gpu find no node")
    assert misfit.message.endswith("(1 such nodes free)")


def test_release_then_fits_again_sees_the_room_given_back() -> None:
    state = ClusterState(view(nodes=2, used=1))
    job = pods((2, 8, 8))
    assert not state.fits(job, need(job))
    assert state.misfit(job, need(job)) is not None
    state.release(pods((1, 8, 8)))
    assert state.fits(job, need(job))
    assert state.misfit(job, need(job)) is None
    assert state.max_pods(job[0].requests) == 2


def test_a_release_on_a_copy_leaves_the_original_as_it_was() -> None:
    state = ClusterState(view(nodes=2, used=1))
    job = pods((2, 8, 8))
    before = answers(state, job)  # cached, then shared with the copy
    trial = state.copy()
    assert answers(trial, job) == before
    trial.release(pods((1, 8, 8)))
    assert answers(trial, job)[:2] == (True, None)
    assert answers(state, job) == before
    assert answers(trial, job) != answers(state, job)


def test_a_change_to_the_original_does_not_reach_a_copy() -> None:
    state = ClusterState(view(nodes=2))
    job = pods((2, 8, 8))
    before = answers(state, job)
    trial = state.copy()
    state.place(pods((1, 8, 8)))
    assert not state.fits(job, need(job))
    assert answers(trial, job) == before


def test_a_copy_and_its_original_changed_to_the_same_version_answer_apart() -> None:
    state = ClusterState(view(nodes=2, used=1))
    job = pods((1, 8, 8))
    answers(state, job)
    trial = state.copy()
    trial.release(pods((1, 8, 8)))
    assert answers(trial, job)[:2] == (True, None)
    state.place(pods((1, 4, 8)))
    assert state.version == trial.version
    assert answers(state, job) == answers(
        replayed(view(nodes=2, used=1), [("place", pods((1, 4, 8)))]), job
    )
    assert not state.fits(job, need(job))
    assert trial.fits(job, need(job))


def test_a_direct_edit_of_free_with_a_version_bump_is_seen() -> None:
    state = ClusterState(view(nodes=2))
    job = pods((2, 8, 8))
    assert state.fits(job, need(job))
    assert state.misfit(job, need(job)) is None
    change(state, ("take", GPU, 4000))  # as Cycle._preempt nominates a preemptor
    assert not state.fits(job, need(job))
    misfit = state.misfit(job, need(job))
    assert misfit is not None
    assert misfit.message == "needs 16 nvidia.com/gpu, 12 free"


def test_the_same_requests_in_another_order_get_the_same_answer() -> None:
    state = ClusterState(view(nodes=1))
    job = pods((1, 8, 8))
    reordered = (PodGroup(dict(reversed(job[0].requests.items())), 1),)
    assert pod_key(job) != pod_key(reordered)
    assert state.fits(job, need(job))
    state.place(job)
    assert not state.fits(reordered, need(reordered))
    assert state.misfit(reordered, need(reordered)) == state.misfit(job, need(job))


def test_a_gang_of_shapes_is_placed_together() -> None:
    """Each shape alone fits the nodes, both together do not (the cheap "no" must not say
    yes; only the best-fit placement can tell)."""
    state = ClusterState(view(nodes=2))
    job = pods((2, 5, 8), (1, 6, 0))  # 16 GPUs of 16 free
    assert state.fits(job[:1], need(job[:1]))
    assert state.fits(job[1:], need(job[1:]))
    assert not state.fits(job, need(job))
    misfit = state.misfit(job, need(job))
    assert misfit is not None
    assert misfit.message == (
        "1 of 1 pods needing 6 nvidia.com/gpu find no node with room (2 such nodes free)"
    )
    state.release(pods((1, 6, 0)))  # a node of the victim's shape
    assert state.fits(job, need(job))
    assert state.misfit(job, need(job)) is None


def test_a_negative_model_minimum_gets_no_shortcut() -> None:
    """A grade whose minimum is below 0 gives nodes less than nothing free: the room per shape
    then bounds nothing, and fits must still agree with the placement misfit makes."""
    ranges = {CPU: (Fraction(0), builders.INF), GPU: (Fraction(-2), builders.INF)}
    cluster = dataclasses.replace(
        view(nodes=5),
        resource_models=(
            ResourceModel(0, FrozenDict(dict.fromkeys((CPU, GPU), (Fraction(0), Fraction(1))))),
            ResourceModel(1, FrozenDict(ranges)),
        ),
        allocatable_modelings=((0, 2), (1, 3)),
    )
    state = ClusterState(cluster)
    assert state.nodes == {(0, 0): 2, (0, -2000): 3}
    job = pods((2, 4, 0), (3, 0, 0))
    assert state.fits(job, need(job)) == (state.misfit(job, need(job)) is None)


GROUP = st.tuples(
    st.integers(1, 4), st.sampled_from([0, 1, 2, 4, 8]), st.sampled_from([0, 1, 8, 32])
)
GROUPS = st.lists(GROUP, min_size=1, max_size=3).map(lambda g: pods(*g))
CHANGE = st.one_of(
    st.tuples(st.just("place"), GROUPS),
    st.tuples(st.just("release"), GROUPS),
    st.tuples(st.just("take"), st.sampled_from([GPU, CPU]), st.integers(0, 9000)),
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    nodes=st.integers(1, 4),
    used=st.integers(0, 1),
    steps=st.lists(st.tuples(CHANGE, st.booleans(), st.booleans()), max_size=8),
    asked=st.lists(GROUPS, min_size=1, max_size=4),
)
def test_answers_are_those_of_a_state_never_asked_before(
    nodes: int, used: int, steps: list[tuple[Change, bool, bool]], asked: list[Groups]
) -> None:
    """Asked before and after a change (or only after several: the room counts catch up
    with every node change since), on the state and on trial copies (changed or not), every
    answer is what a state given the same changes from scratch gives."""
    cluster = view(nodes=nodes, used=min(used, nodes))
    state = ClusterState(cluster)
    done: list[Change] = []
    for groups in asked:
        answers(state, groups)  # warm the caches
    for step, on_copy, ask in steps:
        if not ask:  # no question until a later change
            change(state, step)
            done.append(step)
            continue
        for groups in asked:
            answers(state, groups)
        if on_copy:  # a trial copy changes; the state must not
            trial = state.copy()
            change(trial, step)
            fresh = replayed(cluster, [*done, step])
            for groups in asked:
                assert answers(trial, groups) == answers(fresh, groups)
        else:
            change(state, step)
            done.append(step)
        fresh = replayed(cluster, done)
        for groups in asked:
            assert answers(state, groups) == answers(fresh, groups)


@settings(max_examples=100, deadline=None)
@given(
    nodes=st.integers(1, 4),
    placed=st.lists(GROUP, max_size=3),
    gpu=st.sampled_from([0, 1, 2, 3, 8]),
    cpu=st.sampled_from([0, 4, 16, 64]),
    taken=st.sampled_from([0, 3000, 70000]),
)
def test_jobs_of_one_pod_shape_and_any_count_share_an_answer(
    nodes: int, placed: list[tuple[int, int, int]], gpu: int, cpu: int, taken: int
) -> None:
    """One pod shape asked with every count (largest first, then smallest first, so either
    answer can be the one kept) gets what ``misfit`` places pod by pod finds, on a state
    asked nothing before: the count that just fits, and one more, included. A zero request
    of a resource overdrawn by the cycle's own edit of ``free`` fits nowhere, as the totals
    say (0 needed > less than 0 free)."""
    cluster = view(nodes=nodes)
    steps: list[Change] = [("place", pods(g)) for g in placed] + [("take", CPU, taken)]
    requests = {GPU: gpu * 1000, CPU: cpu * 1000, PODS: 1000}  # zeros kept, as asked
    for counts in (range(20, 0, -1), range(1, 21)):
        state = replayed(cluster, steps)
        for count in counts:
            job = (PodGroup(requests, count),)
            fresh = replayed(cluster, steps)
            assert state.fits(job, need(job)) == (fresh.misfit(job, need(job)) is None)


def test_retake_undoes_a_release_on_a_trial_copy() -> None:
    """Preemption drops a victim by retaking its pods on a copy that only released: the copy
    is then the same state as one that never released them, and answers the same."""
    state = ClusterState(view(nodes=2))
    state.place(pods((2, 8, 8)))  # both nodes full of GPUs
    victim, other = pods((1, 8, 8)), pods((1, 8, 8))
    job = pods((2, 8, 8))
    trial = state.copy()
    trial.release(victim)
    trial.release(other)
    assert trial.fits(job, need(job))
    trial.retake(victim)
    fresh = state.copy()
    fresh.release(other)
    assert (trial.free, trial.nodes) == (fresh.free, fresh.nodes)
    assert not trial.fits(job, need(job))
    assert answers(trial, pods((1, 8, 8))) == answers(fresh, pods((1, 8, 8)))


def test_a_no_survives_place_but_not_release() -> None:
    """Placing only takes room away, so a "does not fit" is kept across ``place``; after a
    ``release`` the same job is asked afresh and fits."""
    state = ClusterState(view(nodes=1))
    whole = pods((1, 8, 8))
    assert state.fits(whole, need(whole))
    state.place(whole)  # a "fits" is not kept
    assert not state.fits(whole, need(whole))
    state.place(pods((1, 0, 1)))
    assert not state.fits(whole, need(whole))
    state.release(whole)
    assert state.fits(whole, need(whole))


def test_a_greedy_no_for_several_pod_groups_is_asked_again_after_place() -> None:
    """The greedy layout of several pod groups is not monotone: taking room away can make it
    pick other nodes and fit, so its "no" is not carried across ``place``."""
    state = ClusterState(view(nodes=1))
    state.model = ("a", "b")
    state.nodes = {(1000, 2000): 1, (2000, 1000): 1}
    state.free = {"a": 3000, "b": 3000, PODS: 10_000}
    state.allocatable = dict(state.free)  # a pod asking more than it could never fit
    job = (PodGroup({"a": 1000, "b": 1000, PODS: 1000}, 1), PodGroup({"b": 2000, PODS: 1000}, 1))
    assert not state.fits(job, need(job))  # (1,1) takes the (1,2) node; (0,2) finds none
    state.place((PodGroup({"a": 1000, PODS: 1000}, 1),))  # (1,2) becomes (0,2)
    assert state.fits(job, need(job))
    assert state.misfit(job, need(job)) is None


NODE_GROUPS = st.dictionaries(
    st.tuples(st.integers(0, 9), st.integers(0, 9)), st.integers(1, 4), min_size=1, max_size=6
)
POD_GROUPS = st.lists(
    st.tuples(st.integers(0, 4), st.integers(0, 4), st.integers(1, 6)), min_size=2, max_size=3
)


def two_resources(
    nodes: dict[tuple[int, int], int], groups: list[tuple[int, int, int]]
) -> tuple[ClusterState, Groups]:
    """A state whose nodes are ``nodes`` over resources a and b, and a job of ``groups``."""
    state = ClusterState(view(nodes=1))
    state.model = ("a", "b")
    state.nodes = dict(nodes)
    state.allocatable = dict.fromkeys(("a", "b", PODS), 10**9)
    return state, tuple(PodGroup({"a": a, "b": b, PODS: 1000}, n) for a, b, n in groups)


@settings(max_examples=300, deadline=None, database=None)
@given(nodes=NODE_GROUPS, groups=POD_GROUPS)
def test_room_for_all_is_a_yes_the_greedy_layout_gives_too(
    nodes: dict[tuple[int, int], int], groups: list[tuple[int, int, int]]
) -> None:
    """The cheap "yes" for several pod groups never disagrees with the greedy layout: when the
    nodes hold every pod counted at the largest request of any group, the layout places all."""
    state, job = two_resources(nodes, groups)
    if state._room_for_all(job):
        assert state._place_nodes(dict(nodes), job)[1] is None


@settings(max_examples=300, deadline=None, database=None)
@given(nodes=NODE_GROUPS, groups=POD_GROUPS)
def test_what_several_pod_groups_leave_over_is_what_the_greedy_layout_leaves(
    nodes: dict[tuple[int, int], int], groups: list[tuple[int, int, int]]
) -> None:
    """The shortcuts of ``_unplaced_groups`` (the cheap "yes", and the first group laid out
    finding only the room it has alone) give the layout's own answer: the same group, the
    same pods left over."""
    state, job = two_resources(nodes, groups)
    found = state._unplaced_groups(job)
    expected = state._place_nodes(dict(nodes), job)[1]
    assert found == expected
    if found is not None:
        assert found[0] is expected[0]  # of equal groups, the one the layout tried first


@settings(max_examples=300, deadline=None, database=None)
@given(nodes=NODE_GROUPS, groups=POD_GROUPS, one=st.booleans())
def test_maybe_room_is_the_greedy_layouts_answer(
    nodes: dict[tuple[int, int], int], groups: list[tuple[int, int, int]], one: bool
) -> None:
    """``Upper.holds`` (nodes at their grades' most) answers what laying the pods out answers,
    though it counts room instead for one pod group and tries the cheap bounds first."""
    shaped = [((a, b), PodGroup({"a": a, "b": b}, n)) for a, b, n in groups[: 1 if one else 3]]
    upper = Upper(dict(nodes), {})
    assert upper.holds(shaped) == (nodes_of.place(dict(nodes), shaped)[1] is None)
    assert upper.nodes == nodes  # asking changes nothing


@settings(max_examples=300, deadline=None, database=None)
@given(
    nodes=st.dictionaries(
        st.tuples(st.integers(-3, 9), st.integers(-3, 9)), st.integers(1, 4), min_size=1,
        max_size=8,
    ),
    groups=POD_GROUPS,
    one=st.booleans(),
    placed=st.lists(st.tuples(st.integers(0, 4), st.integers(0, 4), st.integers(1, 3)), max_size=2),
)  # fmt: skip
def test_maybe_room_counts_every_node_as_before_even_overdrawn(
    nodes: dict[tuple[int, int], int],
    groups: list[tuple[int, int, int]],
    one: bool,
    placed: list[tuple[int, int, int]],
) -> None:
    """With nodes that may have less than nothing free (a cluster's totals overdrawn) and after
    pods were laid on them, ``Upper.holds`` answers a pod group by its whole room count (which
    stops early only where no node can lower it) and several groups by the layout."""
    upper = Upper(dict(nodes), {})
    upper.take([((a, b), PodGroup({"a": a, "b": b}, n)) for a, b, n in placed])
    now = dict(upper.nodes)
    shaped = [((a, b), PodGroup({"a": a, "b": b}, n)) for a, b, n in groups[: 1 if one else 3]]
    if len(shaped) == 1:
        need, group = shaped[0]
        expected = not any(need) or nodes_of.room(now, need)[0] >= group.count
    else:
        expected = nodes_of.place(dict(now), shaped)[1] is None
    assert upper.holds(shaped) == expected
    assert upper.nodes == now


def _nodes_by_rule(
    models: Sequence[ResourceModel], modelings: Sequence[tuple[int, int]]
) -> tuple[tuple[str, ...], dict[tuple[int, ...], int]]:
    """Karmada's rule, computed afresh: a node of a grade has its grade's minimums free (the
    first grade's are 0); counts of grades no model names, or of no nodes, are left out."""
    by_grade = {m.grade: m for m in models}
    names = tuple(sorted({r for m in models for r in m.ranges}))
    nodes: dict[tuple[int, ...], int] = {}
    for grade, count in modelings:
        if grade not in by_grade or count <= 0:
            continue
        ranges = by_grade[grade].ranges
        shape = tuple(
            0 if grade == min(by_grade) or r not in ranges else int(ranges[r][0] * 1000)
            for r in names
        )
        nodes[shape] = nodes.get(shape, 0) + count
    return names, nodes


_GRADES = st.lists(
    st.fixed_dictionaries(
        {},
        optional={
            GPU: st.integers(0, 8).map(Fraction),
            CPU: st.integers(0, 128).map(lambda c: Fraction(c, 4)),
        },
    ),
    min_size=1,
    max_size=4,
)
_MODELINGS = st.lists(st.tuples(st.integers(-1, 4), st.integers(-1, 5)), max_size=6)


@given(st.lists(st.tuples(_GRADES, _MODELINGS), min_size=1, max_size=4), _MODELINGS)
@settings(max_examples=150, deadline=None)
def test_node_shapes_kept_per_models_object_match_the_rule(
    changes: list[tuple[list[dict[str, Fraction]], list[tuple[int, int]]]],
    again: list[tuple[int, int]],
) -> None:
    """``nodes.from_models`` keeps each models object's grade shapes, and the modelings move
    with every pod: each call answers as the rule does, for a new models object too (even
    one equal to an earlier one), and a caller that changes the nodes it got (ClusterState
    places pods on them) changes nothing a later call returns."""
    for lows, modelings in changes:
        models = tuple(
            ResourceModel(grade, FrozenDict({r: (lo, lo + 1) for r, lo in low.items()}))
            for grade, low in enumerate(lows)
        )
        for asked in (modelings, modelings, again):
            names, nodes = nodes_of.from_models(models, asked)
            assert (names, nodes) == _nodes_by_rule(models, asked)
            nodes[(-1,) * len(names)] = 99  # as a placement would change them
