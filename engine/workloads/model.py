"""What a job needs, read from its template: roles, per-pod requests, gang minimum."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from engine.errors import FleetgateError
from engine.resources import PODS, Resources
from engine.workloads.names import qualified_name


class DemandError(FleetgateError):
    """A workload object whose demand cannot be read; names the field path."""

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        self.message = message
        super().__init__(f"{path}: {message}" if path else message)


@dataclass(frozen=True, slots=True)
class Role:
    """One group of identical pods: a Volcano task, a Kubeflow replica type, a Ray worker group."""

    name: str
    replicas: int
    requests: Resources  # per pod
    min_available: int | None = None  # per-role gang minimum, where the kind has one

    @property
    def total(self) -> Resources:
        return self.requests.scale(self.replicas)


@dataclass(frozen=True, slots=True)
class Workload:
    """A job template's demand. ``total`` counts every pod of every role, plus ``pods``."""

    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str
    roles: tuple[Role, ...]
    min_member: int
    resizable: bool
    priority_class_name: str | None = None
    queue: str | None = None  # the queue the template's own spec names
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    created_at: dt.datetime | None = None
    source: str = "template"  # or "binding" when read from the RB's replica requirements

    @property
    def pods(self) -> int:
        return sum(role.replicas for role in self.roles)

    @property
    def total(self) -> Resources:
        return Resources.sum(role.total for role in self.roles) + {PODS: self.pods}

    @property
    def ref(self) -> str:
        """How every command and message names the template (``names.qualified_name``)."""
        return qualified_name(self.api_version, self.kind, self.namespace, self.name)

    def to_json(self) -> dict[str, Any]:
        """The ``fleetgate inspect -o json`` shape of one workload."""
        return {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "namespace": self.namespace,
            "name": self.name,
            "roles": [
                {"name": r.name, "replicas": r.replicas, "requests": r.requests.to_json()}
                for r in self.roles
            ],
            "total": self.total.to_json(),
            "minMember": self.min_member,
            "resizable": self.resizable,
            "priorityClassName": self.priority_class_name,
            "queue": self.queue,
        }
