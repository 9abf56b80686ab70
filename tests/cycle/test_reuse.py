"""``rerun`` (engine/cycle/reuse.py) against full cycles.

The contract: when ``rerun`` gives a result, its decisions are those of a full cycle on the same
snapshot at the same time, binding for binding, positions included, and so are the queue
reports. The property draws random fleets (every strategy, preemption setting, backoff, with
or without ``lateAfter`` and reservations) and changes them as informers do between passes: a
job arrives, a waiting job is edited (its binding read anew with another label, or its
template with other pods, priority, queue or enqueue time) or leaves; up to three such passes
in a row, each rerun from the one before. It also counts how often a rerun is given, so that
the property checks something.

Fleets are dicts for tests/cycle/builders.py; jobs are named by their binding,
``team/<name>-<kind>``.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterable, Sequence
from typing import Any

import pytest
from hypothesis import event, given, seed, settings
from hypothesis import strategies as st

from engine.cycle import JobCache, Ran, rerun, run_cycle, run_kept
from engine.cycle.model import CycleResult
from engine.cycle.reasons import Reason
from engine.fleet.frozen import FrozenDict
from engine.fleet.model import BindingView, Snapshot
from engine.policy.policyset import PolicySet
from tests.cycle import builders
from tests.cycle.test_incremental import by_binding, ref
from tests.cycle.test_incremental import load as load
from tests.cycle.test_properties import SETTINGS, rarely, scenarios, table
from tests.sampling import until_covered

Step = list[tuple[str, dict[str, Any]]]  # (arrive | edit | relabel | leave, the job's spec)


# --- changing a snapshot as the informers do ---------------------------------------------------
def put(snapshot: Snapshot, jobs: Iterable[tuple[BindingView, Any]]) -> Snapshot:
    """``snapshot`` with these bindings and templates added, or in place of theirs."""
    bindings = {(b.namespace, b.name): b for b in snapshot.bindings}
    workloads = dict(snapshot.workloads)
    for binding, workload in jobs:
        bindings[(binding.namespace, binding.name)] = binding
        workloads[binding.resource.key] = workload
    return dataclasses.replace(
        snapshot,
        bindings=tuple(bindings[k] for k in sorted(bindings)),
        workloads=FrozenDict(workloads),
    )


def drop(snapshot: Snapshot, refs: Iterable[str]) -> Snapshot:
    """``snapshot`` without the bindings ``refs`` and their templates."""
    gone = set(refs)
    leaving = [b for b in snapshot.bindings if f"{b.namespace}/{b.name}" in gone]
    keys = {b.resource.key for b in leaving}
    return dataclasses.replace(
        snapshot,
        bindings=tuple(b for b in snapshot.bindings if b not in leaving),
        workloads=FrozenDict({k: w for k, w in snapshot.workloads.items() if k not in keys}),
    )


def relabelled(binding: BindingView, n: int) -> BindingView:
    """The binding as read again after another controller set a label on it."""
    return dataclasses.replace(
        binding, labels=FrozenDict({**binding.labels, "example.com/touched": str(n)})
    )


def apply(snapshot: Snapshot, step: Step, full: Snapshot, n: int) -> Snapshot:
    """One pass's changes; ``full`` holds the objects of the jobs that arrive."""
    found = {f"{b.namespace}/{b.name}": b for b in full.bindings}
    for what, spec in step:
        name = ref(spec)
        if what == "arrive":
            binding = found[name]
            snapshot = put(snapshot, [(binding, full.workloads[binding.resource.key])])
        elif what == "leave":
            snapshot = drop(snapshot, [name])
        elif what == "relabel":
            current = next(b for b in snapshot.bindings if f"{b.namespace}/{b.name}" == name)
            snapshot = put(
                snapshot, [(relabelled(current, n), snapshot.workloads[current.resource.key])]
            )
        else:  # Karmada's detector writes the template's change into the binding's spec
            binding, workload = builders.job(spec)
            snapshot = put(snapshot, [(dataclasses.replace(binding, generation=n + 2), workload)])
    return snapshot


