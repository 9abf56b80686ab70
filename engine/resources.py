"""Resource amounts: exact, immutable, keyed by Kubernetes resource name."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from fractions import Fraction
from typing import Any

from engine.quantity import to_number

PODS = "pods"
ZERO = Fraction(0)  # Fractions are immutable: one zero serves every lookup that misses


def _exact(value: Fraction | int) -> Fraction:
    """``value`` as a Fraction: itself when it is one already (``Fraction(f)`` would build an
    equal copy)."""
    return value if type(value) is Fraction else Fraction(value)


class Resources(Mapping[str, Fraction]):
    """An immutable map of resource name → exact amount; zero amounts are dropped."""

    __slots__ = ("_items",)

    def __init__(self, items: Mapping[str, Fraction | int] | None = None) -> None:
        clean = {k: _exact(v) for k, v in (items or {}).items() if v}
        self._items: dict[str, Fraction] = dict(sorted(clean.items()))

    def __getitem__(self, key: str) -> Fraction:
        return self._items[key]

    def get_amount(self, key: str) -> Fraction:
        return self._items.get(key, ZERO)

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        return hash(tuple(self._items.items()))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Resources):
            return self._items == other._items
        if isinstance(other, Mapping):
            return self._items == Resources(other)._items
        return NotImplemented

    def __repr__(self) -> str:
        return f"Resources({self.to_json()})"

    def __add__(self, other: Mapping[str, Fraction]) -> Resources:
        total = dict(self._items)
        for key, value in other.items():
            total[key] = total.get(key, ZERO) + value
        return Resources(total)

    def scale(self, factor: int | Fraction) -> Resources:
        return Resources({k: v * factor for k, v in self._items.items()})

    def maximum(self, other: Mapping[str, Fraction]) -> Resources:
        """Per resource, the larger amount."""
        keys = set(self._items) | set(other)
        return Resources({k: max(self.get_amount(k), other.get(k, ZERO)) for k in keys})

    @staticmethod
    def sum(many: Iterable[Mapping[str, Fraction]]) -> Resources:
        total = Resources()
        for item in many:
            total = total + item
        return total

    def to_json(self) -> dict[str, Any]:
        """cpu in cores (a float), every other resource as int when whole, else float."""
        return {k: float(v) if k == "cpu" else to_number(v) for k, v in self._items.items()}

    def to_floats(self) -> dict[str, float]:
        return {k: float(v) for k, v in self._items.items()}
