"""Deep copies of JSON-shaped objects, several times faster than ``copy.deepcopy``.

The store hands out and keeps copies of every object so no caller can change another's: the
sandbox's API objects are trees of dicts and lists over strings, numbers, booleans and None,
and ``copy.deepcopy``'s generality (its memo of every node, ``__deepcopy__`` lookups) was the
largest single cost of serving them (about 40 % of the sandbox's CPU under ``make bench-e2e``).
Anything else met in a tree (a tuple, a datetime) is still copied by ``copy.deepcopy``. Unlike
``deepcopy``, a sub-tree reachable twice is copied twice: decoded JSON has no such sharing.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import TypeVar

T = TypeVar("T")
_ATOMS = frozenset({str, int, float, bool, type(None)})


def copy_json(value: T) -> T:
    """A deep copy of ``value``; a Mapping comes back as a dict."""
    kind = type(value)
    if kind is dict:
        return {  # type: ignore[return-value]
            k: v if type(v) in _ATOMS else copy_json(v)
            for k, v in value.items()  # type: ignore[attr-defined]
        }
    if kind is list:
        return [v if type(v) in _ATOMS else copy_json(v) for v in value]  # type: ignore[return-value,attr-defined]
    if kind in _ATOMS:
        return value
    if isinstance(value, Mapping):
        return {k: copy_json(v) for k, v in value.items()}  # type: ignore[return-value]
    return copy.deepcopy(value)