# --- the property ------------------------------------------------------------------------------
@st.composite
def passes(draw: st.DrawFn) -> tuple[dict[str, Any], list[str], list[Step]]:
    """A random fleet, the pending jobs missing from the first snapshot, and 1–3 passes of
    0–3 changes each to its waiting jobs."""
    scenario = draw(scenarios(preemptive=draw(st.booleans())))
    policy = next((d for d in scenario["policies"] if d["kind"] == "SchedulingPolicy"), None)
    if policy is None:
        policy = {"kind": "SchedulingPolicy", "metadata": {"name": "default"}, "spec": {}}
        scenario["policies"].append(policy)
    if draw(st.booleans()):
        policy["spec"]["ordering"] = {"lateAfter": f"{draw(st.integers(10, 119))}m"}
    if rarely(draw, 3):
        policy["spec"]["reservations"] = {"after": f"{draw(st.integers(60, 130))}m", "max": 1}
    pending = [spec for spec in scenario["jobs"] if not spec.get("admitted")]
    absent = [ref(spec) for spec in pending if rarely(draw, 3)]
    present = {ref(spec) for spec in pending} - set(absent)
    by_name = {ref(spec): spec for spec in pending}
    priorities = sorted({spec["priority"] for spec in scenario["jobs"]} or {0})
    queues = sorted({spec["queue"] for spec in scenario["jobs"]} or {"q0"})
    steps: list[Step] = []
    for _ in range(draw(st.integers(1, 3))):
        step: Step = []
        for _ in range(draw(st.integers(0, 3))):
            choices = ["arrive"] if set(absent) - present else []
            choices += ["edit", "relabel", "leave"] if present else []
            if not choices:
                break
            what = draw(st.sampled_from(choices))
            if what == "arrive":
                name = draw(st.sampled_from(sorted(set(absent) - present)))
                present.add(name)
                step.append((what, by_name[name]))
                continue
            name = draw(st.sampled_from(sorted(present)))
            if what == "leave":
                present.discard(name)
            spec = by_name[name]
            if what == "edit":
                spec = by_name[name] = copy.deepcopy(spec)
                field = draw(st.sampled_from(["priority", "at", "queue", "pods"]))
                if field == "priority":
                    spec["priority"] = draw(st.sampled_from(priorities))
                elif field == "at":
                    spec["at"] = draw(st.integers(0, 40))
                elif field == "queue":
                    spec["queue"] = draw(st.sampled_from(queues))
                else:
                    spec["pods"] = draw(st.integers(1, 4))
                    spec.pop("roles", None)
                    spec.setdefault("pod", {"cpu": 1})
            step.append((what, spec))
        steps.append(step)
    return scenario, absent, steps


def reports(result: CycleResult) -> list[dict[str, Any]]:
    return [q.to_json() for q in result.queues]


def settle(scenario: dict[str, Any], absent: Sequence[str], policies: PolicySet) -> None:
    """Run the jobs the cycle admits and take away those it preempts, a few cycles over, as
    the reconciler's writes and the members do before a pass that events alone ask for."""
    for _ in range(4):
        result = run_cycle(drop(builders.snapshot(scenario), absent), policies, builders.NOW)
        specs = {ref(spec): spec for spec in scenario["jobs"]}
        moved = False
        for d in result.decisions:
            if d.reason == Reason.ADMITTED:
                spec = specs[d.binding]
                placed = {c.name: c.replicas for c in d.clusters}
                resizable = spec.get("kind", "PyTorchJob") in builders.RESIZABLE
                spec["admitted"] = placed if resizable or len(placed) > 1 else next(iter(placed))
                moved = True
            elif d.reason == Reason.PREEMPTED:
                scenario["jobs"].remove(specs[d.binding])
                moved = True
        if not moved:
            return


def replay(
    scenario: dict[str, Any], absent: Sequence[str], steps: Sequence[Step], policies: PolicySet
) -> list[tuple[Snapshot, Ran | None]]:
    """The first snapshot's cycle, then each pass's rerun (None: a full cycle was needed)."""
    settle(scenario, absent, policies)
    full = builders.snapshot(scenario)
    snapshot = drop(full, absent)
    cache = JobCache()
    last = run_kept(snapshot, policies, builders.NOW, cache)
    done: list[tuple[Snapshot, Ran | None]] = []
    for n, step in enumerate(steps):
        snapshot = apply(snapshot, step, full, n)
        again = rerun(last, snapshot, policies, cache)
        done.append((snapshot, again))
        last = again if again is not None else run_kept(snapshot, policies, builders.NOW, cache)
    return done


