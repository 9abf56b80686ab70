"""The admission hook point of the store: what a webhook caller (or any admission plugin) sees.

The store calls :meth:`Admission.mutate` on a write before it applies server defaults, and
:meth:`Admission.validate` after, with the object it is about to store, as kube-apiserver runs
mutating then validating admission. Both run outside the store's lock (a webhook call may take
its time); a write whose object changed meanwhile is recomputed and admitted again. To refuse a
request, raise :class:`sandbox.errors.StatusError` (e.g. ``StatusError(status(403, "Forbidden",
...))``). Internal writes of the garbage collector and namespace cleanup skip admission.

Warnings (a webhook's ``warnings``) go to :func:`add_warning`; the HTTP layer collects them per
request (:func:`collect_warnings`) and answers them in ``Warning: 299 - "..."`` headers, which
kubectl prints. Outside a collecting request (in-process writes) they are dropped.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Protocol

from sandbox.resources import ResourceType

CREATE, UPDATE, DELETE = "CREATE", "UPDATE", "DELETE"


@dataclass(frozen=True, slots=True)
class AdmissionRequest:
    """One write under admission; ``object``/``old_object`` are private copies, as dicts."""

    operation: str
    resource: ResourceType
    subresource: str
    namespace: str | None
    name: str
    object: dict[str, Any] | None
    old_object: dict[str, Any] | None
    dry_run: bool


class Admission(Protocol):
    def mutate(self, request: AdmissionRequest) -> dict[str, Any] | None:
        """The object to continue with (None: unchanged). Not called for DELETE."""
        ...

    def validate(self, request: AdmissionRequest) -> None:
        """Raise StatusError to refuse the write."""
        ...


_local = threading.local()


def collect_warnings() -> list[str]:
    """Start collecting the warnings of this thread's request; returns the (live) list."""
    collected: list[str] = []
    _local.warnings = collected
    return collected


def add_warning(text: str) -> None:
    """A warning for the client of the current request (dropped when nobody collects)."""
    collected: list[str] | None = getattr(_local, "warnings", None)
    if collected is not None:
        collected.append(text)
