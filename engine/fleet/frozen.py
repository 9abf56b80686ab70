"""An immutable, hashable, key-sorted mapping for the values a cycle reads."""

from __future__ import annotations

from collections.abc import ItemsView, Iterable, Iterator, KeysView, Mapping, ValuesView
from typing import Any, Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class FrozenDict(Mapping[K, V], Generic[K, V]):
    """A read-only mapping, sorted by key so equal contents print and iterate the same."""

    __slots__ = ("_hash", "_items")

    def __init__(self, items: Mapping[K, V] | None = None) -> None:
        self._items: dict[K, V] = dict(sorted((items or {}).items(), key=lambda kv: kv[0]))
        self._hash: int | None = None

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
    def in_order(cls, keys: Iterable[K], items: Mapping[K, V]) -> FrozenDict[K, V]:
        """``FrozenDict(items)`` when ``keys`` are the keys of ``items`` already sorted (the
        caller keeps them so): no sort of every key again for one that came or went."""
        made = cls.__new__(cls)
        made._items = {key: items[key] for key in keys}
        made._hash = None
        return made
