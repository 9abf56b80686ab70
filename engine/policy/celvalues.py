"""Plain Python values to CEL values, guided by the declared types (results back: ``cel``).

Values of CEL type ``dyn`` (a job template as ``object`` or ``job.object``) are converted as
``celpy.json_to_cel`` does. That walk is most of what evaluating a policy on a template costs,
and one admission review evaluates several expressions, each with variables built from the same
template (the SchedulingPolicy's queue, tenant and priority, the gang's minMember, the
AdmissionPolicies). Inside ``with converting_once():`` every dict and list met in a ``dyn``
value, and every value of a declared map or list type (a job's labels, components, totals), is
converted once: its CEL value is reused when the same object (by identity) is met again, however
many activations are built. A record (the ``job`` itself) is converted each time, as callers set
its fields between evaluations (``map_job`` sets ``job.queue``); the dicts and lists inside it
must not be changed within the block. CEL values are never changed by an evaluation, so sharing
them is safe. The memo is a context variable: each thread (each request) has its own, and
nothing is kept after the block.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from typing import Any

import celpy
import celpy.celtypes as ct

from engine.policy.celcheck import DYN, CelType

# id(container) (and id(its declared type), for a typed map or list) → (container, its CEL value,
# …); the objects are kept, so their ids stay unique while the memo lives
_Memo = dict[Any, tuple[Any, ...]]
_MEMO: ContextVar[_Memo | None] = ContextVar("fleetgate_cel_conversions", default=None)


@contextlib.contextmanager
def converting_once() -> Iterator[None]:
    """Convert each dict and list of a ``dyn`` value once within the block (see above)."""
    token = _MEMO.set({})
    try:
        yield
    finally:
        _MEMO.reset(token)


def to_cel(value: Any, kind: CelType) -> Any:
    if value is None:
        return None
    if kind.kind == "record":
        fields = dict(kind.fields)
        return ct.MapType(
            {
                ct.StringType(name): to_cel(item, fields.get(name, DYN))
                for name, item in value.items()
            }
        )
    if kind.kind in ("map", "list"):
        memo = _MEMO.get()
        if memo is None:
            return _container(value, kind)
        key = (id(value), id(kind))
        known = memo.get(key)
        if known is not None and known[0] is value:
            return known[1]
        converted = _container(value, kind)
        memo[key] = (value, converted, kind)
        return converted
    converter = _SCALARS.get(kind.kind)
    if converter is not None:
        return converter(value)
    return _dyn(value)


def _container(value: Any, kind: CelType) -> Any:
    if kind.kind == "map":
        key_type, value_type = kind.params
        return ct.MapType({to_cel(k, key_type): to_cel(v, value_type) for k, v in value.items()})
    return ct.ListType([to_cel(item, kind.params[0]) for item in value])


def _timestamp(value: Any) -> ct.TimestampType:
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.UTC)
        return ct.TimestampType(value)
    return ct.TimestampType(str(value))


_SCALARS: Mapping[str, Callable[[Any], Any]] = {
    "bool": ct.BoolType,
    "int": ct.IntType,
    "uint": ct.UintType,
    "double": lambda v: ct.DoubleType(float(v)),
    "string": ct.StringType,
    "timestamp": _timestamp,
}


def _dyn(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        return _timestamp(value)
    memo = _MEMO.get()
    if memo is None:
        return celpy.json_to_cel(value)
    return _json_once(value, memo)


def _json_once(document: Any, memo: _Memo) -> Any:
    """``celpy.json_to_cel(document)``, with each dict and list converted once per memo."""
    if not isinstance(document, list | tuple | dict):
        return celpy.json_to_cel(document)  # scalars, and whatever it refuses
    known = memo.get(id(document))
    if known is not None and known[0] is document:
        return known[1]
    if isinstance(document, list | tuple):
        converted: Any = ct.ListType([_json_once(item, memo) for item in document])
    else:
        converted = ct.MapType(
            {_json_once(k, memo): _json_once(v, memo) for k, v in document.items()}
        )
    memo[id(document)] = (document, converted)  # an int key: never equal to a typed one
    return converted
