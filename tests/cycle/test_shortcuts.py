"""The cycle's shortcuts give exactly what the plain computations they replace give.

- ``QueueOrder`` remembers keys per demand and does not push a key that did not change: its
  picks must be those of recomputing every key of the tree from scratch before each pick.
- Decisions get their position when decided, assuming no later job goes before them;
  ``with_positions`` must give every decision the position sorting its queue gives.
- ``JobCache.kept`` returns a pending job without reading its binding again while the
  snapshot's workloads and PriorityClasses are the very objects it was read from.
- A job like one that missed quota and preempted nobody, with the quota and the victims taken
  unchanged since, gets that miss without a check or a search: the decisions must be those of
  checking and searching for every job.
- Milli-units are found from a Fraction's numerator and denominator: they must be what
  rounding the Fraction times 1000 gives (requests up, capacities down).
"""

from __future__ import annotations

import copy
import dataclasses
import datetime as dt
import math
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any, cast
from unittest import mock

import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st

from engine import vectors
from engine.cycle import Cycle, explain
from engine.cycle.jobs.cache import JobCache
from engine.cycle.jobs.model import Mapped, PendingJob
from engine.cycle.model import ClusterAssignment, Decision, GroupState
from engine.cycle.ordering.order import QueueOrder, late_key
from engine.cycle.quota.tree import ROOT, QuotaNode, QuotaTree
from engine.cycle.reasons import Action, Reason
from engine.fleet.frozen import FrozenDict
from engine.policy.model import Origin, Queue, QueuePreemption, Strategy
from engine.policy.policyset import load_policy_set
from tests.cycle import builders
from tests.cycle import test_incremental as incremental
from tests.cycle.test_properties import SETTINGS, load, rarely, scenarios  # noqa: F401 (fixture)

RESOURCES = ("cpu", "memory", "nvidia.com/gpu")
CAPACITY = {"cpu": 64_000, "memory": 256_000, "nvidia.com/gpu": 16_000, "pods": 100_000}


# --- queue order ---------------------------------------------------------------------------------
def reference_key(
    quota: QuotaTree,
    node: QuotaNode,
    job: PendingJob,
    fair: bool,
    resources: tuple[str, ...],
    late_since: dt.datetime | None = None,
) -> tuple[Any, ...]:
    """The key as the order defines it, computed from scratch."""
    late = () if late_since is None else (job.enqueued_at <= late_since,)
    if not fair:
        return (-node.priority, late_key(job.order_key, job.enqueued_at, late_since), node.name)
    first, *rest = _fair_key(quota, node, job, resources)
    return (first, *late, *rest)


def _fair_key(
    quota: QuotaTree, node: QuotaNode, job: PendingJob, resources: tuple[str, ...]
) -> tuple[Any, ...]:
    borrowed = used = 0.0
    for r in resources:
        amount = node.total.get(r, 0) + job.demand.get(r, 0)
        if amount <= 0:
            continue
        capacity = quota.capacity_of(r)
        used = max(used, amount / capacity)
        above = amount - node.guarantee.get(r, 0)
        if above > 0:
            borrowed = max(borrowed, above / capacity)
    if node.weight <= 0:
        return (-node.priority, math.inf if borrowed else 0.0, math.inf if used else 0.0, node.name)
    return (-node.priority, borrowed / node.weight, used / node.weight, node.name)


def reference_next(
    quota: QuotaTree,
    waiting: dict[str, list[PendingJob]],
    blocked: set[str],
    fair: bool,
    resources: tuple[str, ...],
    late_since: dt.datetime | None = None,
) -> tuple[str, PendingJob] | None:
    def head(node: QuotaNode) -> tuple[str, PendingJob] | None:
        if not node.children:
            jobs = waiting.get(node.name, [])
            return (node.name, jobs[0]) if jobs and node.name not in blocked else None
        best: tuple[tuple[Any, ...], tuple[str, PendingJob]] | None = None
        for child in node.children:
            found = head(child)
            if found is not None:
                key = reference_key(quota, child, found[1], fair, resources, late_since)
                if best is None or key < best[0]:
                    best = (key, found)
        return best[1] if best is not None else None

    return head(quota.nodes[ROOT])