@settings(SETTINGS, max_examples=150)
@given(case=passes())
def test_a_rerun_decides_as_the_full_cycle(
    case: tuple[dict[str, Any], list[str], list[Step]], load: Any
) -> None:
    scenario, absent, steps = case
    policies = load(scenario["policies"])
    for snapshot, again in replay(scenario, absent, steps, policies):
        if again is None:
            event("a full cycle")
            continue
        event("a rerun")
        full = run_cycle(snapshot, policies, builders.NOW)
        shown = f"steps {steps}\nfull cycle:\n{table(full)}\nrerun:\n{table(again.result)}"
        assert by_binding(again.result) == by_binding(full), shown
        assert reports(again.result) == reports(full), shown
        assert again.result.stats["pending"] == full.stats["pending"], shown
        assert dict(again.result.jobs) == dict(full.jobs), shown


def test_the_property_mostly_reruns(load: Any) -> None:
    """The passes the property draws are often rerun, with changed jobs of every kind and
    decisions that wait for quota, for room, behind a StrictFIFO head, in backoff (a batch
    of 150 examples sees Backoff, the rarest, for 5 of seeds 0-9: batches until seen)."""
    counts = {"rerun": 0, "all": 0}
    kinds: set[str] = set()
    reasons: set[str] = set()
    wanted = ("WaitingForQuota", "NoClusterFits", "BlockedByHead", "Backoff")

    def draw_batch(number: int) -> None:
        @seed(number)
        @settings(max_examples=150, deadline=None, database=None)
        @given(case=passes())
        def sample(case: tuple[dict[str, Any], list[str], list[Step]]) -> None:
            scenario, absent, steps = case
            policies = load(scenario["policies"])
            done = replay(scenario, absent, steps, policies)
            for step, (_, again) in zip(steps, done, strict=True):
                counts["all"] += 1
                if again is None:
                    continue
                counts["rerun"] += 1
                changed = {ref(spec) for _, spec in step}
                kinds.update(what for what, _ in step)
                decided = again.result.decisions
                reasons.update(str(d.reason) for d in decided if d.binding in changed)

        sample()

    until_covered(draw_batch, lambda: len(kinds) == 4 and all(r in reasons for r in wanted))
    assert counts["rerun"] >= counts["all"] // 3, counts
    assert kinds == {"arrive", "edit", "relabel", "leave"}, kinds
    for reason in wanted:
        assert reason in reasons, f"no rerun decided {reason}: {sorted(reasons)}"


# --- named passes --------------------------------------------------------------------------------
def queue(name: str, **spec: Any) -> dict[str, Any]:
    return {"kind": "Queue", "metadata": {"name": name}, "spec": spec}


GPU = "nvidia.com/gpu"
GPU_NODE = {GPU: 8, "cpu": 64, "memory": "512Gi"}
LOWER = {"withinQueue": "LowerPriority"}
SEARCHER_LEAVES = {
    "policies": [queue("q", preemption=LOWER)],
    "clusters": [{"name": "east", "nodes": 2, "node": {"cpu": 8}}],
    "jobs": [
        {"name": "low", "queue": "q", "priority": 0, "pod": {"cpu": 5}, "admitted": "east"},
        {"name": "high", "queue": "q", "priority": 5, "pod": {"cpu": 5}, "admitted": "east"},
        {"name": "pair", "queue": "q", "priority": 1, "pods": 2, "pod": {"cpu": 5}, "at": 1},
        {"name": "one", "queue": "q", "priority": 1, "pod": {"cpu": 5}, "at": 2},
    ],
}
"""Each node runs a 5-cpu job, the high one out of reach. ``pair`` (two 5-cpu pods) has the
queue's victim search and finds nobody: taking ``low`` frees one node only. ``one``, behind it,
does not search this cycle. Once ``pair`` leaves, ``one`` searches and takes ``low``."""

OLD_ENOUGH = {
    "policies": [
        queue("q"),
        {
            "kind": "SchedulingPolicy",
            "metadata": {"name": "default"},
            "spec": {"reservations": {"after": "1h", "max": 1}},
        },
    ],
    "clusters": [{"name": "east", "nodes": 1, "node": GPU_NODE}],
    "jobs": [
        {"name": "runs", "queue": "q", "pod": {GPU: 8}, "admitted": "east"},
        {"name": "waited", "queue": "q", "pod": {GPU: 8}, "at": 0},
    ],
}
"""A job queued two hours ago arrives (a relist found it, say) in a fleet whose policy holds
room for jobs waiting an hour: its turn comes first and holds ``east`` for it."""

