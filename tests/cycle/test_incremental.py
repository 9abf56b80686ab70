"""The incremental path (``Cycle.arrive``, issue 22) against full cycles.

The contract (``Cycle.arrive``'s docstring): a job that arrives after ``run`` gets the decision a
full cycle on the snapshot with it gives it, when that full cycle considers it after every job
decided so far. Earlier decisions are never revised; ``result()`` after the arrivals equals the
full cycle's result, positions included. The property below runs both on random fleets (every
strategy, preemption setting and backoff state, arrivals in random order) and checks this
whenever the full cycle considers the arrivals last, in the order they arrived, and blocks no
job of the first cycle behind one of them. A recording cycle tells which: the order it calls
``_consider`` in, and who each ``_block`` puts behind whom. Otherwise (an arrival that would go
ahead of a job already decided) only the weaker half holds: the earlier decisions stand, and
``result()`` carries each arrival's decision.

Fleets are dicts for tests/cycle/builders.py; jobs are named by their binding,
``team/<name>-<kind>``.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pytest
import yaml
from hypothesis import event, given, seed, settings
from hypothesis import strategies as st

from engine.cycle import Cycle, run_cycle
from engine.cycle.jobs.model import PendingJob
from engine.cycle.model import CycleResult, Decision
from engine.cycle.quota.tree import QuotaNode
from engine.cycle.reasons import Reason
from engine.fleet.frozen import FrozenDict
from engine.fleet.model import BindingView, Snapshot
from engine.policy.policyset import PolicySet, load_policy_set
from tests.cycle import builders
from tests.cycle.test_properties import BACKOFF, SETTINGS, rarely, scenarios, table
from tests.sampling import until_covered

GPU = "nvidia.com/gpu"
GPU_NODE = {GPU: 8, "cpu": 64, "memory": "512Gi"}


# --- helpers -----------------------------------------------------------------------------------
class Recording(Cycle):
    """A full cycle that records the order it considers jobs in, and who waits behind whom."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.considered: list[str] = []
        self.behind: dict[str, str] = {}  # blocked job → its StrictFIFO head

    def _consider(self, job: PendingJob, leaf: QuotaNode) -> bool:
        self.considered.append(job.ref)
        return super()._consider(job, leaf)

    def _block(self, jobs: Iterable[PendingJob], head: PendingJob) -> None:
        jobs = list(jobs)
        self.behind.update((j.ref, head.ref) for j in jobs)
        super()._block(jobs, head)


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


def ref(spec: Mapping[str, Any]) -> str:
    return f"team/{spec['name']}-{spec.get('kind', 'PyTorchJob').lower()}"


def without(snapshot: Snapshot, refs: Iterable[str]) -> Snapshot:
    """``snapshot`` without the bindings ``refs`` and their templates: before they arrived."""
    gone = [b for b in snapshot.bindings if f"{b.namespace}/{b.name}" in set(refs)]
    keys = {b.resource.key for b in gone}
    return dataclasses.replace(
        snapshot,
        bindings=tuple(b for b in snapshot.bindings if b not in gone),
        workloads=FrozenDict({k: w for k, w in snapshot.workloads.items() if k not in keys}),
    )


def incremental(
    snapshot: Snapshot, policies: PolicySet, late: Sequence[str]
) -> tuple[CycleResult, list[Decision], CycleResult]:
    """A full cycle without the ``late`` jobs, then each arriving in turn: the first cycle's
    result, what ``arrive`` returned for each, and the cycle's result after them."""
    cycle = Cycle(without(snapshot, late), policies, builders.NOW)
    first = cycle.run()
    bindings = {f"{b.namespace}/{b.name}": b for b in snapshot.bindings}
    returned = []
    for i, name in enumerate(late):
        arrived = without(snapshot, late[i + 1 :])
        decision = cycle.arrive(arrived, bindings[name])
        assert decision is not None, f"{name}: arrive() gave no decision"
        returned.append(decision)
    return first, returned, cycle.result()


def by_binding(result: CycleResult) -> dict[tuple[str, str], dict[str, Any]]:
    return {(d.binding, d.action): d.to_json() for d in result.decisions}