def queue(name: str, parent: str | None, draw: st.DrawFn) -> Queue:
    guarantee = {r: Fraction(draw(st.integers(0, 8))) for r in ("cpu", "nvidia.com/gpu")}
    return Queue(
        name=name,
        parent=parent,
        priority=draw(st.sampled_from([0, 0, 0, 10])),
        weight=draw(st.sampled_from([1.0, 2.0, 0.5, 0.0])),
        strategy=Strategy.BEST_EFFORT_FIFO,
        guarantee=guarantee,
        max={},
        borrowing_limit=None,
        lending_limit=None,
        preemption=QueuePreemption(),
        origin=Origin("test.yaml", 1),
    )


@st.composite
def orders(draw: st.DrawFn) -> tuple[list[Queue], list[PendingJob], bool, list[int], Any]:
    parents = [f"p{i}" for i in range(draw(st.integers(0, 3)))]
    queues = [queue(p, None, draw) for p in parents]
    leaves = []
    for i in range(draw(st.integers(1, 6))):
        parent = draw(st.sampled_from([None, *parents]))
        leaves.append(f"q{i}")
        queues.append(queue(f"q{i}", parent, draw))
    shapes = [
        {"cpu": draw(st.integers(0, 8)) * 1000, "nvidia.com/gpu": draw(st.integers(0, 2)) * 1000}
        for _ in range(draw(st.integers(1, 4)))
    ]
    jobs = []
    for i in range(draw(st.integers(1, 40))):
        leaf = draw(st.sampled_from(leaves))
        priority = draw(st.sampled_from([0, 0, 5]))
        at = builders.EPOCH + dt.timedelta(minutes=draw(st.integers(0, 20)))
        jobs.append(
            PendingJob(
                binding=cast(Any, None),
                workload=None,
                mapped=Mapped(leaf, "", priority, 0, False),
                enqueued_at=at,
                pods=(),
                demand={**draw(st.sampled_from(shapes)), "pods": 1000},
                problem=None,
                values={},
                ref=f"team/j{i}",
                order_key=(-priority, at, f"uid-{i}"),
            )
        )
    steps = draw(st.lists(st.integers(0, 9), min_size=len(jobs), max_size=len(jobs)))
    late = draw(st.one_of(st.none(), st.integers(0, 20)))  # lateAfter: late_since's minute
    late_since = None if late is None else builders.EPOCH + dt.timedelta(minutes=late)
    return queues, jobs, draw(st.booleans()), steps, late_since


@settings(max_examples=300, deadline=None)
@given(orders())
def test_the_order_picks_as_if_every_key_were_computed_afresh(
    case: tuple[list[Queue], list[PendingJob], bool, list[int], Any],
) -> None:
    """Jobs of a queue share few demands, so passing over a head for a job alike (whose keys
    are not computed again) is frequent, between admissions and preemptors' holds."""
    queues, jobs, fair, steps, late_since = case
    quota = QuotaTree(queues, CAPACITY)
    by_leaf: dict[str, list[PendingJob]] = {}
    for job in jobs:
        by_leaf.setdefault(job.mapped.queue, []).append(job)
    order = QueueOrder(
        quota, by_leaf, fair_sharing=fair, resources=RESOURCES, late_since=late_since
    )
    waiting = {
        leaf: sorted(js, key=lambda j: late_key(j.order_key, j.enqueued_at, late_since))
        for leaf, js in by_leaf.items()
    }
    blocked: set[str] = set()
    resources = tuple(r for r in RESOURCES if quota.capacity_of(r) > 0)
    for step in steps:
        pick = order.next()
        assert pick == reference_next(quota, waiting, blocked, fair, resources, late_since)
        if pick is None:
            break
        leaf, job = pick
        node = quota.nodes[leaf]
        if step < 4:  # admitted
            quota.add(node, job.demand)
            order.usage_changed(leaf)
        elif step < 5:  # a preemptor holds its quota; the path is re-keyed by advance
            quota.add(node, job.demand)
        if step == 9:  # StrictFIFO head that waits: the jobs behind it wait too
            assert order.block(leaf) == waiting[leaf][1:]
            blocked.add(leaf)
            continue
        order.advance(leaf)
        waiting[leaf].pop(0)


