"""A memo whose memory is bounded whatever its keys are: two generations, within a number of
entries and an estimated size.

Keys come from what users write (a label's value is part of the key of an expression that reads
it), so a stream of distinct values must not grow memory without bound. A ``BoundedMemo`` keeps
its entries in two generations. A hit in the current one costs one dict lookup; a hit in the old
one moves the entry into the current one. When the current generation is full (half of
``max_entries``, or half of ``max_weight``), it becomes the old one and the old one is dropped:
whatever was used since the last turn survives it, and a flood of distinct keys only makes the
generations turn faster. An entry heavier than ``max_entry_weight`` is not kept at all.

Weights are estimates of the bytes an entry holds (``footprint``: CPython's object sizes of the
key and the value, plus the slot in the dict), counted when the entry is stored.

Thread safety: lookups read a dict under the GIL, without a lock; stores, moves and turns take
the memo's lock, so the counts stay exact. A lookup racing a turn may miss an entry that was
just moved, and the caller computes it again.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Hashable, Mapping
from typing import Any, Final

ENTRY_OVERHEAD: Final = 104  # a dict slot and its share of the table, and the value's tuple


class BoundedMemo:
    """Values by key, at most ``max_entries`` of them and ``max_weight`` estimated bytes."""

    __slots__ = (
        "_generation_entries",
        "_generation_weight",
        "_lock",
        "_old",
        "_old_weight",
        "_weight",
        "current",
        "max_entries",
        "max_entry_weight",
        "max_weight",
        "turns",
    )

    def __init__(
        self,
        max_entries: int,
        max_weight: int = 256 << 20,
        max_entry_weight: int = 64 << 10,
    ) -> None:
        if max_entries < 2:
            raise ValueError(f"max_entries must be at least 2, got {max_entries}")
        if max_entry_weight < ENTRY_OVERHEAD or max_weight < 2 * max_entry_weight:
            raise ValueError(
                f"max_weight ({max_weight}) must hold two entries of max_entry_weight "
                f"({max_entry_weight}), at least {ENTRY_OVERHEAD} bytes each"
            )
        self.max_entries = max_entries
        self.max_weight = max_weight
        self.max_entry_weight = max_entry_weight
        self._generation_entries = max_entries // 2
        self._generation_weight = max_weight // 2
        self.current: dict[Hashable, Any] = {}  # read directly by hot callers (``get``)
        self._old: dict[Hashable, Any] = {}
        self._weight = 0
        self._old_weight = 0
        self._lock = threading.Lock()
        self.turns = 0  # how many times the generations turned (statistics)

    def get(self, key: Hashable) -> Any:
        """The value kept for ``key``, or None."""
        found = self.current.get(key)
        return found if found is not None else self.recall(key)

    def recall(self, key: Hashable) -> Any:
        """The value kept for ``key`` in the old generation (moved into the current one), or
        None: ``get`` for a caller that looked in ``current`` itself."""
        if not self._old:
            return None
        with self._lock:
            found = self._old.pop(key, None)
            if found is not None:
                weight = footprint(key) + footprint(found) + ENTRY_OVERHEAD
                self._old_weight -= weight
                self._store(key, found, weight)
        return found

    def put(self, key: Hashable, value: Any) -> bool:
        """Keep ``value`` (not None) for ``key``, unless it is too heavy; whether it was kept."""
        limit = self.max_entry_weight
        weight = footprint(key, limit) + footprint(value, limit) + ENTRY_OVERHEAD
        if weight > limit:
            return False
        with self._lock:
            self._store(key, value, weight)
        return True

    def _store(self, key: Hashable, value: Any, weight: int) -> None:
        if key in self.current:
            return  # another thread stored it first: equal, and counted already
        if (
            len(self.current) >= self._generation_entries
            or self._weight + weight > self._generation_weight
        ):
            self._old, self._old_weight = self.current, self._weight
            self.current, self._weight = {}, 0
            self.turns += 1
        self.current[key] = value
        self._weight += weight

    @property
    def weight(self) -> int:
        """The estimated bytes held, both generations: at most ``max_weight``."""
        return self._weight + self._old_weight

    def __len__(self) -> int:
        return len(self.current) + len(self._old)

    def clear(self) -> None:
        with self._lock:
            self.current, self._old = {}, {}
            self._weight = self._old_weight = 0


def footprint(value: Any, limit: int | None = None) -> int:
    """An estimate of the bytes ``value`` holds: ``sys.getsizeof`` summed over the tuples,
    lists, dicts, sets and slotted objects inside it (shared objects counted each time, classes
    not at all). With a ``limit``, the walk stops once the sum is above it."""
    total = 0
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is type:
            continue  # a type tag in a frozen key: shared, only the reference counts
        total += sys.getsizeof(item)
        if limit is not None and total > limit:
            break
        if kind is str or kind is int or kind is float or kind is bool or item is None:
            continue
        if kind is tuple or kind is list or kind is frozenset or kind is set:
            stack.extend(item)
        elif isinstance(item, Mapping):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, tuple | list):
            stack.extend(item)
        else:
            slots = getattr(kind, "__slots__", ())
            for name in (slots,) if isinstance(slots, str) else slots:
                stack.append(getattr(item, name, None))
    return total
