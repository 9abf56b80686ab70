"""``QuotaTree.apart``: the quota with some usage removed for a block, then exactly as before.

A preemption search looks at the quota with the cycle's earlier victims gone
(``VictimIndex.gone``); the blocks follow each other, mostly from the same state, so the state
inside is swapped in again rather than computed again, under the same version.
"""

from __future__ import annotations

import pytest

from engine.cycle.quota.tree import QuotaTree
from tests.cycle.test_quota_deficit import queue

CPU = 16000


def _tree() -> QuotaTree:
    tree = QuotaTree(
        [
            queue("p", None, guarantee={"cpu": 12}),
            queue("a", "p", guarantee={"cpu": 4}),
            queue("b", "p", guarantee={"cpu": 4}),
            queue("c", None, guarantee={"cpu": 4}),
        ],
        {"cpu": CPU},
    )
    tree.add(tree.nodes["a"], {"cpu": 9000})  # borrows 5 of p's and the fleet's
    tree.add(tree.nodes["c"], {"cpu": 4000})
    return tree


def _state(tree: QuotaTree) -> dict[str, tuple[dict[str, int], dict[str, int]]]:
    """Every node's total and usage (an amount of 0 as none: an update may leave it)."""
    return {
        name: ({r: v for r, v in n.total.items() if v}, {r: v for r, v in n.usage.items() if v})
        for name, n in [*tree.nodes.items(), ("<root>", tree.root)]
    }


def _without(amount: int, more_b: int = 0) -> dict:
    """The state of ``_tree()`` with ``more_b`` added to b and ``amount`` removed from a."""
    tree = _tree()
    if more_b:
        tree.add(tree.nodes["b"], {"cpu": more_b})
    tree.remove(tree.nodes["a"], {"cpu": amount})
    return _state(tree)


def test_the_block_sees_the_usage_gone_and_the_state_comes_back() -> None:
    tree = _tree()
    a, b = tree.nodes["a"], tree.nodes["b"]
    before, version = _state(tree), tree.version
    assert tree.deficit(b, {"cpu": 4000}) == {"cpu": 1000}  # 3 of 16 left
    with tree.apart([(a, {"cpu": 5000})], key=1):
        assert tree.deficit(b, {"cpu": 4000}) == {}
        assert _state(tree) == _without(5000)
        inside = tree.version
        assert inside != version
    assert _state(tree) == before and tree.version == version
    assert tree.deficit(b, {"cpu": 4000}) == {"cpu": 1000}
    with tree.apart([(a, {"cpu": 5000})], key=1):  # the same key from the same state
        assert tree.version == inside
        assert tree.deficit(b, {"cpu": 4000}) == {}
    tree.add(b, {"cpu": 1000})
    with tree.apart([(a, {"cpu": 5000})], key=1):  # another state: another version
        assert tree.version != inside
        assert _state(tree) == _without(5000, more_b=1000)
    assert tree.nodes["a"].total["cpu"] == 9000


def test_changes_undone_inside_the_block_keep_its_state() -> None:
    tree = _tree()
    a, b = tree.nodes["a"], tree.nodes["b"]
    with tree.apart([(a, {"cpu": 5000})], key=1):
        inside = _state(tree)
        with tree.trial():
            tree.add(b, {"cpu": 2000})
            tree.remove(b, {"cpu": 2000})
    with tree.apart([(a, {"cpu": 5000})], key=1):
        assert _state(tree) == inside


def test_a_block_that_raises_leaves_a_new_version() -> None:
    """As with ``trial``, a change the block did not undo may stay: the version is a new one,
    so nothing kept for the version before is taken for this state."""
    tree = _tree()
    a, b = tree.nodes["a"], tree.nodes["b"]
    version = tree.version
    with tree.apart([(a, {"cpu": 5000})], key=1):
        pass
    with pytest.raises(RuntimeError), tree.apart([(a, {"cpu": 5000})], key=1):
        tree.add(b, {"cpu": 1000})  # not undone
        raise RuntimeError("a search failed")
    assert tree.version != version
    assert _state(tree) == _without(0, more_b=1000)
    with tree.apart([(a, {"cpu": 5000})], key=1):  # computed again from the state now
        assert _state(tree) == _without(5000, more_b=1000)


def test_a_change_the_block_makes_for_good_stays() -> None:
    """A change not undone inside the block (not on trial) is not swapped away: the state is
    the one before with the change, under a new version, and the next block computes anew."""
    tree = _tree()
    a, b = tree.nodes["a"], tree.nodes["b"]
    version = tree.version
    with tree.apart([(a, {"cpu": 5000})], key=1):
        tree.add(b, {"cpu": 1000})  # counted on b, p and the root alike
    assert _state(tree) == _without(0, more_b=1000)
    assert tree.version != version
    with tree.apart([(a, {"cpu": 5000})], key=1):
        assert _state(tree) == _without(5000, more_b=1000)