# --- positions -----------------------------------------------------------------------------------
def reference_positions(
    decisions: list[Decision], waiting: dict[str, list[tuple[str, tuple[Any, ...]]]]
) -> list[Decision]:
    position = {
        ref: i
        for jobs in waiting.values()
        for i, (ref, _) in enumerate(sorted(jobs, key=lambda j: j[1]), start=1)
    }
    return [
        d._replace(position=position[d.binding]) if d.binding in position else d for d in decisions
    ]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["a", "b", "c"]),  # queue
            st.integers(0, 5),  # order key
            st.booleans(),  # waits (else admitted: no place in its queue)
            st.one_of(st.none(), st.integers(1, 6)),  # position given when decided
        ),
        max_size=25,
    )
)
def test_positions_are_those_of_the_sorted_queues(
    jobs: list[tuple[str, int, bool, int | None]],
) -> None:
    waiting: dict[str, list[tuple[str, tuple[Any, ...]]]] = {}
    decisions = []
    for i, (name, key, waits, position) in enumerate(jobs):
        ref = f"team/j{i}"
        if waits:
            waiting.setdefault(name, []).append((ref, (key, i % 3)))
        action = Action.PENDING if waits else Action.ADMIT
        reason = Reason.NO_CLUSTER_FITS if waits else Reason.ADMITTED
        decisions.append(Decision(ref, "Job/team/j", name, "", 0, action, reason, "", (), position))
    expected = reference_positions(decisions, waiting)
    assert explain.with_positions(decisions, waiting) == expected
    assert explain.with_positions(decisions, waiting, every_queue=True) == expected
    for i in range(len(decisions)):
        assert explain.with_positions(decisions[i : i + 1], waiting) == expected[i : i + 1]


def test_with_position_keeps_every_other_field() -> None:
    values: dict[str, Any] = {
        "binding": "team/a",
        "workload": "Job/team/a",
        "queue": "q",
        "tenant": "t",
        "priority": 3,
        "action": Action.PREEMPT,
        "reason": Reason.PREEMPTED,
        "message": "m",
        "clusters": (ClusterAssignment("east", 2),),
        "position": 4,
        "cluster_reasons": (("west", "full"),),
        "victims": ("team/b",),
        "preemptor": "team/c",
        "group": GroupState("group/team/g", 2, 2, 2, "Pending"),
        "note": "n",
    }
    # a new field must be copied by with_position too
    assert set(Decision._fields) == set(values)
    decision = Decision(**values)
    assert decision.with_position(7) == decision._replace(position=7)
    assert decision.with_position(7) != decision


def test_a_job_behind_a_later_decided_one_gets_its_sorted_position(tmp_path: Path) -> None:
    """A job in backoff enqueued first is added to its queue last: those behind it move down."""
    scenario = {
        "clusters": [{"name": "east", "nodes": 1, "used": 1}],
        "jobs": [
            {
                "name": "early",
                "queue": "q",
                "pod": {"cpu": 1},
                "at": 1,
                "backoffUntil": "2099-01-01T00:00:00Z",
            },
            {"name": "late", "queue": "q", "pod": {"cpu": 1}, "at": 2},
            {"name": "later", "queue": "q", "pod": {"cpu": 1}, "at": 3},
        ],
    }
    result = Cycle(builders.snapshot(scenario), policies(tmp_path), builders.NOW).run()
    positions = {d.workload.split("/")[-1]: (d.reason, d.position) for d in result.decisions}
    assert positions == {
        "early": (Reason.BACKOFF, 1),
        "late": (Reason.NO_CLUSTER_FITS, 2),
        "later": (Reason.NO_CLUSTER_FITS, 3),
    }


# --- kept jobs -----------------------------------------------------------------------------------
def policies(tmp_path: Path) -> Any:
    folder = tmp_path / "policies"
    folder.mkdir(exist_ok=True)
    doc = {"apiVersion": "fleetgate.io/v1alpha1", "kind": "Queue", "metadata": {"name": "q"}}
    (folder / "q.yaml").write_text(yaml.safe_dump({**doc, "spec": {"weight": 1}}))
    return load_policy_set([folder])