def considered_last(full: Recording, late: Sequence[str]) -> bool:
    """Whether ``full`` considered the late jobs after all others, in the order they arrived,
    put each blocked one behind a job already there, and blocked no other job behind one."""
    arrival = {name: i for i, name in enumerate(late)}
    order = [arrival.get(r, -1) for r in full.considered]
    if order != sorted(order):
        return False
    for job, head in full.behind.items():
        if head in arrival and arrival.get(job, -1) <= arrival[head]:
            return False
    return True


# --- the property ------------------------------------------------------------------------------
@st.composite
def arrivals(draw: st.DrawFn) -> tuple[dict[str, Any], list[str]]:
    """A random fleet (any strategy, preemption setting, backoff) and 1–4 of its pending jobs
    arriving late, in random order; most come after every job already queued."""
    scenario = draw(scenarios(preemptive=draw(st.booleans())))
    pending = [j for j in scenario["jobs"] if not j.get("admitted")]
    if not pending:
        return scenario, []
    if rarely(draw, 3):  # a queue whose jobs all arrive late: it had no preemption search
        queue = draw(st.sampled_from(sorted({spec["queue"] for spec in pending})))
        late = draw(st.permutations([spec for spec in pending if spec["queue"] == queue]))[:4]
    else:
        late = draw(st.lists(st.sampled_from(pending), min_size=1, max_size=4, unique_by=ref))
    lowest = min(spec["priority"] for spec in pending)
    for k, spec in enumerate(late):
        if not rarely(draw, 4):  # queued after the jobs of the first cycle, in arrival order
            spec["at"] = 31 + k
            spec["priority"] = lowest
        if rarely(draw, 6):
            spec["backoffUntil"] = BACKOFF
    return scenario, [ref(spec) for spec in late]


def expected_position(full: dict[str, Decision], late: Sequence[str], i: int) -> int | None:
    """The arrival's position when it arrived: the full cycle's, less the waiting jobs that
    arrived after it and go before it in its queue."""
    mine = full[late[i]]
    if mine.position is None:
        return None
    ahead = [full[r] for r in late[i + 1 :]]
    return mine.position - sum(
        1
        for d in ahead
        if d.queue == mine.queue and d.position is not None and d.position < mine.position
    )


@settings(SETTINGS, max_examples=60)
@given(case=arrivals().filter(lambda case: bool(case[1])))
def test_arrivals_are_decided_as_a_full_cycle_decides_them(
    case: tuple[dict[str, Any], list[str]], load: Any
) -> None:
    scenario, late = case
    policies = load(scenario["policies"])
    snapshot = builders.snapshot(scenario)
    recorder = Recording(snapshot, policies, builders.NOW)
    full = recorder.run()
    first, returned, after = incremental(snapshot, policies, late)
    shown = f"arrivals {late}\nfull cycle:\n{table(full)}\nincremental:\n{table(after)}"

    # always: earlier decisions stand (but for positions), each arrival is in result()
    kept = {k: {**v, "position": None} for k, v in by_binding(after).items()}
    for key, decision in by_binding(first).items():
        assert kept.get(key) == {**decision, "position": None}, f"{key} revised\n{shown}"
    for decision in returned:
        assert kept[(decision.binding, decision.action)] == {
            **decision.to_json(),
            "position": None,
        }, shown

    if not considered_last(recorder, late):
        event("an arrival would go ahead of a job already decided")
        return
    event("the full cycle considers the arrivals last")
    assert by_binding(after) == by_binding(full), shown
    assert [q.to_json() for q in after.queues] == [q.to_json() for q in full.queues], shown
    decided = {d.binding: d for d in full.decisions if d.reason != Reason.PREEMPTED}
    for i, decision in enumerate(returned):
        want = decided[late[i]]
        assert decision._replace(position=None) == want._replace(position=None), shown
        assert decision.position == expected_position(decided, late, i), shown


