"""CEL's comparisons across int, uint and double, for cel-python to call.

The CEL spec puts every number on one number line: ``1 == 1.0``, ``1u == 1``, ``-1 < 1u`` and
``1 < 2.0`` are true, an integer meets a double as a double (as cel-go converts it, so
``9223372036854775807 < 9223372036854775808.0`` is false), and NaN equals nothing and orders with
nothing. Lists and maps are equal when their elements are, and ``in`` uses the same equality.
cel-python 0.5.0 instead raises "no such overload" for most mixed pairs.

These functions are given to cel-python as the operators ``_==_``, ``_!=_``, ``_<_``, ``_<=_``,
``_>_``, ``_>=_`` and ``_in_`` (functions passed to ``Environment.program`` take precedence over
its built-ins). They decide only when numbers meet numbers, also inside lists and maps; every
other pair goes to cel-python's own operator, so its behaviour there is unchanged. Arithmetic
across numeric types (``1 + 1.0``) stays an error, as in CEL.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import celpy.celtypes as ct
import celpy.evaluation
from celpy.evaluation import CELEvalError

_NUMBERS = (ct.IntType, ct.UintType, ct.DoubleType)  # BoolType is an int but not a number
_STOCK = dict(celpy.evaluation.base_functions)
_MISSING = object()


def _is_number(value: Any) -> bool:
    return isinstance(value, _NUMBERS)


def _order(a: Any, b: Any) -> int | None:
    """-1, 0 or 1 for two CEL numbers; None when one is NaN."""
    if isinstance(a, ct.DoubleType) or isinstance(b, ct.DoubleType):
        x, y = float(a), float(b)
    else:
        x, y = int(a), int(b)  # int and uint compare exactly
    if x < y:
        return -1
    if x > y:
        return 1
    return 0 if x == y else None


def less(a: Any, b: Any) -> Any:
    """CEL ``a < b``."""
    if _is_number(a) and _is_number(b):
        return ct.BoolType(_order(a, b) == -1)
    return _STOCK["_<_"](a, b)


def less_equal(a: Any, b: Any) -> Any:
    """CEL ``a <= b``."""
    if _is_number(a) and _is_number(b):
        return ct.BoolType(_order(a, b) in (-1, 0))
    return _STOCK["_<=_"](a, b)


def greater(a: Any, b: Any) -> Any:
    """CEL ``a > b``."""
    if _is_number(a) and _is_number(b):
        return ct.BoolType(_order(a, b) == 1)
    return _STOCK["_>_"](a, b)


def greater_equal(a: Any, b: Any) -> Any:
    """CEL ``a >= b``."""
    if _is_number(a) and _is_number(b):
        return ct.BoolType(_order(a, b) in (0, 1))
    return _STOCK["_>=_"](a, b)


def equal(a: Any, b: Any) -> Any:
    """CEL ``a == b``: a BoolType, or an error (returned or raised as cel-python does)."""
    if not _decides(a, b):
        return _STOCK["_==_"](a, b)
    if _is_number(a):
        return ct.BoolType(_order(a, b) == 0)
    if isinstance(a, ct.ListType):
        if len(a) != len(b):
            return ct.BoolType(False)
        return _all(_element_equal(x, y) for x, y in zip(a, b, strict=True))
    return _maps_equal(a, b)


def _decides(a: Any, b: Any) -> bool:
    """Whether ``equal`` compares ``a`` and ``b`` itself: two numbers, lists or maps."""
    if _is_number(a):
        return _is_number(b)
    return type(a) is type(b) and isinstance(a, ct.ListType | ct.MapType)


def not_equal(a: Any, b: Any) -> Any:
    """CEL ``a != b``: the negation of ``a == b``."""
    if not _decides(a, b):
        return _STOCK["_!=_"](a, b)
    result = equal(a, b)
    return ct.BoolType(not result) if isinstance(result, ct.BoolType) else result


def contains(item: Any, container: Any) -> Any:
    """CEL ``item in container`` (a list's elements, a map's keys), with CEL's number equality.

    As in cel-python, a match wins over an element that cannot be compared; with no match, such an
    element makes the result an error.
    """
    if isinstance(item, CELEvalError):
        return item
    if not _is_number(item) or not isinstance(container, ct.ListType | ct.MapType):
        return _STOCK["_in_"](item, container)
    result: Any = ct.BoolType(False)
    for element in container:
        found = _element_equal(item, element)
        if isinstance(found, CELEvalError):
            result = found
        elif found:
            return ct.BoolType(True)
    return result


def _element_equal(a: Any, b: Any) -> Any:
    """``equal`` for two elements, with a pair cel-python cannot compare as an error value."""
    try:
        return equal(a, b)
    except TypeError as err:
        return CELEvalError("no such overload", err.__class__, err.args)


def _all(results: Iterable[Any]) -> Any:
    """CEL's ``&&`` over results: false wins over errors, an error wins over true."""
    error = None
    for result in results:
        if isinstance(result, CELEvalError):
            error = result if error is None else error
        elif not result:
            return ct.BoolType(False)
    return error if error is not None else ct.BoolType(True)


def _maps_equal(a: ct.MapType, b: ct.MapType) -> Any:
    if len(a) != len(b):
        return ct.BoolType(False)
    keys_of_b = {_key(k): k for k in b}
    pairs = []
    for key, value in a.items():
        other = keys_of_b.get(_key(key), _MISSING)
        if other is _MISSING:
            return ct.BoolType(False)
        pairs.append((value, b[other]))
    return _all(_element_equal(x, y) for x, y in pairs)


def _key(key: Any) -> tuple[Any, ...]:
    """A map key for plain Python lookups: numbers by value across kinds, the rest by kind and
    value (so ``1``, ``1u`` and ``1.0`` are one key, and ``true`` is not ``1``)."""
    if isinstance(key, ct.DoubleType):
        return (int, float(key))
    if _is_number(key):
        return (int, int(key))
    return (type(key), key)


OPERATORS: Mapping[str, Callable[..., Any]] = {
    "_==_": equal,
    "_!=_": not_equal,
    "_<_": less,
    "_<=_": less_equal,
    "_>_": greater,
    "_>=_": greater_equal,
    "_in_": contains,
}
