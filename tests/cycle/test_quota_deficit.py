"""What preemption relies on in the quota tree, checked on random queue trees.

- ``check`` answers as the full check (``_check``), for any demand and usage.
- ``Helping`` finds the queues whose usage, taken away, raises a leaf's room as ``room_without``
  does, answering for queues outside the leaf's path from what reaches the root.
- ``deficit`` (from ``room`` and ``headroom``) is empty exactly when ``check`` admits, for
  demands within ``potential`` and every ``max``; taking usage away never lowers ``room`` and
  raises it by at most the amount taken.
- ``remove`` of a sum of amounts added separately leaves the state of removing them one by one
  (and of never having added them): the state depends only on the usage added to each queue.
- ``trial`` keeps the version, and every ``add`` and ``remove`` gets a version never seen
  before, so one version never names two states (and ``check``, which keeps its answers per
  version, answers as afresh).
- ``fewest_sorted`` (amounts given sorted), ``fewest`` and ``fewest_merged`` (amounts of
  several queues, up to a cap) count the victims a plain reference counts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from itertools import pairwise
from types import SimpleNamespace
from typing import cast

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from engine import vectors
from engine.cycle.jobs.model import AdmittedJob
from engine.cycle.preemption.bounds import Helping, fewest, fewest_merged, fewest_sorted
from engine.cycle.preemption.victims import largest
from engine.cycle.quota.tree import ROOT, QuotaNode, QuotaTree
from engine.cycle.reasons import Reason
from engine.policy.checks import check_queues
from engine.policy.model import Origin, Queue, QueuePreemption, Strategy

RESOURCES = ("cpu", "nvidia.com/gpu")
UNLIMITED = "pods"  # named by no queue: never limited by quota
SETTINGS = settings(
    max_examples=150,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

Vec = dict[str, int]
State = dict[str, tuple[Vec, Vec]]  # queue → (usage, total)


@dataclass(frozen=True)
class Case:
    """A valid queue tree, the fleet's capacity (milli-units) and usage added in order."""

    queues: list[Queue]
    capacity: dict[str, int]
    adds: list[tuple[str, Vec]]  # (queue, amount)

    @property
    def leaves(self) -> list[str]:
        parents = {q.parent for q in self.queues}
        return [q.name for q in self.queues if q.name not in parents]

    def tree(self, adds: Sequence[tuple[str, Vec]] | None = None) -> QuotaTree:
        tree = QuotaTree(self.queues, self.capacity)
        for name, amount in self.adds if adds is None else adds:
            tree.add(tree.nodes[name], amount)
        return tree


# --- strategies ----------------------------------------------------------------------------------
units = st.integers(0, 16).map(lambda n: Fraction(n, 2))  # 0 to 8 in halves


@st.composite
def queue_trees(draw: st.DrawFn) -> list[Queue]:
    """1–3 top-level queues, each with 0–3 children with 0–2 children each (up to 3 levels),
    with random guarantees, maxes and limits that pass the policy checks."""
    parent_of: dict[str, str | None] = {}
    for i in range(draw(st.integers(1, 3))):
        parent_of[f"t{i}"] = None
        for j in range(draw(st.integers(0, 3))):
            parent_of[f"t{i}{j}"] = f"t{i}"
            for k in range(draw(st.integers(0, 2))):
                parent_of[f"t{i}{j}{k}"] = f"t{i}{j}"
    queues: dict[str, Queue] = {}
    for name in sorted(parent_of, key=len, reverse=True):  # children before their parent
        children = [queues[c] for c, p in parent_of.items() if p == name]
        guarantee: dict[str, Fraction] = {}
        for r in RESOURCES:
            handed = sum((c.guarantee.get(r, Fraction(0)) for c in children), Fraction(0))
            if draw(st.integers(0, 4)):  # usually named, at least what children are handed
                guarantee[r] = handed + draw(units)
        most = {
            r: guarantee.get(r, Fraction(0)) + draw(units)
            for r in RESOURCES
            if not draw(st.integers(0, 2))
        }
        lending = None
        if not draw(st.integers(0, 2)):
            lending = {
                r: Fraction(draw(st.integers(0, int(guarantee.get(r, 0) * 2))), 2)
                for r in RESOURCES
                if draw(st.booleans())
            }
        borrowing = None
        if not draw(st.integers(0, 2)):
            borrowing = {r: draw(units) for r in RESOURCES if draw(st.booleans())}
        queues[name] = Queue(
            name=name,
            parent=parent_of[name],
            priority=0,
            weight=1.0,
            strategy=Strategy.BEST_EFFORT_FIFO,
            guarantee=guarantee,
            max=most,
            borrowing_limit=borrowing,
            lending_limit=lending,
            preemption=QueuePreemption(),
            origin=Origin("test.yaml", 1),
        )
    found = list(queues.values())
    problems: list[str] = []
    check_queues(found, lambda name, path, message: problems.append(f"{name}: {message}"))
    assert not problems, problems  # the trees are ones the policy loader accepts
    return found