def test_kept_jobs_are_found_again_after_the_workloads_are_replaced(tmp_path: Path) -> None:
    scenario = {
        "clusters": [{"name": "east", "nodes": 1, "used": 1}],
        "jobs": [
            {"name": n, "queue": "q", "pod": {"cpu": 1}, "at": i} for i, n in enumerate("abc")
        ],
    }
    policy, snap, cache = policies(tmp_path), builders.snapshot(scenario), JobCache()
    first = Cycle(snap, policy, builders.NOW, cache)
    first.run()
    assert all(cache.kept(snap, policy.version, j.binding) is j for j in first.pending)
    # the very workloads in another mapping: still kept
    copied = dataclasses.replace(snap, workloads=FrozenDict(snap.workloads.to_dict()))
    assert all(cache.kept(copied, policy.version, j.binding) is j for j in first.pending)
    second = Cycle(copied, policy, builders.NOW, cache)
    assert second.run().to_json() == Cycle(copied, policy, builders.NOW).run().to_json()
    assert all(p is q for p, q in zip(first.pending, second.pending, strict=True))
    # equal copies of the workloads: read through the slow path, then kept again
    equal = {k: dataclasses.replace(w) for k, w in snap.workloads.items()}
    alike = dataclasses.replace(snap, workloads=FrozenDict(equal))
    assert all(cache.kept(alike, policy.version, j.binding) is None for j in first.pending)
    third = Cycle(alike, policy, builders.NOW, cache)
    assert third.run().to_json() == Cycle(alike, policy, builders.NOW).run().to_json()
    assert all(cache.kept(alike, policy.version, j.binding) is j for j in third.pending)


# --- quota misses of jobs alike ----------------------------------------------------------------
def _forgetting(missed: Any) -> Any:
    """A cycle's ``missed`` that keeps nothing: every job is checked and searched in turn."""

    class Forgets(type(missed)):  # type: ignore[misc]
        def __setitem__(self, key: Any, value: Any) -> None:
            return None

    return Forgets()


@st.composite
def alike_scenarios(draw: st.DrawFn) -> dict[str, Any]:
    """The property tests' scenarios with each waiting job followed by up to four copies of
    itself (same queue and pods, queued up to ten minutes later, now and then at another
    priority), so that other jobs are decided between them."""
    scenario = draw(scenarios(preemptive=draw(st.booleans())))
    jobs = []
    for spec in scenario["jobs"]:
        jobs.append(spec)
        for n in range(0 if spec.get("admitted") else draw(st.integers(0, 4))):
            twin = copy.deepcopy(spec)
            twin["name"] = f"{spec['name']}-{n}"
            twin["at"] = spec["at"] + draw(st.integers(0, 10))
            if rarely(draw, 3):
                twin["priority"] = draw(st.integers(0, 3))
            jobs.append(twin)
    scenario["jobs"] = jobs
    return scenario


ALIKE_AFTER_AN_ADMISSION = {
    "policies": [
        {"kind": "Queue", "metadata": {"name": "q0"}, "spec": {"max": {"cpu": 10}}},
        {"kind": "Queue", "metadata": {"name": "q1"}, "spec": {"parent": "q0", "weight": 10}},
        {"kind": "Queue", "metadata": {"name": "q2"}, "spec": {"parent": "q0"}},
    ],
    "clusters": [{"name": "c0", "nodes": 1, "node": {"cpu": 96}}],
    "jobs": [
        {"name": "runs", "queue": "q1", "priority": 0, "pod": {"cpu": 6}, "admitted": "c0"},
        {"name": "a1", "queue": "q1", "priority": 0, "pod": {"cpu": 6}, "at": 0},
        {"name": "c", "queue": "q1", "priority": 0, "pod": {"cpu": 40}, "at": 1},
        {"name": "b", "queue": "q2", "priority": 0, "pod": {"cpu": 2}, "at": 2},
        {"name": "a2", "queue": "q1", "priority": 0, "pod": {"cpu": 6}, "at": 3},
    ],
}
"""a1 finds q0 at its max with 6 in use. With c at its head, q1's fair share is above q2's,
so b is admitted next. a2, like a1, must then find 8 in use, not get a1's miss again."""


