"""Resource vectors of the cycle and of what reports its numbers: exact integers in milli-units,
in plain dicts for speed.

Kubernetes schedules on ``Quantity.MilliValue()`` integers; the cycle does the same, so sums and
comparisons are exact and cheap. A request is rounded up to the next milli-unit, a capacity down.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Any

from engine.resources import Resources

Vec = dict[str, int]


def request_milli(amounts: Mapping[str, Fraction]) -> Vec:
    """The positive amounts, each rounded up to a whole milli-unit."""
    out: Vec = {}
    for k, v in amounts.items():
        if type(v) is Fraction:  # in integers: a Fraction's denominator is positive
            if v.numerator > 0:
                out[k] = -(-(v.numerator * 1000) // v.denominator)
        elif v > 0:
            out[k] = -_floor_milli(-v)
    return out


def capacity_milli(amounts: Mapping[str, Fraction]) -> Vec:
    return {k: _floor_milli(v) for k, v in amounts.items()}


def _floor_milli(value: Fraction | int) -> int:
    """``math.floor(value * 1000)``; for a Fraction in integers, without making a new one."""
    if isinstance(value, Fraction):
        return value.numerator * 1000 // value.denominator
    return math.floor(value * 1000)


def add(a: Mapping[str, int], b: Mapping[str, int], factor: int = 1) -> Vec:
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0) + v * factor
    return out


def add_into(target: Vec, b: Mapping[str, int], factor: int = 1) -> None:
    for k, v in b.items():
        target[k] = target.get(k, 0) + v * factor


def beyond(need: Mapping[str, int], covered: Mapping[str, int]) -> Vec:
    """Per resource of ``need``, what ``covered`` does not cover (0 where it does)."""
    return {r: max(0, n - covered.get(r, 0)) for r, n in need.items()}


def scale(a: Mapping[str, int], factor: int) -> Vec:
    return {k: v * factor for k, v in a.items()}


def total(groups: Iterable[tuple[Mapping[str, int], int]]) -> Vec:
    out: Vec = {}
    for requests, count in groups:
        add_into(out, requests, count)
    return out


def shortfall(need: Mapping[str, int], free: Mapping[str, int]) -> Vec:
    """Per resource, how much of ``need`` is missing from ``free`` (empty when it fits)."""
    return {k: v - free.get(k, 0) for k, v in need.items() if v > free.get(k, 0)}


def to_resources(vec: Mapping[str, int]) -> Resources:
    return Resources({k: Fraction(v, 1000) for k, v in vec.items() if v})


def to_json(vec: Mapping[str, int]) -> dict[str, Any]:
    return to_resources(vec).to_json()


@functools.lru_cache(maxsize=65536)
def describe(resource: str, milli: int) -> str:
    """A human amount: ``8``, ``2.5``, ``64Gi`` for memory-like resources."""
    value = Fraction(milli, 1000)
    if "memory" in resource or "storage" in resource:
        for unit, size in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20)):
            if value >= size:
                return f"{_plain(value / size)}{unit}"
    return _plain(value)


def _plain(value: Fraction) -> str:
    if value.denominator == 1:
        return str(value.numerator)
    return f"{float(value):.3f}".rstrip("0").rstrip(".")


def describe_vec(vec: Mapping[str, int]) -> str:
    return ", ".join(f"{describe(k, v)} {k}" for k, v in sorted(vec.items())) or "nothing"
