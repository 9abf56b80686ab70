"""CEL string extensions (cel-go's ``ext.Strings``) that are safe and bounded here.

cel-python has none of them. Each runs in time linear in its input and returns a value no
longer than it: ``split`` (at most one item per character, or at most ``n``), ``join``,
``lowerAscii``, ``upperAscii`` and ``trim``. Functions that can grow their output
(``replace``, ``format``) are left out. A wrong argument (a list with a non-string in ``join``)
is an evaluation error, returned as celpy's error value like every other.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import celpy
import celpy.celtypes as ct

_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_ASCII_UPPER = str.maketrans("abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ")
# what cel-go's trim removes: Unicode White_Space (Python's isspace() adds a few controls)
_WHITESPACE = (
    "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009"
    "\u200a\u2028\u2029\u202f\u205f\u3000"
)


def split(text: ct.StringType, separator: ct.StringType, limit: Any = None) -> Any:
    """``s.split(sep)``, ``s.split(sep, n)``: as cel-go, n < 0 is no limit, n = 0 gives an
    empty list, n > 0 at most n items (the last holds the rest); an empty separator splits
    into characters."""
    s, sep = str(text), str(separator)
    n = -1 if limit is None else int(limit)
    if n == 0:
        return ct.ListType([])
    if sep:
        parts = s.split(sep, n - 1) if n > 0 else s.split(sep)
    else:
        chars = list(s)
        parts = chars if n < 0 or len(chars) <= n else [*chars[: n - 1], "".join(chars[n - 1 :])]
    return ct.ListType([ct.StringType(p) for p in parts])


def join(items: ct.ListType, separator: Any = None) -> Any:
    """``list.join()``, ``list.join(sep)``: the strings of the list with ``sep`` between."""
    if not all(isinstance(item, str) for item in items):
        return celpy.CELEvalError("join() needs a list of strings")
    return ct.StringType(("" if separator is None else str(separator)).join(items))


def lower_ascii(text: ct.StringType) -> ct.StringType:
    return ct.StringType(str(text).translate(_ASCII_LOWER))


def upper_ascii(text: ct.StringType) -> ct.StringType:
    return ct.StringType(str(text).translate(_ASCII_UPPER))


def trim(text: ct.StringType) -> ct.StringType:
    return ct.StringType(str(text).strip(_WHITESPACE))


FUNCTIONS: Mapping[str, Callable[..., Any]] = {
    "split": split,
    "join": join,
    "lowerAscii": lower_ascii,
    "upperAscii": upper_ascii,
    "trim": trim,
}
