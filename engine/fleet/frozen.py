"""An immutable, hashable, key-sorted mapping for the values a cycle reads."""

from __future__ import annotations

import weakref
from collections.abc import (
    Collection,
    ItemsView,
    Iterable,
    Iterator,
    KeysView,
    Mapping,
    ValuesView,
)
from operator import itemgetter
from typing import Any, Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")
_KEY = itemgetter(0)  # an item's key: values need not compare


class FrozenDict(Mapping[K, V], Generic[K, V]):
    """A read-only mapping, sorted by key so equal contents print and iterate the same."""

    __slots__ = ("__weakref__", "_after", "_hash", "_items")

    def __init__(self, items: Mapping[K, V] | None = None) -> None:
        self._items: dict[K, V] = dict(sorted((items or {}).items(), key=_KEY))
        self._hash: int | None = None
        self._after: tuple[weakref.ref[FrozenDict[K, V]], Collection[K]] | None = None

    def __getitem__(self, key: K) -> V:
        return self._items[key]

    def __iter__(self) -> Iterator[K]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    # The dict's own lookups and views: Mapping's generic ones go through __getitem__ in
    # Python, and cycles and passes look up binding annotations hundreds of thousands of times.
    def __contains__(self, key: object) -> bool:
        return key in self._items

    def get(self, key: K, default: Any = None) -> Any:  # type: ignore[override]
        return self._items.get(key, default)

    def keys(self) -> KeysView[K]:
        return self._items.keys()

    def items(self) -> ItemsView[K, V]:
        return self._items.items()

    def values(self) -> ValuesView[V]:
        return self._items.values()

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(tuple(self._items.items()))
        return self._hash

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Mapping):
            return self._items == dict(other.items())
        return NotImplemented

    def __repr__(self) -> str:
        return f"FrozenDict({self._items!r})"

    def to_dict(self) -> dict[K, Any]:
        return dict(self._items)

    @classmethod
    def in_order(
        cls,
        keys: Iterable[K],
        items: Mapping[K, V],
        after: tuple[FrozenDict[K, V], Collection[K]] | None = None,
    ) -> FrozenDict[K, V]:
        """``FrozenDict(items)`` when ``keys`` are the keys of ``items`` already sorted (the
        caller keeps them so): no sort of every key again for one that came or went. With
        ``after`` (an earlier mapping, and every key put or removed since it was made), the
        mapping can say what changed since that one (``changed_since``)."""
        made = cls.__new__(cls)
        made._items = {key: items[key] for key in keys}
        made._hash = None
        made._after = None if after is None else (weakref.ref(after[0]), after[1])
        return made

    def changed_since(self, earlier: Mapping[K, Any]) -> Collection[K] | None:
        """The keys whose values may differ from ``earlier``'s (every key whose value is not
        the very same object is among them; a few more may be), when this mapping was made
        right after ``earlier`` with the changes recorded (``in_order``); else None."""
        if self._after is None or self._after[0]() is not earlier:
            return None
        return self._after[1]
