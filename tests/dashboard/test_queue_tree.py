"""The queues in the tree's order, as the visibility API lists them a page at a time."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from engine.cycle import QueueReport
from reconciler.visibility import tree_order


def queue(name: str, parent: str = "") -> QueueReport:
    return QueueReport(name, parent, {}, {}, {}, 0.0, 0, 0)


def test_each_queue_comes_after_its_parent_children_by_name_and_orphans_last() -> None:
    queues = [queue("b"), queue("a"), queue("a2", "a"), queue("a1", "a"), queue("x", "gone"),
              queue("a1x", "a1")]  # fmt: skip
    assert tree_order(queues) == [
        ("a", 0), ("a1", 1), ("a1x", 2), ("a2", 1), ("b", 0), ("x", 0)
    ]  # fmt: skip


@given(st.lists(st.tuples(st.integers(0, 12), st.integers(0, 12)), max_size=30))
def test_every_queue_is_listed_once_whatever_the_links(links: list[tuple[int, int]]) -> None:
    queues = {f"q{a}": queue(f"q{a}", f"q{b}" if b != a else "") for a, b in links}
    order = tree_order(list(queues.values()))  # cycles of parents included
    assert sorted(name for name, _ in order) == sorted(queues)
