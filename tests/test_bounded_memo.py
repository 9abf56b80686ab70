"""BoundedMemo: within its entries and its estimated bytes whatever the keys, keeping what was
used lately; ``footprint`` estimates what an entry holds."""

from __future__ import annotations

import sys
import threading
import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.policy.access import MISSING, STOPPED, freeze
from engine.policy.bounded import ENTRY_OVERHEAD, BoundedMemo, footprint


def test_distinct_keys_turn_generations_within_max_entries():
    memo = BoundedMemo(max_entries=10)
    for n in range(1000):
        assert memo.put(("label", f"value-{n}"), (n,))
        assert len(memo) <= 10
    assert memo.turns == 199  # a turn every 5 new keys after the first 5
    assert memo.get(("label", "value-999")) == (999,)
    assert memo.get(("label", "value-0")) is None


def test_what_was_used_since_the_last_turn_survives_it():
    memo = BoundedMemo(max_entries=4)
    memo.put("hot", 1)
    for n in range(100):
        memo.put(n, n)
        assert memo.get("hot") == 1  # each hit in the old generation moves it forward
    assert memo.turns > 10


def test_heavy_keys_turn_generations_within_max_weight():
    memo = BoundedMemo(max_entries=1_000_000, max_weight=1 << 20, max_entry_weight=64 << 10)
    for n in range(2000):
        assert memo.put(f"{n:05d}" + "x" * 10_000, True)
        assert memo.weight <= memo.max_weight
    assert 50 <= len(memo) <= 103  # about 10 kB each in 1 MiB
    assert memo.weight == sum(
        footprint(k) + footprint(v) + ENTRY_OVERHEAD
        for generation in (memo.current, memo._old)
        for k, v in generation.items()
    )


def test_an_entry_heavier_than_max_entry_weight_is_not_kept():
    memo = BoundedMemo(max_entries=100, max_weight=1 << 20, max_entry_weight=4096)
    assert not memo.put("x" * 5000, 1)
    assert not memo.put("key", "y" * 5000)  # the value counts too
    assert memo.put("x" * 3000, 1)
    assert (len(memo), memo.get("key")) == (1, None)


def test_memory_held_is_bounded_and_close_to_the_weight():
    """Counted in bytes with tracemalloc: 20,000 distinct 1 kB keys through a memo of 1 MiB
    hold about 1 MiB, not the 20 MB they would unbounded."""
    memo = BoundedMemo(max_entries=1_000_000, max_weight=1 << 20)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for n in range(20_000):
            memo.put(freeze({"labels": {"team": f"{n:06d}" + "x" * 1000}}), (True, f"q{n}"))
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert memo.weight <= 1 << 20
    assert 0.5 * memo.weight < held < 1.25 * memo.weight + (64 << 10)


def test_concurrent_use_keeps_the_counts():
    memo = BoundedMemo(max_entries=50, max_weight=1 << 20)

    def worker(offset: int) -> None:
        for n in range(2000):
            key = (offset + n) % 300
            if memo.get(key) is None:
                memo.put(key, (key, "v" * (key % 7)))
            assert memo.get(key) in (None, (key, "v" * (key % 7)))

    threads = [threading.Thread(target=worker, args=(t * 37,)) for t in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(memo) <= 50
    assert memo.weight == sum(
        footprint(k) + footprint(v) + ENTRY_OVERHEAD
        for generation in (memo.current, memo._old)
        for k, v in generation.items()
    )


def test_rejects_bounds_that_cannot_hold_two_generations():
    with pytest.raises(ValueError, match="max_entries"):
        BoundedMemo(max_entries=1)
    with pytest.raises(ValueError, match="max_weight"):
        BoundedMemo(max_entries=10, max_weight=1000, max_entry_weight=1000)


FROZEN = st.recursive(
    st.one_of(st.text(max_size=50), st.integers(), st.floats(allow_nan=False), st.none()),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=20,
).map(freeze)


@settings(max_examples=100, deadline=None)
@given(value=FROZEN)
def test_footprint_counts_every_object_a_frozen_key_holds(value):
    """At least the bytes of its strings; type tags and markers counted as references only."""
    size = footprint(value)
    assert size >= sys.getsizeof(value)
    strings: list[str] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            strings.append(item)
        elif isinstance(item, tuple):
            stack.extend(item)
    assert size >= sum(sys.getsizeof(s) for s in strings)
    assert footprint((MISSING, 1)) < 200 and footprint((STOPPED, 1, (int, 2))) < 300
    limited = footprint(value, limit=100)  # the walk stops once above the limit
    assert limited == size if size <= 100 else 100 < limited <= size
