"""Label and field selectors, parsed once and matched against object dicts.

Label selectors follow ``k8s.io/apimachinery/pkg/labels``: ``a=b``, ``a==b``, ``a!=b``,
``a in (x,y)``, ``a notin (x,y)``, ``a`` (exists), ``!a`` (does not exist), comma-joined (AND).
Field selectors take ``path=value``, ``path==value`` and ``path!=value`` over any dotted field
path (``metadata.name``, ``metadata.namespace``, ``involvedObject.uid``, ``status.phase``…);
the real server allows only a few paths per kind, the sandbox allows any.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sandbox.errors import bad_request

_KEY = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_./]*)?[A-Za-z0-9]$")


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    operator: str  # "=", "!=", "in", "notin", "exists", "!"
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        match self.operator:
            case "exists":
                return present
            case "!":
                return not present
            case "=" | "in":
                return present and value in self.values
            case _:  # "!=" and "notin" match objects without the label, as Kubernetes does
                return not present or value not in self.values


@dataclass(frozen=True, slots=True)
class LabelSelector:
    requirements: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        labels = labels or {}
        return all(r.matches(labels) for r in self.requirements)

    def __bool__(self) -> bool:
        return bool(self.requirements)


def _split_top_level(text: str) -> list[str]:
    """Split on commas outside parentheses."""
    parts, depth, current = [], 0, []
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return [p.strip() for p in parts if p.strip()]


_SET = re.compile(r"^(?P<key>\S+)\s+(?P<op>in|notin)\s*\((?P<values>[^)]*)\)$")
_EQ = re.compile(r"^(?P<key>[^!=\s]+)\s*(?P<op>==|=|!=)\s*(?P<value>\S*)$")


def _check_key(key: str, text: str) -> str:
    if not _KEY.match(key):
        raise bad_request(f"unable to parse requirement: invalid label key {key!r} in {text!r}")
    return key


def parse_label_selector(text: str | None) -> LabelSelector:
    """Parse ``?labelSelector=``; raises a 400 StatusError when malformed."""
    if not text:
        return LabelSelector()
    requirements = []
    for part in _split_top_level(text):
        if m := _SET.match(part):
            values = tuple(v.strip() for v in m["values"].split(",") if v.strip())
            requirements.append(Requirement(_check_key(m["key"], text), m["op"], values))
        elif m := _EQ.match(part):
            op = "!=" if m["op"] == "!=" else "="
            requirements.append(Requirement(_check_key(m["key"], text), op, (m["value"],)))
        elif part.startswith("!"):
            requirements.append(Requirement(_check_key(part[1:].strip(), text), "!"))
        else:
            requirements.append(Requirement(_check_key(part, text), "exists"))
    return LabelSelector(tuple(requirements))


def selector_from_match(selector: Mapping[str, Any] | None) -> LabelSelector:
    """A ``metav1.LabelSelector`` (matchLabels, matchExpressions) as a :class:`LabelSelector`."""
    if not selector:
        return LabelSelector()
    ops = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}
    requirements = [
        Requirement(k, "=", (str(v),)) for k, v in (selector.get("matchLabels") or {}).items()
    ]
    for expression in selector.get("matchExpressions") or []:
        operator = ops[expression["operator"]]
        requirements.append(
            Requirement(expression["key"], operator, tuple(expression.get("values") or ()))
        )
    return LabelSelector(tuple(requirements))


@dataclass(frozen=True, slots=True)
class FieldRequirement:
    path: tuple[str, ...]
    equal: bool
    value: str

    def matches(self, obj: Mapping[str, Any]) -> bool:
        current: Any = obj
        for step in self.path:
            current = current.get(step) if isinstance(current, Mapping) else None
        text = (
            ""
            if current is None
            else str(current).lower()
            if isinstance(current, bool)
            else str(current)
        )
        return (text == self.value) == self.equal


@dataclass(frozen=True, slots=True)
class FieldSelector:
    requirements: tuple[FieldRequirement, ...] = ()

    def matches(self, obj: Mapping[str, Any]) -> bool:
        return all(r.matches(obj) for r in self.requirements)

    def __bool__(self) -> bool:
        return bool(self.requirements)

    def value_of(self, path: str) -> str | None:
        """The value required by ``path=value``, if the selector has one (an index hint)."""
        wanted = tuple(path.split("."))
        for r in self.requirements:
            if r.equal and r.path == wanted:
                return r.value
        return None


def parse_field_selector(text: str | None) -> FieldSelector:
    """Parse ``?fieldSelector=``; raises a 400 StatusError when malformed."""
    if not text:
        return FieldSelector()
    requirements = []
    for part in _split_top_level(text):
        m = re.match(r"^([A-Za-z0-9_.\-]+)\s*(==|=|!=)\s*(.*)$", part)
        if not m:
            raise bad_request(
                f'invalid field selector: "{part}": expected path=value or path!=value'
            )
        path = tuple(m[1].split("."))
        requirements.append(FieldRequirement(path, m[2] != "!=", m[3].strip()))
    return FieldSelector(tuple(requirements))
