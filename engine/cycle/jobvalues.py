"""The CEL ``job`` variable of a workload, built lazily: expressions read only a few fields."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Mapping
from typing import Any

from engine.workloads.model import Workload

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


class JobValues(Mapping[str, Any]):
    """The CEL ``job`` variable of a workload, built field by field as expressions read it."""

    __slots__ = ("_cache", "priority", "queue", "tenant", "workload")

    def __init__(self, workload: Workload, priority: int) -> None:
        self.workload = workload
        self.priority = priority
        self.queue = ""
        self.tenant = ""
        self._cache: dict[str, Any] = {}

    _KEYS = (
        "apiVersion",
        "kind",
        "namespace",
        "name",
        "uid",
        "labels",
        "annotations",
        "queue",
        "specQueue",
        "tenant",
        "priority",
        "priorityClassName",
        "components",
        "total",
        "minMember",
        "resizable",
        "createdAt",
        "object",
    )

    def __getitem__(self, key: str) -> Any:
        w = self.workload
        match key:
            case "apiVersion":
                return w.api_version
            case "kind":
                return w.kind
            case "namespace":
                return w.namespace
            case "name":
                return w.name
            case "uid":
                return w.uid
            case "labels":
                return w.labels
            case "annotations":
                return w.annotations
            case "queue":
                return self.queue
            case "specQueue":
                return w.queue or ""
            case "tenant":
                return self.tenant
            case "priority":
                return self.priority
            case "priorityClassName":
                return w.priority_class_name or ""
            case "minMember":
                return w.min_member
            case "resizable":
                return w.resizable
            case "createdAt":
                return w.created_at or EPOCH
            case "object":
                return {}
            case "components" | "total":
                if key not in self._cache:
                    self._cache["total"] = w.total.to_floats()
                    self._cache["components"] = [
                        {"name": r.name, "replicas": r.replicas, "requests": r.requests.to_floats()}
                        for r in w.roles
                    ]
                return self._cache[key]
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return iter(self._KEYS)

    def __len__(self) -> int:
        return len(self._KEYS)