def milli(top: int) -> st.SearchStrategy[int]:
    """Milli-amounts up to ``top``, often whole halves so that they meet quotas exactly."""
    return st.one_of(st.integers(0, top // 500).map(lambda n: n * 500), st.integers(0, top))


amounts = st.fixed_dictionaries(
    {}, optional={"cpu": milli(8000), "nvidia.com/gpu": milli(8000), UNLIMITED: milli(3000)}
)


@st.composite
def cases(draw: st.DrawFn, max_adds: int = 12) -> Case:
    """A tree, a capacity, and usage added to its queues (mostly leaves), whether or not it
    fits: admitted jobs count whatever the policies say now."""
    queues = draw(queue_trees())
    capacity = {r: draw(milli(40_000)) for r in (*RESOURCES, UNLIMITED) if draw(st.integers(0, 4))}
    case = Case(queues, capacity, [])
    names = [q.name for q in queues]
    adds = draw(
        st.lists(
            st.tuples(st.one_of(st.sampled_from(case.leaves), st.sampled_from(names)), amounts),
            max_size=max_adds,
        )
    )
    return Case(queues, capacity, adds)


def normalized(vec: Mapping[str, int]) -> Vec:
    return {r: v for r, v in vec.items() if v}


def state(tree: QuotaTree) -> State:
    return {name: (dict(n.usage), dict(n.total)) for name, n in tree.nodes.items()}


def same_usage(tree: QuotaTree) -> State:
    """The state with zero entries dropped (an amount added then removed leaves a zero)."""
    return {n: (normalized(u), normalized(t)) for n, (u, t) in state(tree).items()}


# --- deficit and check -------------------------------------------------------------------------
def bound(tree: QuotaTree, leaf: QuotaNode, r: str) -> int:
    """The most ``check`` can ever admit of ``r``: within ``potential`` and every ``max``."""
    caps = [node.max[r] for node in leaf.path if r in node.max]
    return min([tree.potential(leaf, r), *caps])


@st.composite
def demands(draw: st.DrawFn, tree: QuotaTree, leaf: QuotaNode) -> Vec:
    """Per quota resource up to ``bound``, often right at the leaf's room or one off it."""
    demand: Vec = {}
    room = tree.room(leaf, tree.resources)
    for r in tree.resources:
        top = bound(tree, leaf, r)
        edges = [v for v in (room[r] - 1, room[r], room[r] + 1) if 0 <= v <= top]
        choices = [st.integers(0, top)] + ([st.sampled_from(edges)] if edges else [])
        need = draw(st.one_of(*choices))
        if need or draw(st.booleans()):
            demand[r] = need
    if draw(st.booleans()):
        demand[UNLIMITED] = draw(st.integers(1, 10**6))
    return demand


@SETTINGS
@given(case=cases(), data=st.data())
def test_the_deficit_is_empty_exactly_when_check_admits(case: Case, data: st.DataObject) -> None:
    """For a demand within ``potential`` and every ``max``, ``deficit`` is empty exactly when
    ``check`` admits it, and otherwise holds only positive amounts of resources demanded."""
    tree = case.tree()
    leaf = tree.nodes[data.draw(st.sampled_from(case.leaves), label="leaf")]
    demand = data.draw(demands(tree, leaf), label="demand")
    miss = tree.check(leaf, demand)
    deficit = tree.deficit(leaf, demand)
    assert (miss is None) == (not deficit), (miss, deficit)
    if miss is not None:
        assert miss.reason == Reason.WAITING_FOR_QUOTA
        assert "even if every other queue were idle" not in miss.message
    assert all(v > 0 and demand.get(r, 0) > 0 for r, v in deficit.items())
    headroom = tree.headroom(leaf, demand)
    assert set(headroom) == {r for r in tree.resources if demand.get(r, 0)}
    assert deficit == {r: -v for r, v in headroom.items() if v < 0}


@SETTINGS
@given(case=cases(), data=st.data())
def test_check_answers_as_the_full_check_for_any_demand(case: Case, data: st.DataObject) -> None:
    """``check`` admits a demand within the room it keeps per leaf without the full check: it
    answers as ``_check`` does for every leaf, for demands beyond ``potential`` or a ``max``
    too, on usage over a ``max``, and after more usage is added."""
    tree = case.tree()
    for _ in range(2):
        for name in case.leaves:
            leaf = tree.nodes[name]
            extreme = st.fixed_dictionaries(
                {}, optional={r: st.integers(0, 50_000) for r in RESOURCES}
            )
            demand = data.draw(st.one_of(demands(tree, leaf), amounts, extreme), label=name)
            assert tree.check(leaf, demand) == tree._check(leaf, demand), (name, demand)
        grown = data.draw(st.sampled_from(case.leaves), label="grown")
        tree.add(tree.nodes[grown], data.draw(amounts, label="added"))


@SETTINGS
@given(case=cases(), data=st.data())
def test_helping_finds_the_queues_whose_usage_raises_the_room(
    case: Case, data: st.DataObject
) -> None:
    """``Helping`` (which answers for queues outside the leaf's path from what they pass up
    to the root) says a queue helps exactly when taking the amount away from it raises the
    leaf's room in a resource of the shortfall, as ``room_without`` finds."""
    tree = case.tree()
    leaf = tree.nodes[data.draw(st.sampled_from(case.leaves), label="leaf")]
    short = data.draw(st.sets(st.sampled_from(tree.resources or ("cpu",))), label="short")
    short_amounts = {r: 1 for r in short if r in tree.resources}
    helps = Helping(tree, leaf, short_amounts)
    now = tree.room(leaf, short_amounts)
    for name in sorted(tree.nodes):
        if name == ROOT:
            continue
        node = tree.nodes[name]
        amount = data.draw(amounts, label=name)
        after = tree.room_without(leaf, ((node, amount),), short_amounts)
        expected = any(after[r] > now[r] for r in short_amounts)
        assert helps(node, amount) == expected, (name, amount)


def test_a_queue_within_what_it_keeps_for_itself_passes_nothing_up_to_help() -> None:
    """``a`` lends none of its guarantee and uses less than it: taking its usage away leaves
    the root as it is, so it does not help ``b``, whose room the root bounds; ``c`` keeps
    nothing for itself and passes all its usage up, so taking it away does help."""
    queues = [
        queue("a", None, guarantee={"cpu": 2}, lending={"cpu": 0}),
        queue("b", None, guarantee={"cpu": 1}),
        queue("c", None, guarantee={"cpu": 1}),
    ]
    tree = Case(queues, {"cpu": 4000}, [("a", {"cpu": 1000}), ("c", {"cpu": 2000})]).tree()
    b = tree.nodes["b"]
    assert tree.deficit(b, {"cpu": 1000}) == {"cpu": 1000}
    helps = Helping(tree, b, {"cpu": 1000})
    assert not helps(tree.nodes["a"], {"cpu": 1000})
    assert helps(tree.nodes["c"], {"cpu": 1000})


def test_the_deficit_counts_a_max_already_in_use() -> None:
    """A leaf with unused guarantee but whose parent's ``max`` is taken by a sibling: ``check``
    waits, and ``deficit`` says what is missing though ``available`` has room."""
    queues = [
        queue("p", None, guarantee={"cpu": 8}, most={"cpu": 6}),
        queue("a", "p", guarantee={"cpu": 4}),
        queue("b", "p", guarantee={"cpu": 4}),
    ]
    tree = QuotaTree(queues, {"cpu": 8000})
    tree.add(tree.nodes["b"], {"cpu": 4000})
    a = tree.nodes["a"]
    assert tree.available(a, "cpu") == 4000
    assert tree.room(a, ["cpu"]) == {"cpu": 2000}
    assert tree.check(a, {"cpu": 2000}) is None
    assert tree.deficit(a, {"cpu": 2000}) == {}
    assert tree.check(a, {"cpu": 3000}) is not None
    assert tree.deficit(a, {"cpu": 3000}) == {"cpu": 1000}


def queue(
    name: str,
    parent: str | None,
    guarantee: Mapping[str, int],
    most: Mapping[str, int] | None = None,
    lending: Mapping[str, int] | None = None,
) -> Queue:
    return Queue(
        name=name,
        parent=parent,
        priority=0,
        weight=1.0,
        strategy=Strategy.BEST_EFFORT_FIFO,
        guarantee={r: Fraction(v) for r, v in guarantee.items()},
        max={r: Fraction(v) for r, v in (most or {}).items()},
        borrowing_limit=None,
        lending_limit=None if lending is None else {r: Fraction(v) for r, v in lending.items()},
        preemption=QueuePreemption(),
        origin=Origin("test.yaml", 1),
    )


# --- room when usage goes ------------------------------------------------------------------------
@SETTINGS
@given(case=cases(), data=st.data())
def test_removing_usage_never_lowers_room_and_raises_it_by_at_most_that_much(
    case: Case, data: st.DataObject
) -> None:
    """Each removal of an amount added before, from any queue and in any order, leaves every
    leaf's ``room`` per resource at least what it was and at most that plus the amount."""
    tree = case.tree()
    order = data.draw(st.permutations(range(len(case.adds))), label="removal order")
    for i in order[: data.draw(st.integers(0, len(order)), label="removals")]:
        name, amount = case.adds[i]
        before = {leaf: tree.room(tree.nodes[leaf], tree.resources) for leaf in case.leaves}
        tree.remove(tree.nodes[name], amount)
        for leaf in case.leaves:
            after = tree.room(tree.nodes[leaf], tree.resources)
            for r in tree.resources:
                gained = after[r] - before[leaf][r]
                assert 0 <= gained <= amount.get(r, 0), (name, amount, leaf, r, gained)


@SETTINGS
@given(case=cases(), data=st.data())
def test_room_without_is_the_room_after_removing_and_changes_nothing(
    case: Case, data: st.DataObject
) -> None:
    """``room_without`` of amounts added before, from any queues and several from one, is
    every leaf's ``room`` once they are removed one by one, and leaves the tree as it was."""
    tree = case.tree()
    count = len(case.adds)
    picked = sorted(data.draw(st.sets(st.integers(0, count - 1)), label="adds")) if count else []
    removed = [(tree.nodes[case.adds[i][0]], case.adds[i][1]) for i in picked]
    before, version = state(tree), tree.version
    expected = case.tree()
    for name, amount in (case.adds[i] for i in picked):
        expected.remove(expected.nodes[name], amount)
    resources = tree.resources
    for leaf in case.leaves:
        found = tree.room_without(tree.nodes[leaf], removed, resources)
        assert found == expected.room(expected.nodes[leaf], resources), (leaf, picked)
    assert state(tree) == before and tree.version == version


# --- remove of a sum -----------------------------------------------------------------------------
@SETTINGS
@given(case=cases(), data=st.data())
def test_removing_a_sum_leaves_the_state_of_removing_its_parts_one_by_one(
    case: Case, data: st.DataObject
) -> None:
    """Parts added separately to one leaf, among other usage, then removed as one sum: every
    node's usage and total are those of removing the parts one by one in any order, and (zeros
    aside) those of a tree the parts were never added to."""
    name = data.draw(st.sampled_from(case.leaves), label="leaf")
    parts = data.draw(st.lists(amounts, min_size=1, max_size=4), label="parts")
    adds = list(case.adds)
    for part in parts:
        adds.insert(data.draw(st.integers(0, len(adds)), label="added at"), (name, part))
    summed, separate = case.tree(adds), case.tree(adds)
    total: Vec = {}
    for part in parts:
        vectors.add_into(total, part)
    summed.remove(summed.nodes[name], total)
    for i in data.draw(st.permutations(range(len(parts))), label="removal order"):
        separate.remove(separate.nodes[name], parts[i])
    assert state(summed) == state(separate)
    assert same_usage(summed) == same_usage(case.tree())


def test_removing_a_sum_across_a_guarantee_passes_up_only_what_was_borrowed() -> None:
    """A leaf keeping its guarantee of 4 (lends none) using 3 + 3 stores 2 in its parent:
    removing 6 at once or 3 twice leaves nothing there, where passing each whole 3 up would
    leave -1."""
    queues = [
        queue("p", None, guarantee={"cpu": 8}),
        queue("a", "p", guarantee={"cpu": 4}, lending={"cpu": 0}),
    ]
    by_sum, by_parts = QuotaTree(queues, {"cpu": 8000}), QuotaTree(queues, {"cpu": 8000})
    for tree in (by_sum, by_parts):
        tree.add(tree.nodes["a"], {"cpu": 3000})
        tree.add(tree.nodes["a"], {"cpu": 3000})
        assert tree.nodes["p"].usage["cpu"] == 2000
    by_sum.remove(by_sum.nodes["a"], {"cpu": 6000})
    by_parts.remove(by_parts.nodes["a"], {"cpu": 3000})
    by_parts.remove(by_parts.nodes["a"], {"cpu": 3000})
    for tree in (by_sum, by_parts):
        assert tree.nodes["a"].usage["cpu"] == tree.nodes["p"].usage["cpu"] == 0
        assert tree.nodes[ROOT].usage["cpu"] == 0


# --- versions ------------------------------------------------------------------------------------
def test_a_trial_keeps_the_version_and_a_later_change_gets_a_new_one() -> None:
    """Inside a trial each change moves the version; after it the version is the one before,
    and a block that raises leaves a new version; a later real change gets one never seen."""
    tree = QuotaTree([queue("a", None, guarantee={"cpu": 4})], {"cpu": 8000})
    a = tree.nodes["a"]
    tree.add(a, {"cpu": 1000})
    start = tree.version
    seen = {0, start}
    with tree.trial():
        tree.add(a, {"cpu": 2000})
        assert tree.version not in seen
        seen.add(tree.version)
        tree.remove(a, {"cpu": 2000})
        assert tree.version not in seen
        seen.add(tree.version)
    assert tree.version == start
    with pytest.raises(RuntimeError), tree.trial():
        tree.add(a, {"cpu": 2000})
        seen.add(tree.version)
        tree.remove(a, {"cpu": 2000})
        seen.add(tree.version)
        raise RuntimeError
    # a block that raised may not have undone its changes: its state gets a new version
    assert tree.version not in seen
    seen.add(tree.version)
    tree.add(a, {"cpu": 500})
    assert tree.version not in seen


@st.composite
def programs(draw: st.DrawFn, depth: int = 0) -> list[tuple]:
    """Steps: ``("add", queue index, amount)``, ``("remove", index of an amount held)``, or
    ``("trial", steps)`` whose changes are undone before the trial ends (nested up to 2)."""
    kinds = ["add", "remove", "trial"] if depth < 2 else ["add", "remove"]
    steps: list[tuple] = []
    for _ in range(draw(st.integers(0, 4))):
        kind = draw(st.sampled_from(kinds))
        if kind == "add":
            steps.append(("add", draw(st.integers(0, 100)), draw(amounts)))
        elif kind == "remove":
            steps.append(("remove", draw(st.integers(0, 100))))
        else:
            steps.append(("trial", draw(programs(depth + 1))))
    return steps


@SETTINGS
@given(case=cases(max_adds=4), program=programs(), probes=st.lists(amounts, max_size=3))
@example(
    case=Case([queue("a", None, guarantee={"cpu": 4})], {"cpu": 4000}, []),
    program=[("trial", [("add", 0, {"cpu": 1000})]), ("add", 0, {"cpu": 2000})],
    probes=[{"cpu": 3500}],
)
def test_one_version_never_names_two_states(
    case: Case, program: list[tuple], probes: list[Vec]
) -> None:
    """Adds, removes and trials (nested, their changes undone inside): every change gets a
    version never seen before, a trial ends on the version it began with, and whenever a
    version comes back the usage is the same; so ``check``, which keeps its answers per
    version, answers after every step as a tree given only the usage held then."""
    tree = case.tree()
    names = [q.name for q in case.queues]
    held = [(tree.nodes[name], amount) for name, amount in case.adds]
    seen: dict[int, State] = {tree.version: same_usage(tree)}

    def changed() -> None:
        assert tree.version not in seen
        seen[tree.version] = same_usage(tree)

    def probe() -> None:
        assert seen[tree.version] == same_usage(tree)
        afresh = case.tree([(node.name, amount) for node, amount in held])
        for leaf in case.leaves:
            for demand in probes:
                assert tree.check(tree.nodes[leaf], demand) == afresh.check(
                    afresh.nodes[leaf], demand
                ), (leaf, demand)

    def run(steps: list[tuple], journal: list[tuple[bool, QuotaNode, Vec]]) -> None:
        for step in steps:
            if step[0] == "add":
                node = tree.nodes[names[step[1] % len(names)]]
                tree.add(node, step[2])
                held.append((node, step[2]))
                journal.append((True, node, step[2]))
                changed()
            elif step[0] == "remove" and held:
                node, amount = held.pop(step[1] % len(held))
                tree.remove(node, amount)
                journal.append((False, node, amount))
                changed()
            elif step[0] == "trial":
                version, before = tree.version, same_usage(tree)
                with tree.trial():
                    inner: list[tuple[bool, QuotaNode, Vec]] = []
                    run(step[1], inner)
                    for added, node, amount in reversed(inner):  # the caller undoes its changes
                        if added:
                            tree.remove(node, amount)
                            held.remove((node, amount))
                        else:
                            tree.add(node, amount)
                            held.append((node, amount))
                        changed()
                        probe()
                assert tree.version == version
                assert same_usage(tree) == before
            probe()

    probe()
    run(program, [])


# --- fewest ------------------------------------------------------------------------------------
NAMES = ("cpu", "memory", "nvidia.com/gpu")


@st.composite
def shortfalls(draw: st.DrawFn) -> tuple[dict[str, int], list[dict[str, int]]]:
    """Victims' amounts, and per resource a shortfall often right at (or one off) what the
    largest few of them add up to, so that counts differ between resources."""
    held = draw(st.lists(st.dictionaries(st.sampled_from(NAMES), st.integers(0, 10)), max_size=10))
    missing: dict[str, int] = {}
    for r in draw(st.permutations(NAMES))[: draw(st.integers(0, len(NAMES)))]:
        ordered = sorted((a.get(r, 0) for a in held), reverse=True)
        sums = [sum(ordered[:n]) + d for n in range(len(ordered) + 1) for d in (-1, 0, 1)]
        missing[r] = draw(st.one_of(st.integers(-3, sum(ordered) + 3), st.sampled_from(sums)))
    return missing, held


def reference_fewest(missing: Mapping[str, int], held: Sequence[Mapping[str, int]]) -> int | None:
    """Per resource still missing, how many of the largest amounts it takes to cover it; the
    most of those counts, or None when all of them together fall short somewhere."""
    counts = [0]
    for r, need in missing.items():
        if need <= 0:
            continue
        ordered = sorted((a.get(r, 0) for a in held), reverse=True)
        enough = [n for n in range(len(ordered) + 1) if sum(ordered[:n]) >= need]
        if not enough:
            return None
        counts.append(enough[0])
    return max(counts)


@settings(max_examples=300, deadline=None, database=None)
@given(case=shortfalls(), keep_zeros=st.booleans(), omit=st.sets(st.sampled_from(NAMES)))
@example(
    case=({"cpu": 12, "memory": 3}, [{"cpu": 2, "memory": 3}] * 7), keep_zeros=False, omit=set()
)
def test_fewest_sorted_and_fewest_count_as_the_reference(
    case: tuple[dict[str, int], list[dict[str, int]]], keep_zeros: bool, omit: set[str]
) -> None:
    """``fewest`` on the victims' amounts, and ``fewest_sorted`` on each resource's amounts
    given largest first (zeros kept or not, a resource with none given or left out), both
    give the reference's count."""
    missing, held = case
    by_resource = {
        r: tuple(sorted((a.get(r, 0) for a in held if keep_zeros or a.get(r, 0)), reverse=True))
        for r in NAMES
        if r not in omit or any(a.get(r, 0) for a in held)
    }
    expected = reference_fewest(missing, held)
    assert fewest_sorted(missing, by_resource) == expected
    assert fewest(missing, held) == expected


@settings(max_examples=300, deadline=None, database=None)
@given(case=shortfalls(), cut=st.lists(st.integers(0, 10), max_size=4), most=st.integers(1, 12))
def test_fewest_merged_counts_as_the_reference_up_to_its_cap(
    case: tuple[dict[str, int], list[dict[str, int]]], cut: list[int], most: int
) -> None:
    """``fewest_merged`` over the victims split into several queues (each queue's amounts
    largest first, as ``largest`` gives them) counts as the reference, except that a count
    past ``most`` is reported as ``most``."""
    missing, held = case
    bounds = sorted({0, len(held), *(min(c, len(held)) for c in cut)})
    queues = [held[a:b] for a, b in pairwise(bounds)]
    by_queue = [largest(victims_with(q), NAMES) for q in queues]
    amounts = {r: tuple(q[r] for q in by_queue) for r in NAMES}
    expected = reference_fewest(missing, held)
    found = fewest_merged(missing, amounts, most)
    assert found == (None if expected is None else min(expected, most))


def victims_with(held: Sequence[Mapping[str, int]]) -> list[AdmittedJob]:
    """Stand-ins with only the ``demand`` that ``largest`` reads."""
    return [cast(AdmittedJob, SimpleNamespace(demand=dict(a))) for a in held]