def test_the_property_mostly_checks_the_equivalence(load: Any) -> None:
    """The arrivals the property draws are mostly considered last by the full cycle, and
    their decisions cover admission, waiting, blocking, preemption and backoff."""
    counts: dict[str, int] = {"equivalent": 0, "all": 0}
    reasons: set[str] = set()
    wanted = ("Admitted", "NoClusterFits", "BlockedByHead", "Backoff", "Preempting")

    def draw_batch(number: int) -> None:
        @seed(number)
        @settings(max_examples=80, deadline=None, database=None)
        @given(case=arrivals().filter(lambda case: bool(case[1])))
        def sample(case: tuple[dict[str, Any], list[str]]) -> None:
            scenario, late = case
            snapshot = builders.snapshot(scenario)
            recorder = Recording(snapshot, load(scenario["policies"]), builders.NOW)
            result = recorder.run()
            counts["all"] += 1
            if considered_last(recorder, late):
                counts["equivalent"] += 1
                reasons.update(str(d.reason) for d in result.decisions if d.binding in late)

        sample()

    # A Preempting arrival is the rarest: alone this test first draws one in its 8th batch, and
    # in the 12th after tests/simulate's modules are loaded (their constants join the draws)
    until_covered(draw_batch, lambda: all(reason in reasons for reason in wanted), batches=24)
    assert counts["equivalent"] >= counts["all"] // 2, counts
    for reason in wanted:
        assert reason in reasons, f"no arrival {reason} in the sample: {sorted(reasons)}"


# --- named scenarios ---------------------------------------------------------------------------
def queue(name: str, **spec: Any) -> dict[str, Any]:
    return {"kind": "Queue", "metadata": {"name": name}, "spec": spec}


STRICT_HEAD_BLOCKED = {
    "policies": [queue("strict", strategy="StrictFIFO")],
    "clusters": [{"name": "east", "nodes": 4, "used": 2, "node": GPU_NODE}],
    "jobs": [
        {"name": "head", "queue": "strict", "pods": 3, "pod": {GPU: 8}, "at": 1},
        {"name": "late", "queue": "strict", "pod": {GPU: 8}, "at": 2},
    ],
}
"""16 GPUs free; the StrictFIFO head needs 24 and waits. A 1-pod job that arrives later would
fit, but it must not pass the head."""

STRICT_ARRIVAL_BLOCKS = {
    "policies": [queue("strict", strategy="StrictFIFO")],
    "clusters": [{"name": "east", "nodes": 4, "used": 2, "node": GPU_NODE}],
    "jobs": [
        {"name": "big", "queue": "strict", "pods": 3, "pod": {GPU: 8}, "at": 1},
        {"name": "small", "queue": "strict", "pod": {GPU: 8}, "at": 2},
    ],
}
"""The queue was empty in the first cycle; the 24-GPU job that arrives first waits and is the
head the next arrival waits behind."""

BEST_EFFORT_PASSES = {
    "policies": [queue("besteffort", strategy="BestEffortFIFO")],
    "clusters": [{"name": "east", "nodes": 4, "used": 2, "node": GPU_NODE}],
    "jobs": [
        {"name": "head", "queue": "besteffort", "pods": 3, "pod": {GPU: 8}, "at": 1},
        {"name": "late", "queue": "besteffort", "pod": {GPU: 8}, "at": 2},
    ],
}
"""The same, BestEffortFIFO: the late job passes the waiting head."""

ARRIVAL_PREEMPTS = {
    "policies": [queue("q", preemption={"withinQueue": "LowerPriority"})],
    "clusters": [{"name": "east", "nodes": 1, "node": GPU_NODE}],
    "jobs": [
        {"name": "low", "queue": "q", "priority": 1, "pod": {GPU: 8}, "admitted": "east"},
        {"name": "high", "queue": "q", "priority": 5, "pod": {GPU: 8}, "at": 5},
    ],
}
"""The only node runs a priority-1 job; a priority-5 job of its queue arrives and preempts it."""

