"""Typed access to the fields of Kubernetes objects; a wrong type raises DemandError at its path."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from engine.fleet.frozen import FrozenDict
from engine.workloads.model import DemandError
from engine.workloads.pods import expect_int, expect_list, expect_mapping

__all__ = [
    "Metadata",
    "expect_bool",
    "expect_int",
    "expect_list",
    "expect_mapping",
    "expect_str",
    "metadata",
    "string_list",
    "string_map",
    "timestamp",
]


def expect_str(value: Any, path: str, *, required: bool = False) -> str:
    """A string field; absent is "" unless ``required``."""
    if value is None or value == "":
        if required:
            raise DemandError(path, "required")
        return ""
    if not isinstance(value, str):
        raise DemandError(path, f"expected a string, got {value!r}")
    return value


def expect_bool(value: Any, path: str, default: bool = False) -> bool:
    if value is None:
        return default
    if not isinstance(value, bool):
        raise DemandError(path, f"expected a boolean, got {value!r}")
    return value


def string_list(value: Any, path: str) -> tuple[str, ...]:
    return tuple(expect_str(v, f"{path}[{i}]") for i, v in enumerate(expect_list(value, path)))


def string_map(value: Any, path: str) -> FrozenDict[str, str]:
    """Labels or annotations. YAML may turn an unquoted ``true`` into a bool: kept as text."""
    result: dict[str, str] = {}
    for key, item in expect_mapping(value, path).items():
        if isinstance(item, bool):
            item = "true" if item else "false"
        if item is None:
            item = ""
        result[str(key)] = str(item)
    return FrozenDict(result)


def timestamp(value: Any, path: str) -> dt.datetime | None:
    """An RFC 3339 time (or the datetime a YAML loader made of it), always timezone-aware."""
    if value is None or value == "":
        return None
    if isinstance(value, dt.datetime):
        return value if value.tzinfo else value.replace(tzinfo=dt.UTC)
    if not isinstance(value, str):
        raise DemandError(path, f"expected an RFC 3339 time, got {value!r}")
    try:
        parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as err:
        raise DemandError(path, f"not an RFC 3339 time: {value!r}") from err
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)


class Metadata:
    """The ``metadata`` fields every reader uses."""

    __slots__ = ("annotations", "created_at", "generation", "labels", "name", "namespace", "uid")

    def __init__(self, raw: Mapping[str, Any]) -> None:
        self.name = expect_str(raw.get("name"), "metadata.name", required=True)
        self.namespace = expect_str(raw.get("namespace"), "metadata.namespace")
        self.uid = expect_str(raw.get("uid"), "metadata.uid")
        self.labels = string_map(raw.get("labels"), "metadata.labels")
        self.annotations = string_map(raw.get("annotations"), "metadata.annotations")
        self.created_at = timestamp(raw.get("creationTimestamp"), "metadata.creationTimestamp")
        self.generation = expect_int(raw.get("generation"), "metadata.generation", default=0)


def metadata(obj: Mapping[str, Any]) -> Metadata:
    return Metadata(expect_mapping(obj.get("metadata"), "metadata"))
