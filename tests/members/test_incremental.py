"""What a member keeps up to date as pods bind and free equals what its nodes and jobs say."""

from __future__ import annotations

import datetime as dt
from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.members import ClusterSpec, MemberCluster, NodeGroup, Phase
from engine.members.grades import allocatable_modelings
from engine.members.status import resource_models
from engine.resources import Resources
from tests.members.builders import GI, GPU, T0, at, job

actions = st.lists(
    st.one_of(
        st.tuples(
            st.just("submit"),
            st.integers(1, 5),  # pods
            st.sampled_from([0, 1, 2, 4, 8]),  # GPUs per pod
            st.sampled_from([0.25, 0.5, 1, 8, 48]),  # cores per pod: Fractions too
            st.booleans(),  # gang
            st.integers(0, 3),  # min member
            st.integers(1, 30),  # minutes
        ),
        st.tuples(st.just("step"), st.integers(0, 20)),
        st.tuples(st.just("fail"), st.integers(0, 30)),
        st.tuples(st.just("remove"), st.integers(0, 30)),
    ),
    max_size=40,
)


def mixed_member() -> MemberCluster:
    """Two node shapes, one with a fractional cpu amount."""
    groups = (
        NodeGroup.of(2, {"cpu": 96, "memory": 1024 * GI, GPU: 8}),
        NodeGroup.of(1, {"cpu": Fraction(95, 2), "memory": 512 * GI, GPU: 4}),
    )
    return MemberCluster(ClusterSpec("mixed", nodes=groups), T0)


@settings(max_examples=150, deadline=None)
@given(actions)
def test_kept_totals_equal_the_sums_over_nodes_and_pods(script) -> None:  # type: ignore[no-untyped-def]
    member = mixed_member()
    models = tuple(sorted(resource_models(member), key=lambda m: m.grade))
    now, submitted, requests = 0.0, [], {}
    for action in script:
        if action[0] == "submit":
            _, pods, gpus, cpu, gang, min_member, minutes = action
            key = f"j{len(submitted)}"
            spec = job(key, pods_=pods, gpus=gpus, cpu=cpu, gang=gang, minutes=minutes,
                       min_member=min_member)  # fmt: skip
            member.submit(spec, at(now))
            submitted.append(key)
            requests[key] = spec.groups[0].requests + {"pods": 1}
        elif action[0] == "step":
            now += action[1]
            member.step(at(now))
        elif submitted:
            key = submitted[action[1] % len(submitted)]
            if action[0] == "fail" and member.job_state(key) is not None:
                member.fail(key, at(now))
            elif action[0] == "remove":
                member.remove(key)
        nodes = member.nodes()
        assert member.allocatable() == Resources.sum(n.allocatable for n in nodes)
        used = ({k: v - n.free.get_amount(k) for k, v in n.allocatable.items()} for n in nodes)
        assert member.allocated() == Resources.sum(used)
        waiting = []
        for key in member.job_keys():
            state = member.job_state(key)
            if state is not None and state.phase in (Phase.PENDING, Phase.RUNNING):
                waiting.append(requests[key].scale(state.pods_total - state.pods_bound))
        assert member.allocating() == Resources.sum(waiting)
        free = [n.free for n in nodes]
        assert member.allocatable_modelings(models) == allocatable_modelings(models, free)


def test_a_node_view_changes_with_its_free_amounts() -> None:
    member = mixed_member()
    before = member.nodes()
    assert member.nodes() == before
    member.submit(job("a", gpus=8), T0)
    member.step(T0 + dt.timedelta(seconds=1))
    after = member.nodes()
    assert after[0].free.get_amount(GPU) == 0 and after[1:] == before[1:]
