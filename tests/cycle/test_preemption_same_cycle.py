"""Two reclaims in one cycle: the second pays only for what it needs.

A preemptor's quota is held from its decision on, on top of its victims' (they run until they
terminate), so that no later job of the cycle takes what the preemptor will need. A later
preemption search must not pay for that twice: it sees the quota as it will be once the
victims already taken have left (``ranking.search``, ``groups.preempt.attempt``). Seen on the
production-like trace: a 1-GPU job of a queue under its guarantee preempted 37 jobs in the
cycle where a 64-GPU gang had preempted 6.
"""

from __future__ import annotations

from pathlib import Path

from engine.cycle.reasons import Action, Reason
from tests.cycle.test_preemption_limits import GPU, GPU_NODE, cycle, load, preempted, queue, ref

NODES = 4  # 32 GPUs, totals only: any freed GPU is room for any pod


def _fleet(small_gpus: int) -> dict:
    running = [
        {
            "name": f"a{i}",
            "queue": "a",
            "at": i,
            "pod": {GPU: 1, "cpu": 1, "memory": "1Gi"},
            "admitted": "east",
        }
        for i in range(8 * NODES)
    ]
    pending = [
        {"name": "big", "queue": "big", "at": 100, "pod": {GPU: 8, "cpu": 1, "memory": "1Gi"}},
        {
            "name": "small",
            "queue": "small",
            "at": 100,
            "pod": {GPU: small_gpus, "cpu": 1, "memory": "1Gi"},
        },
    ]
    return {
        "clusters": [{"name": "east", "nodes": NODES, "node": GPU_NODE, "models": False}],
        "jobs": running + pending,
    }


def _policies(folder: Path, a_guarantee: int = 0):
    return load(
        [
            queue("a", guarantee={GPU: a_guarantee}),
            # a higher priority tier: its job takes its turn first
            queue("big", priority=1, guarantee={GPU: 8}, preemption={"reclaim": "Any"}),
            queue("small", guarantee={GPU: 8}, preemption={"reclaim": "Any"}),
        ],
        folder,
    )


def test_a_second_reclaim_takes_only_what_it_lacks(tmp_path: Path) -> None:
    result = cycle(_fleet(small_gpus=1), _policies(tmp_path / "p"))
    victims = preempted(result)
    big, small = result.decision(ref("big")), result.decision(ref("small"))
    assert big is not None and small is not None
    assert (big.action, big.reason) == (Action.PENDING, Reason.PREEMPTING)
    assert (small.action, small.reason) == (Action.PENDING, Reason.PREEMPTING)
    assert len(big.victims) == 8
    # once big's 8 victims have left, the fleet holds a's 24 and big's 8: one more GPU is
    # missing for small (counting big's victims again would take 9)
    assert len(small.victims) == 1, small.message
    assert sorted(victims.values()).count(ref("small")) == 1
    assert len(victims) == 9


def test_a_second_reclaim_leaves_the_borrower_its_guarantee(tmp_path: Path) -> None:
    # a keeps 22 of its GPUs: once big's 8 victims have left it runs 24, so small may take 2
    # from it, not the 3 it asks for; small waits and nothing more is preempted
    result = cycle(_fleet(small_gpus=3), _policies(tmp_path / "p", a_guarantee=22))
    victims = preempted(result)
    small = result.decision(ref("small"))
    assert small is not None
    assert small.reason != Reason.PREEMPTING, small.message
    assert set(victims.values()) == {ref("big")} and len(victims) == 8


def test_a_job_waiting_behind_held_quota_reads_no_negative_amount(tmp_path: Path) -> None:
    # big's quota is held beside its 8 leaving victims': 2 more GPUs would have to be freed
    # before small has any. Its message said "-2 available"; it says 0 and why.
    result = cycle(_fleet(small_gpus=3), _policies(tmp_path / "p", a_guarantee=22))
    small = result.decision(ref("small"))
    assert small is not None and small.reason == Reason.WAITING_FOR_QUOTA
    assert "needs 3, 0 available (guarantee 8, in use 0; 2 more would have to be freed" in (
        small.message
    )
    assert "-2" not in small.message
