"""The CEL types fleetgate's checker knows, with no parse tree: the type model, the built-in
functions' and methods' overloads, and how types combine under the binary operators.

``celcheck`` walks the tree and asks this module; its names are re-exported from ``celcheck``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class CelType:
    kind: str
    params: tuple[CelType, ...] = ()
    name: str = ""
    fields: tuple[tuple[str, CelType], ...] = ()

    def __str__(self) -> str:
        if self.kind == "record":
            return self.name
        if self.params:
            return f"{self.kind}({', '.join(str(p) for p in self.params)})"
        return self.kind


BOOL, INT, UINT, DOUBLE = CelType("bool"), CelType("int"), CelType("uint"), CelType("double")
STRING, BYTES, NULL = CelType("string"), CelType("bytes"), CelType("null")
TIMESTAMP, DURATION = CelType("timestamp"), CelType("duration")
DYN, TYPE = CelType("dyn"), CelType("type")


def list_of(elem: CelType) -> CelType:
    return CelType("list", (elem,))


def map_of(key: CelType, value: CelType) -> CelType:
    return CelType("map", (key, value))


def record(name: str, /, **fields: CelType) -> CelType:
    """A record type; `name` is positional-only so a record may have a field called name."""
    return CelType("record", name=name, fields=tuple(fields.items()))


@dataclass(frozen=True, slots=True)
class TypeIssue:
    line: int
    column: int
    message: str


@dataclass(frozen=True, slots=True)
class FunctionSig:
    params: tuple[CelType, ...]
    result: CelType


Overloads = list[tuple[tuple[CelType, ...], CelType]]

NUMERIC = frozenset({"int", "uint", "double"})
ORDERED = NUMERIC | {"string", "bytes", "timestamp", "duration", "bool"}
# cel-python raises on null == number, and on null != list/map.
NULL_COMPARABLE = frozenset({"null", "string", "bytes", "bool", "timestamp", "duration"})
SIZED: Overloads = [((t,), INT) for t in (STRING, BYTES, list_of(DYN), map_of(DYN, DYN))]


def _conv(result: CelType, *sources: CelType) -> Overloads:
    return [((s,), result) for s in sources]


TIMESTAMP_GETTERS = (
    "getFullYear", "getMonth", "getDayOfYear", "getDayOfMonth", "getDate", "getDayOfWeek",
    "getHours", "getMinutes", "getSeconds", "getMilliseconds",
)  # fmt: skip
GLOBALS: dict[str, Overloads] = {
    "size": SIZED,
    "matches": [((STRING, STRING), BOOL)],
    "int": _conv(INT, INT, UINT, DOUBLE, STRING, TIMESTAMP),
    "uint": _conv(UINT, INT, UINT, DOUBLE, STRING),
    "double": _conv(DOUBLE, INT, UINT, DOUBLE, STRING),
    "string": _conv(STRING, INT, UINT, DOUBLE, STRING, BYTES, BOOL, TIMESTAMP, DURATION),
    "bool": _conv(BOOL, BOOL, STRING),
    "bytes": _conv(BYTES, BYTES, STRING),
    "timestamp": _conv(TIMESTAMP, STRING, TIMESTAMP),
    "duration": _conv(DURATION, STRING, DURATION),
    "dyn": [((DYN,), DYN)],
    "type": [((DYN,), TYPE)],
}
METHODS: dict[str, Overloads] = {
    "size": SIZED,
    **{m: [((STRING, STRING), BOOL)] for m in ("startsWith", "endsWith", "contains", "matches")},
    **{m: [((TIMESTAMP,), INT), ((TIMESTAMP, STRING), INT)] for m in TIMESTAMP_GETTERS},
    # string extensions (celstrings): the bounded ones
    "split": [((STRING, STRING), list_of(STRING)), ((STRING, STRING, INT), list_of(STRING))],
    "join": [((list_of(STRING),), STRING), ((list_of(STRING), STRING), STRING)],
    **{m: [((STRING,), STRING)] for m in ("lowerAscii", "upperAscii", "trim")},
}
for _m in ("getHours", "getMinutes", "getSeconds", "getMilliseconds"):
    METHODS[_m] = [((DURATION,), INT), *METHODS[_m]]  # durations take no time zone
MACROS = frozenset({"exists", "all", "exists_one", "map", "filter"})


def common(a: CelType, b: CelType) -> CelType | None:
    """The type both ``a`` and ``b`` fit, or None when they are incompatible (DYN fits all)."""
    if a == b:
        return a
    if DYN in (a, b):
        return DYN
    if a.kind == b.kind and a.kind in ("list", "map"):
        parts = [common(x, y) for x, y in zip(a.params, b.params, strict=True)]
        return None if None in parts else CelType(a.kind, tuple(p for p in parts if p))
    return None


def equatable(a: CelType, b: CelType) -> bool:
    """Whether ``a == b`` may compare the two types: one type, or numbers of any kinds (CEL puts
    int, uint and double on one number line), also as the elements of lists and maps."""
    if common(a, b) or (a.kind in NUMERIC and b.kind in NUMERIC):
        return True
    if a.kind == b.kind and a.kind in ("list", "map"):
        return all(map(equatable, a.params, b.params))
    return False


def binary_result(op: str, a: CelType, b: CelType) -> CelType | None:
    """The type of ``a op b`` for a binary operator, or None when no overload matches."""
    kinds = (a.kind, b.kind)
    if op in ("==", "!="):
        if DYN in (a, b) or (NULL in (a, b) and set(kinds) <= NULL_COMPARABLE):
            return BOOL
        return BOOL if equatable(a, b) else None
    if op == "in":
        if b == DYN or (b.kind in ("list", "map") and equatable(a, b.params[0])):
            return BOOL
        return None
    if op in ("<", "<=", ">", ">="):
        if DYN in (a, b) or (a == b and a.kind in ORDERED) or {a.kind, b.kind} <= NUMERIC:
            return BOOL
        return None
    if DYN in (a, b):
        return DYN
    if a == b and a.kind in (NUMERIC if op != "%" else {"int", "uint"}):
        return a
    if op == "+":
        if a == b and a.kind in ("string", "bytes", "duration"):
            return a
        if a.kind == b.kind == "list":
            return common(a, b)
        if kinds in (("timestamp", "duration"), ("duration", "timestamp")):
            return TIMESTAMP
    if op == "-":
        if a == b and a.kind in ("timestamp", "duration"):
            return DURATION
        if kinds == ("timestamp", "duration"):
            return TIMESTAMP
    return None
