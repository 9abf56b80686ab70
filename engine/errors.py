"""The small error hierarchy of fleetgate.

Exceptions are for broken input and bugs; a scheduling refusal is a value, never an exception.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


class FleetgateError(Exception):
    """Root of every error fleetgate raises on purpose."""


class QuantityError(FleetgateError, ValueError):
    """A Kubernetes quantity that does not parse."""


@dataclass(frozen=True, slots=True)
class PolicyIssue:
    """One problem in a policy document, with its place.

    ``line`` and ``column`` are 1-based positions in ``file``; ``path`` is a JSON path inside the
    document (``spec.guarantee["nvidia.com/gpu"]``); ``obj`` is ``Kind/name`` when known.
    """

    file: str
    line: int
    column: int
    obj: str
    path: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}:{self.column}"
        parts = [where, self.obj or "-", self.path or "-", self.message]
        return ": ".join(parts)


class PolicyLoadError(FleetgateError):
    """A policy set that cannot be loaded; carries every issue found, in file order."""

    def __init__(self, issues: Sequence[PolicyIssue]) -> None:
        self.issues: tuple[PolicyIssue, ...] = tuple(issues)
        count = len(self.issues)
        head = "\n".join(str(i) for i in self.issues[:20])
        more = f"\n… and {count - 20} more" if count > 20 else ""
        super().__init__(f"{count} policy error(s):\n{head}{more}")