ALIKE_IN_ANOTHER_QUEUE = {
    "policies": [
        {"kind": "Queue", "metadata": {"name": "q1"}, "spec": {"max": {"cpu": 4}, "weight": 10}},
        {"kind": "Queue", "metadata": {"name": "q2"}, "spec": {"weight": 1}},
    ],
    "clusters": [{"name": "c0", "nodes": 1, "node": {"cpu": 96}}],
    "jobs": [
        {"name": "runs", "queue": "q1", "priority": 0, "pod": {"cpu": 4}, "admitted": "c0"},
        {"name": "a", "queue": "q1", "priority": 0, "pod": {"cpu": 2}, "at": 0},
        {"name": "b", "queue": "q2", "priority": 0, "pod": {"cpu": 2}, "at": 1},
    ],
}
"""a finds q1 at its max; b, with the same pods and priority in q2, must be admitted."""


@SETTINGS
@given(scenario=alike_scenarios())
@example(scenario=ALIKE_AFTER_AN_ADMISSION)
@example(scenario=ALIKE_IN_ANOTHER_QUEUE)
def test_jobs_alike_get_what_checking_each_in_turn_gives(
    scenario: dict[str, Any],
    load: Callable[..., Any],  # noqa: F811 (the fixture)
) -> None:
    """A job like one that missed quota and preempted nobody, with nothing admitted, held or
    taken since, gets its miss without a check or a victim search, and passing it over keys
    no queue again: the decisions must be those of a cycle that checks and keys every job."""
    policies = load(scenario["policies"])
    snapshot = builders.snapshot(scenario)
    plain = Cycle(snapshot, policies, builders.NOW)
    plain.missed = _forgetting(plain.missed)
    with mock.patch.object(QueueOrder, "advance", _advance_and_key):
        expected = plain.run().to_json()
    assert Cycle(snapshot, policies, builders.NOW).run().to_json() == expected


def test_a_job_alike_of_a_higher_priority_that_arrives_still_preempts(
    load: Callable[..., Any],  # noqa: F811 (the fixture)
) -> None:
    """a misses q0's max and may preempt nobody of a lower priority; hi, alike but of a higher
    priority, arrives after the cycle and must preempt runs, not take a's miss."""
    scenario = {
        "policies": [
            {
                "kind": "Queue",
                "metadata": {"name": "q0"},
                "spec": {"max": {"cpu": 8}, "preemption": {"withinQueue": "LowerPriority"}},
            },
        ],
        "clusters": [{"name": "c0", "nodes": 1, "node": {"cpu": 96}}],
        "jobs": [
            {"name": "runs", "queue": "q0", "priority": 1, "pod": {"cpu": 8}, "admitted": "c0"},
            {"name": "a", "queue": "q0", "priority": 1, "pod": {"cpu": 4}, "at": 0},
            {"name": "hi", "queue": "q0", "priority": 2, "pod": {"cpu": 4}, "at": 1},
        ],
    }
    policies = load(scenario["policies"])
    snapshot = builders.snapshot(scenario)
    late = "team/hi-pytorchjob"
    cycle = Cycle(incremental.without(snapshot, [late]), policies, builders.NOW)
    waits = {d.binding: d.reason for d in cycle.run().decisions}
    assert waits["team/a-pytorchjob"] == Reason.WAITING_FOR_QUOTA
    hi = next(b for b in snapshot.bindings if f"{b.namespace}/{b.name}" == late)
    decision = cycle.arrive(snapshot, hi)
    assert decision is not None and decision.reason == Reason.PREEMPTING, decision


def _advance_and_key(order: QueueOrder, leaf: str) -> None:
    """``QueueOrder.advance`` as it was before it left keys alike: the path always keyed."""
    order.slots[leaf].index += 1
    order.usage_changed(leaf)


# --- milli-units -------------------------------------------------------------------------------
@settings(max_examples=300, deadline=None)
@given(
    amounts=st.dictionaries(
        st.sampled_from(RESOURCES),
        st.one_of(
            st.fractions(min_value=-(10**6), max_value=10**6, max_denominator=10**5),
            st.integers(-(10**6), 10**6),
        ),
    )
)
def test_milli_units_round_as_the_fraction_times_a_thousand(amounts: dict[str, Any]) -> None:
    assert vectors.capacity_milli(amounts) == {
        r: math.floor(Fraction(v) * 1000) for r, v in amounts.items()
    }
    assert vectors.request_milli(amounts) == {
        r: math.ceil(Fraction(v) * 1000) for r, v in amounts.items() if v > 0
    }
