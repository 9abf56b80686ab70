"""Step 2 of a cycle, kept between cycles (``quota.held``): over successive cycles in which
admitted jobs come, go and are read again, ``HeldSums.held`` with ``add_held`` leaves the quota
tree that adding each admitted job in order leaves (usage, totals with their resources in the
same order), the same count per queue in the same order, and the same jobs in flight.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from engine.cycle.jobs.model import AdmittedJob, Mapped
from engine.cycle.quota.held import HeldSums, add_held
from engine.cycle.quota.tree import QuotaTree
from tests.cycle.test_quota_deficit import RESOURCES, SETTINGS, UNLIMITED, milli, queue_trees

NOW = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)
EXTRA = "example.com/fpga"  # named by some jobs only, so totals' resource orders differ


@st.composite
def demands(draw: st.DrawFn) -> dict[str, int]:
    names = draw(st.permutations((*RESOURCES, UNLIMITED, EXTRA)))
    return {r: draw(milli(8000)) for r in names[: draw(st.integers(0, len(names)))]}


@st.composite
def histories(draw: st.DrawFn) -> tuple[list, dict[str, int], list[list[AdmittedJob]]]:
    """A queue tree, a capacity, and the admitted jobs of successive cycles: drawn from a pool
    of jobs (some to a queue the tree does not have, some read again: an equal new object)."""
    queues = draw(queue_trees())
    capacity = {r: draw(milli(40_000)) for r in (*RESOURCES, UNLIMITED)}
    names = [q.name for q in queues] + ["nowhere"]
    pool = []
    for i in range(draw(st.integers(0, 14))):
        flying = frozenset(draw(st.sets(st.sampled_from(("east", "west")), max_size=1)))
        mapped = Mapped(draw(st.sampled_from(names)), "t", 0, 1, False)
        demand = draw(demands())
        pool.append(AdmittedJob(None, mapped, NOW, {}, {}, flying, f"j{i}", demand))  # type: ignore[arg-type]
        if draw(st.integers(0, 3)) == 0:
            pool.append(dataclasses.replace(pool[-1]))  # read again: equal, another object
    cycles = []
    for _ in range(draw(st.integers(1, 6))):
        picked = draw(st.sets(st.integers(0, len(pool) - 1))) if pool else set()
        admitted = [pool[i] for i in sorted(picked)]
        if admitted and draw(st.integers(0, 9)) == 0:
            admitted.append(admitted[0])  # one object twice: counted twice, nothing kept
        cycles.append(admitted)
    return queues, capacity, cycles


def one_by_one(tree: QuotaTree, admitted: list[AdmittedJob]) -> Counter[str]:
    """The plain accounting: each job added in order."""
    for job in admitted:
        node = tree.node(job.mapped.queue)
        if node is not None:
            tree.add(node, job.demand)
    return Counter(j.mapped.queue for j in admitted if tree.node(j.mapped.queue))


def seen(tree: QuotaTree) -> dict[str, tuple[list, list]]:
    return {n: (list(q.usage.items()), list(q.total.items())) for n, q in tree.nodes.items()}


@SETTINGS
@given(history=histories())
def test_kept_sums_leave_the_tree_of_one_add_per_job(history: tuple) -> None:
    queues, capacity, cycles = history
    kept = HeldSums()
    for admitted in cycles:
        plain, summed = QuotaTree(queues, capacity), QuotaTree(queues, capacity)
        expected = one_by_one(plain, admitted)
        held = kept.held(admitted)
        counts = add_held(summed, held)
        assert seen(summed) == seen(plain)
        assert list(counts.items()) == list(expected.items())
        assert held.in_flight == [j for j in admitted if j.in_flight]
        for name, node in summed.nodes.items():  # what reads the tree reads the same
            leaf = plain.nodes[name]
            assert summed.room(node, summed.resources) == plain.room(leaf, plain.resources)