TWO_ARRIVE = {
    **SEARCHER_LEAVES,
    "jobs": [
        *SEARCHER_LEAVES["jobs"][:2],  # low and high, admitted
        {"name": "big", "queue": "q", "priority": 1, "pods": 2, "pod": {"cpu": 5}, "at": 2},
        {"name": "one", "queue": "q", "priority": 1, "pod": {"cpu": 5}, "at": 1},
    ],
}
"""SEARCHER_LEAVES' fleet, both waiting jobs arriving in one pass: ``one`` goes first in the
queue and takes ``low``, although ``big`` (decided first by name) finds nobody."""

SHAPE_SEARCHED = {
    "policies": [queue("q", preemption=LOWER, max={"cpu": 10})],
    "clusters": [
        {"name": "east", "nodes": 2, "node": {"cpu": 8}},
        {"name": "tiny", "nodes": 1, "node": {"cpu": 2}},
    ],
    "jobs": [
        {"name": "low", "queue": "q", "priority": 0, "pod": {"cpu": 5}, "admitted": "east"},
        {"name": "high", "queue": "q", "priority": 5, "pod": {"cpu": 5}, "admitted": "east"},
        {
            "name": "pinned",
            "queue": "q",
            "priority": 1,
            "pod": {"cpu": 5},
            "at": 1,
            "placement": {"clusters": ["tiny"]},
        },
        {"name": "free", "queue": "q", "priority": 1, "pod": {"cpu": 5}, "at": 2},
    ],
}
"""The queue's max is taken. ``pinned`` may only go to ``tiny``, where it never fits: its
search finds no cluster, and ``free``, of the same shape, does not search after it. Once
``pinned`` leaves, ``free`` searches and takes ``low``."""

NOMINATED_BEHIND = {
    "policies": [queue("q", strategy="StrictFIFO"), queue("other")],
    "clusters": [{"name": "east", "nodes": 2, "node": {"cpu": 8}}],
    "jobs": [
        {"name": "runs", "queue": "other", "priority": 5, "pod": {"cpu": 8}, "admitted": "east"},
        {"name": "head", "queue": "q", "priority": 1, "pods": 2, "pod": {"cpu": 8}, "at": 1},
        {
            "name": "nominee",
            "queue": "q",
            "priority": 1,
            "pod": {"cpu": 10},
            "at": 2,
            "nominated": "east",
        },
    ],
}
"""A StrictFIFO head waits for two free nodes; behind it waits a job its preemption nominated
to ``east``. Edited to fit, the nominee is admitted before the head blocks the queue."""

NAMED: dict[str, tuple[dict[str, Any], list[str], Step, str, str]] = {
    # scenario, absent at first, the pass's changes, the job, its reason in the full cycle
    "the job that had its queue's search leaves": (
        SEARCHER_LEAVES,
        [],
        [("leave", SEARCHER_LEAVES["jobs"][2])],
        "team/one-pytorchjob",
        "Preempting",
    ),
    "two jobs of a queue arrive, the first by name finds no victims": (
        TWO_ARRIVE,
        ["team/big-pytorchjob", "team/one-pytorchjob"],
        [("arrive", TWO_ARRIVE["jobs"][2]), ("arrive", TWO_ARRIVE["jobs"][3])],
        "team/one-pytorchjob",
        "Preempting",
    ),
    "the job whose search spared the jobs of its shape leaves": (
        SHAPE_SEARCHED,
        [],
        [("leave", SHAPE_SEARCHED["jobs"][2])],
        "team/free-pytorchjob",
        "Preempting",
    ),
    "a nominated job behind a StrictFIFO head is edited to fit": (
        NOMINATED_BEHIND,
        [],
        [("edit", {**NOMINATED_BEHIND["jobs"][2], "pod": {"cpu": 6}})],
        "team/nominee-pytorchjob",
        "Admitted",
    ),
    "a job old enough for a reservation arrives": (
        OLD_ENOUGH,
        ["team/waited-pytorchjob"],
        [("arrive", OLD_ENOUGH["jobs"][1])],
        "team/waited-pytorchjob",
        "Reserved",
    ),
}


@pytest.mark.parametrize("name", sorted(NAMED))
def test_named_passes_need_a_full_cycle(name: str, load: Any) -> None:
    """Passes where deciding the changed jobs alone would not give the full cycle's decisions:
    ``rerun`` declines them."""
    scenario, absent, step, job, reason = copy.deepcopy(NAMED[name])
    policies = load(scenario["policies"])
    ((snapshot, again),) = replay(scenario, absent, [step], policies)
    full = {d.binding: d for d in run_cycle(snapshot, policies, builders.NOW).decisions}
    assert str(full[job].reason) == reason, table(run_cycle(snapshot, policies, builders.NOW))
    assert again is None
