"""Invariants under any sequence of submissions, steps, faults and removals."""

from __future__ import annotations

from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.members import MemberCluster, Phase
from tests.members.builders import at, gpu_member, job

actions = st.lists(
    st.one_of(
        st.tuples(
            st.just("submit"),
            st.integers(1, 4),  # pods
            st.sampled_from([0, 1, 2, 4, 8]),  # GPUs per pod
            st.sampled_from([1, 8, 48]),  # cores per pod
            st.booleans(),  # gang
            st.integers(1, 30),  # minutes
        ),
        st.tuples(st.just("step"), st.integers(0, 20)),
        st.tuples(st.just("fail"), st.integers(0, 30)),
        st.tuples(st.just("remove"), st.integers(0, 30)),
    ),
    max_size=40,
)


@settings(max_examples=150, deadline=None)
@given(actions)
def test_nodes_never_overcommit_and_allocated_plus_free_is_allocatable(script):
    member = gpu_member(nodes=3)
    now, submitted, needed = 0.0, [], {}
    for action in script:
        if action[0] == "submit":
            _, pods, gpus, cpu, gang, minutes = action
            key = f"j{len(submitted)}"
            spec = job(key, pods_=pods, gpus=gpus, cpu=cpu, gang=gang, minutes=minutes)
            member.submit(spec, at(now))
            submitted.append(key)
            if gang:
                needed[key] = spec.needed
        elif action[0] == "step":
            now += action[1]
            member.step(at(now))
        elif submitted:
            key = submitted[action[1] % len(submitted)]
            if action[0] == "fail" and member.job_state(key) is not None:
                member.fail(key, at(now))
            elif action[0] == "remove":
                member.remove(key)
        check(member, needed)


def check(member: MemberCluster, needed: dict[str, int]) -> None:
    nodes = member.nodes()
    for node in nodes:
        for name, amount in node.allocatable.items():
            assert 0 <= node.free.get_amount(name) <= amount
    allocatable, allocated = member.allocatable(), member.allocated()
    free = {k: sum((n.free.get_amount(k) for n in nodes), Fraction(0)) for k in allocatable}
    assert {k: allocated.get_amount(k) + free[k] for k in allocatable} == dict(allocatable)
    for key in member.job_keys():
        state = member.job_state(key)
        if state.phase in (Phase.SUCCEEDED, Phase.FAILED):
            assert state.pods_bound == 0
        if state.phase is Phase.RUNNING:
            assert state.started_at is not None
        if key in needed:  # a gang: all of its minimum bound, or none
            assert state.pods_bound == 0 or state.pods_bound >= needed[key]
