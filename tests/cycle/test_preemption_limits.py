"""The limits of preemption (engine/cycle/preemption/search.py), shown on whole cycles.

- The victim cap: a job that needs exactly ``MOST_VICTIMS`` victims preempts them; one that
  needs one more waits, and nothing is preempted for it.
- Reclaim: a queue within its guarantee takes back from a borrower only what the borrower has
  above its guarantee, victims in the documented order (lowest priority, then most recent).
- Node shape: victims whose pods, even all of them, would not free a node big enough for the
  job's pod are not preempted on that cluster.

Fleets are dicts for tests/cycle/builders.py; jobs are named by their binding,
``team/<name>-pytorchjob``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from engine.cycle import run_cycle
from engine.cycle.model import CycleResult, Decision
from engine.cycle.preemption.search import MOST_VICTIMS
from engine.cycle.reasons import Action, Reason
from engine.policy.policyset import PolicySet, load_policy_set
from tests.cycle import builders

GPU = "nvidia.com/gpu"
GPU_NODE = {GPU: 8, "cpu": 64, "memory": "512Gi"}


# --- helpers -----------------------------------------------------------------------------------
def ref(name: str) -> str:
    return f"team/{name}-pytorchjob"


def queue(name: str, **spec: Any) -> dict[str, Any]:
    return {"kind": "Queue", "metadata": {"name": name}, "spec": spec}


def load(documents: Sequence[Mapping[str, Any]], folder: Path) -> PolicySet:
    folder.mkdir()
    for i, doc in enumerate(documents):
        text = yaml.safe_dump({"apiVersion": "fleetgate.io/v1alpha1", **doc})
        (folder / f"{i:02}.yaml").write_text(text)
    return load_policy_set([folder])


def cycle(scenario: Mapping[str, Any], policies: PolicySet) -> CycleResult:
    return run_cycle(builders.snapshot(scenario), policies, builders.NOW)


def decided(result: CycleResult, name: str) -> Decision:
    found = result.decision(ref(name))
    assert found is not None, f"{name}: no decision\n{table(result)}"
    return found


def preempted(result: CycleResult) -> dict[str, str]:
    """Victim binding → its preemptor, from the Preempt decisions."""
    return {d.binding: d.preemptor for d in result.decisions if d.action == Action.PREEMPT}


def table(result: CycleResult) -> str:
    return "\n".join(
        f"  {d.action:8} {d.binding:32} {d.reason:16} {list(d.victims)[:3]} {d.message[:160]}"
        for d in result.decisions
    )


def assert_preempting(
    result: CycleResult, name: str, victims: set[str], cluster: str, replicas: int
) -> Decision:
    """``name`` waits for exactly ``victims`` on ``cluster``, and each of them, only they,
    get a Preempt decision for it."""
    d = decided(result, name)
    assert (d.action, d.reason) == (Action.PENDING, Reason.PREEMPTING), table(result)
    assert set(d.victims) == victims, table(result)
    assert len(d.victims) == len(victims), "a victim is listed twice"
    assert [(c.name, c.replicas) for c in d.clusters] == [(cluster, replicas)]
    assert preempted(result) == dict.fromkeys(victims, ref(name)), table(result)
    return d


def assert_waits(result: CycleResult, name: str, reasons: set[Reason]) -> Decision:
    """``name`` waits with one of ``reasons`` and nothing at all is preempted."""
    d = decided(result, name)
    assert d.action == Action.PENDING and d.reason in reasons, table(result)
    assert not d.victims, table(result)
    assert not preempted(result), table(result)
    return d


# --- 1. the victim cap -------------------------------------------------------------------------
CAP_NODE_CPUS = 4
CAP_NODES = MOST_VICTIMS // CAP_NODE_CPUS + 2  # room for more than MOST_VICTIMS + 1 victims
CAP_SMALL = CAP_NODE_CPUS * CAP_NODES  # 1-CPU jobs that fill every node


def cap_scenario(job_pods: int) -> dict[str, Any]:
    """One cluster whose every CPU is held by a 1-CPU, priority-1 job of queue q, and "urgent"
    (priority 100, ``job_pods`` pods of 1 CPU) waiting in q."""
    smalls = [
        {"name": f"s{i:04}", "queue": "q", "priority": 1, "at": 1 + i / 100}
        | {"pod": {"cpu": 1}, "admitted": "east"}
        for i in range(CAP_SMALL)
    ]
    urgent = {"name": "urgent", "queue": "q", "priority": 100, "pods": job_pods}
    return {
        "clusters": [
            {"name": "east", "nodes": CAP_NODES, "node": {"cpu": CAP_NODE_CPUS, "memory": "16Gi"}}
        ],
        "jobs": [*smalls, urgent | {"pod": {"cpu": 1}, "at": 60}],
    }


CAP_POLICIES = [queue("q", preemption={"withinQueue": "LowerPriority"})]


def test_a_job_needing_exactly_the_most_victims_preempts_them(tmp_path: Path) -> None:
    """A job whose room takes exactly ``MOST_VICTIMS`` lower-priority jobs preempts just those,
    the most recently admitted first (all have the same priority)."""
    assert CAP_SMALL > MOST_VICTIMS + 1  # the fleet could give more than the cap
    result = cycle(cap_scenario(MOST_VICTIMS), load(CAP_POLICIES, tmp_path / "p"))
    latest = {ref(f"s{i:04}") for i in range(CAP_SMALL - MOST_VICTIMS, CAP_SMALL)}
    assert len(latest) == MOST_VICTIMS
    assert_preempting(result, "urgent", latest, "east", MOST_VICTIMS)


def test_a_job_needing_one_victim_more_than_the_most_waits(tmp_path: Path) -> None:
    """In the same fleet, a job whose room takes ``MOST_VICTIMS + 1`` jobs is not preempting:
    it waits and no job at all is preempted, though enough candidates run."""
    result = cycle(cap_scenario(MOST_VICTIMS + 1), load(CAP_POLICIES, tmp_path / "p"))
    assert_waits(result, "urgent", {Reason.NO_CLUSTER_FITS, Reason.WAITING_FOR_QUOTA})
    assert sum(d.action == Action.PREEMPT for d in result.decisions) == 0


# --- 2. reclaim across queues ------------------------------------------------------------------
RECLAIM_POLICIES = [
    queue("a", guarantee={GPU: 16}, preemption={"reclaim": "Any"}),
    queue("b", guarantee={GPU: 16}),
]


def b_job(name: str, priority: int, at: float, gpus: int = 2) -> dict[str, Any]:
    return {"name": name, "queue": "b", "priority": priority, "at": at} | {
        "pod": {GPU: gpus},
        "admitted": "east",
    }


def test_reclaim_takes_the_two_victims_the_shortfall_needs_in_victim_order(
    tmp_path: Path,
) -> None:
    """Queue a, within its guarantee, reclaims exactly the two jobs of borrower b its shortfall
    needs, lowest priority then most recent, never a job that would leave b below guarantee."""
    # 32 GPUs, a and b guaranteed 16 each. a runs 4; b runs 20 (borrowing 4) as "b-big" (6,
    # first in victim order, but taking it leaves b at 14) and seven 2-GPU jobs. 8 GPUs are
    # free; a-job (6 x 2 GPUs) brings a to exactly 16 and lacks 4 of quota and of room.
    jobs = [
        {"name": "a-run", "queue": "a", "priority": 50, "pod": {GPU: 4}, "admitted": "east"},
        b_job("b-big", priority=0, at=20, gpus=6),
        b_job("b-low", priority=1, at=1),
        b_job("b-mid-old", priority=5, at=2),
        b_job("b-mid-new", priority=5, at=7),
        *(b_job(f"b-high-{i}", priority=10, at=8 + i) for i in range(4)),
        {"name": "a-job", "queue": "a", "priority": 0, "pods": 6, "pod": {GPU: 2}, "at": 30},
    ]
    scenario = {"clusters": [{"name": "east", "nodes": 4, "node": GPU_NODE}], "jobs": jobs}
    result = cycle(scenario, load(RECLAIM_POLICIES, tmp_path / "p"))
    assert decided(result, "a-job").message.startswith("insufficient unused quota")
    victims = {ref("b-low"), ref("b-mid-new")}
    assert_preempting(result, "a-job", victims, "east", 6)
    for victim in victims:
        found = result.decision(victim)
        assert found is not None and "queue b borrows above its guarantee" in found.message
    b_usage = sum(j["pod"][GPU] for j in jobs if j["queue"] == "b" and ref(j["name"]) in victims)
    assert 20 - b_usage >= 16  # b keeps its guarantee


def test_reclaim_stops_at_the_borrowers_guarantee_when_more_room_is_needed(
    tmp_path: Path,
) -> None:
    """When the room a job lacks is more than a borrower has above its guarantee, reclaim takes
    nothing: taking only as much as b may give would not make the job fit."""
    # 5 nodes of 8 GPUs, 2 of them held outside any queue: capacity 40, so a's quota is not
    # short. b runs ten 2-GPU jobs on the other 3 nodes: 20, borrowing 4 (two of its jobs).
    # a-job (8 x 2 GPUs) finds 4 GPUs free and lacks 12 of room, six of b's jobs.
    jobs = [
        *(b_job(f"b{i}", priority=i, at=1 + i) for i in range(10)),
        {"name": "a-job", "queue": "a", "priority": 0, "pods": 8, "pod": {GPU: 2}, "at": 30},
    ]
    cluster = {"name": "east", "nodes": 5, "used": 2, "node": GPU_NODE}
    scenario = {"clusters": [cluster], "jobs": jobs}
    result = cycle(scenario, load(RECLAIM_POLICIES, tmp_path / "p"))
    assert_waits(result, "a-job", {Reason.NO_CLUSTER_FITS})


def test_no_reclaim_when_any_victim_would_take_the_borrower_below_its_guarantee(
    tmp_path: Path,
) -> None:
    """A borrower whose every job is larger than what it borrows keeps them all: the
    reclaiming job waits for quota and nothing is preempted."""
    # 32 GPUs, a and b guaranteed 16 each. b runs three 6-GPU jobs (18, borrowing 2); a runs
    # 8. a-job (4 x 2 GPUs) brings a to 16, lacks 2 of quota: any b job would leave b at 12.
    jobs = [
        {"name": "a-run", "queue": "a", "priority": 50, "pod": {GPU: 8}, "admitted": "east"},
        *(b_job(f"b{i}", priority=0, at=1 + i, gpus=6) for i in range(3)),
        {"name": "a-job", "queue": "a", "priority": 100, "pods": 4, "pod": {GPU: 2}, "at": 30},
    ]
    scenario = {"clusters": [{"name": "east", "nodes": 4, "node": GPU_NODE}], "jobs": jobs}
    result = cycle(scenario, load(RECLAIM_POLICIES, tmp_path / "p"))
    d = assert_waits(result, "a-job", {Reason.WAITING_FOR_QUOTA})
    assert "needs 8, 6 available" in d.message, d.message


# --- 3. node shape -----------------------------------------------------------------------------
def spread_east() -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """east: 4 nodes of 8 GPUs, each with one GPU held by a job of queue "other" (60 CPUs, so
    one a node); 21 one-GPU jobs of q (priority 1) fill nodes 0–2, node 3 has 7 GPUs free.
    Preempting every candidate frees 28 GPUs in all but at most 7 on any one node."""
    node = {GPU: 8, "cpu": 96, "memory": "512Gi"}
    blockers = [
        {"name": f"other{i}", "queue": "other", "priority": 0, "admitted": "east", "at": i}
        | {"pod": {GPU: 1, "cpu": 60}}
        for i in range(4)
    ]
    smalls = [
        {"name": f"small{i:02}", "queue": "q", "priority": 1, "admitted": "east", "at": 5 + i}
        | {"pod": {GPU: 1, "cpu": 1}}
        for i in range(21)
    ]
    return {"name": "east", "nodes": 4, "node": node}, [*blockers, *smalls]


SHAPE_POLICIES = [queue("q", preemption={"withinQueue": "LowerPriority"}), queue("other")]
URGENT = {"name": "urgent", "queue": "q", "priority": 100, "pod": {GPU: 8, "cpu": 8}, "at": 60}


def test_victims_that_free_no_node_big_enough_are_not_preempted(tmp_path: Path) -> None:
    """An 8-GPU pod is not given 1-GPU victims spread over nodes that never free 8 GPUs on one
    node, though they free more than 8 GPUs in all: it waits with NoClusterFits."""
    east, jobs = spread_east()
    scenario = {"clusters": [east], "jobs": [*jobs, URGENT]}
    result = cycle(scenario, load(SHAPE_POLICIES, tmp_path / "p"))
    d = assert_waits(result, "urgent", {Reason.NO_CLUSTER_FITS})
    assert "east" in dict(d.cluster_reasons), d.cluster_reasons


def test_node_shape_sends_the_preemptor_to_the_cluster_where_victims_free_a_node(
    tmp_path: Path,
) -> None:
    """With a second cluster where one 8-GPU victim frees a whole node, that victim is
    preempted, not the one lower-priority 1-GPU job east's totals would ask for."""
    east, jobs = spread_east()
    west = {"name": "west", "nodes": 1, "node": {GPU: 8, "cpu": 96, "memory": "512Gi"}}
    west_low = {"name": "west-low", "queue": "q", "priority": 5, "admitted": "west", "at": 4}
    west_low |= {"pod": {GPU: 8, "cpu": 8}}
    scenario = {"clusters": [east, west], "jobs": [*jobs, west_low, URGENT]}
    result = cycle(scenario, load(SHAPE_POLICIES, tmp_path / "p"))
    assert_preempting(result, "urgent", {ref("west-low")}, "west", 1)