BACKOFF_KEEPS_ITS_PLACE = {
    "policies": [queue("q")],
    "clusters": [{"name": "east", "nodes": 2, "used": 2, "node": GPU_NODE}],
    "jobs": [
        {"name": "old", "queue": "q", "pod": {GPU: 8}, "at": 1, "backoffUntil": BACKOFF},
        {"name": "new", "queue": "q", "pod": {GPU: 8}, "at": 6},
        {"name": "retried", "queue": "q", "pod": {GPU: 8}, "at": 7, "backoffUntil": BACKOFF},
    ],
}
"""A job in backoff keeps its place: the arrival behind it is second, and an arrival in backoff
gets its Backoff decision, third."""

SEARCHED_ALREADY = {
    "policies": [queue("q", preemption={"withinQueue": "LowerPriority"})],
    "clusters": [{"name": "east", "nodes": 2, "node": GPU_NODE}],
    "jobs": [
        {"name": "low1", "queue": "q", "priority": 1, "pod": {GPU: 8}, "admitted": "east"},
        {"name": "low2", "queue": "q", "priority": 1, "pod": {GPU: 8}, "admitted": "east"},
        {"name": "first", "queue": "q", "priority": 5, "pod": {GPU: 8}, "at": 1},
        {"name": "late", "queue": "q", "priority": 5, "pod": {GPU: 8}, "at": 2},
    ],
}
"""The queue had its preemption search this cycle (``first`` preempts); the late job of the same
queue waits for the next cycle, as in a full cycle."""

NAMED = {
    "a late job does not pass a blocked StrictFIFO head": (
        STRICT_HEAD_BLOCKED,
        ["late"],
        {"late": ("Pending", "BlockedByHead", 2)},
    ),
    "a StrictFIFO arrival that waits blocks the arrivals behind it": (
        STRICT_ARRIVAL_BLOCKS,
        ["big", "small"],
        {"big": ("Pending", "NoClusterFits", 1), "small": ("Pending", "BlockedByHead", 2)},
    ),
    "a late job passes a waiting BestEffortFIFO head": (
        BEST_EFFORT_PASSES,
        ["late"],
        {"late": ("Admit", "Admitted", None)},
    ),
    "an arrival that preempts gets its own Preempting decision": (
        ARRIVAL_PREEMPTS,
        ["high"],
        {"high": ("Pending", "Preempting", 1)},
    ),
    "an arrival counts the jobs in backoff ahead of it, and one in backoff gets Backoff": (
        BACKOFF_KEEPS_ITS_PLACE,
        ["new", "retried"],
        {"new": ("Pending", "NoClusterFits", 2), "retried": ("Pending", "Backoff", 3)},
    ),
    "a queue that searched for victims this cycle does not search again for an arrival": (
        SEARCHED_ALREADY,
        ["late"],
        {"late": ("Pending", "NoClusterFits", 2)},
    ),
}


@pytest.mark.parametrize("name", sorted(NAMED))
def test_named_arrivals(name: str, load: Any) -> None:
    scenario, late, expected = NAMED[name]
    scenario = copy.deepcopy(scenario)
    specs = {j["name"]: j for j in scenario["jobs"]}
    refs = [ref(specs[n]) for n in late]
    policies = load(scenario["policies"])
    snapshot = builders.snapshot(scenario)
    full = run_cycle(snapshot, policies, builders.NOW)
    _, returned, after = incremental(snapshot, policies, refs)
    shown = f"full cycle:\n{table(full)}\nincremental:\n{table(after)}"
    for job, decision in zip(late, returned, strict=True):
        got = (str(decision.action), str(decision.reason), decision.position)
        assert got == expected[job], f"{job}: {got} != {expected[job]}\n{shown}"
    assert by_binding(after) == by_binding(full), shown


def test_arrive_skips_what_is_not_pending(load: Any) -> None:
    """A running job, or a binding fleetgate does not manage, gets no decision."""
    scenario = copy.deepcopy(ARRIVAL_PREEMPTS)
    policies = load(scenario["policies"])
    snapshot = builders.snapshot(scenario)
    cycle = Cycle(snapshot, policies, builders.NOW)
    cycle.run()
    running: BindingView = next(b for b in snapshot.bindings if b.name.startswith("low"))
    assert cycle.arrive(snapshot, running) is None
    unmanaged = dataclasses.replace(running, labels=FrozenDict(), clusters=())
    assert cycle.arrive(snapshot, unmanaged) is None
