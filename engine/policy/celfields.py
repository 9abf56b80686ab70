"""Where CEL lives in each policy kind: path, default, variables and result type.

One table serves the builder (which compiles every expression of a valid document) and the
loader's best-effort pass over documents that failed the schema, so their CEL errors are reported
in the same run instead of after the schema error is fixed.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from engine.policy import cel, defaults
from engine.policy.celcheck import BOOL, DOUBLE, INT, STRING, CelType
from engine.policy.celtypes import list_of

JsonPath = tuple[str | int, ...]


@dataclass(frozen=True, slots=True)
class CelField:
    path: JsonPath  # inside spec; "*" stands for every item of a list
    variables: Mapping[str, CelType]
    result: CelType
    default: str | None = None  # used when the field is absent; None: optional, no default


_MAP, _PLACE = cel.MAPPING_VARS, cel.PLACEMENT_VARS
FIELDS: Mapping[str, tuple[CelField, ...]] = {
    "SchedulingPolicy": (
        CelField(("queue",), _MAP, STRING, defaults.QUEUE),
        CelField(("tenant",), _MAP, STRING, defaults.TENANT),
        CelField(("priority",), _MAP, INT, defaults.PRIORITY),
        CelField(("gang", "minMember"), _MAP, INT, defaults.MIN_MEMBER),
        CelField(("gang", "allowSplit"), _MAP, BOOL, defaults.ALLOW_SPLIT),
        CelField(("placement", "filters", "*", "expression"), _PLACE, BOOL),
        CelField(("placement", "scores", "*", "expression"), _PLACE, DOUBLE),
        CelField(("dependencies", "after"), _MAP, list_of(STRING)),
        CelField(("dependencies", "sameClusterAs"), _MAP, STRING),
        CelField(("groups", "name"), _MAP, STRING),
        CelField(("groups", "size"), _MAP, INT),
        CelField(("groups", "min"), _MAP, INT),
        CelField(("scope",), cel.SCOPE_VARS, BOOL, defaults.SCOPE),
    ),
    "AdmissionPolicy": (
        CelField(("match",), cel.ADMISSION_VARS, BOOL, defaults.MATCH_ALL),
        CelField(("validations", "*", "expression"), cel.ADMISSION_VARS, BOOL),
        CelField(("validations", "*", "messageExpression"), cel.ADMISSION_VARS, STRING),
    ),
}


def expressions(kind: str, spec: Any) -> Iterator[tuple[JsonPath, str, CelField]]:
    """Every CEL text of a document's spec (defaults filled in), with its full JSON path.

    Tolerates any shape: values that are not where the table expects them are skipped (the schema
    reports those).
    """
    for field in FIELDS.get(kind, ()):
        for path, value in _find(spec, field.path, ("spec",)):
            text = field.default if value is _ABSENT else value
            if isinstance(text, str):
                yield path, text, field


_ABSENT = object()


def _find(node: Any, rest: JsonPath, path: JsonPath) -> Iterator[tuple[JsonPath, Any]]:
    if not rest:
        yield path, node
        return
    head, tail = rest[0], rest[1:]
    if head == "*":
        for i, item in enumerate(node if isinstance(node, list) else []):
            yield from _find(item, tail, (*path, i))
    elif isinstance(node, dict) and head in node:
        yield from _find(node[head], tail, (*path, head))
    elif (node is _ABSENT or isinstance(node, dict) or node is None) and "*" not in tail:
        yield (*path, head, *tail), _ABSENT
