"""A preflight check's result, as data: what was checked, how it went, what was seen, and what to
do about it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class Status(StrEnum):
    OK = "ok"
    """What fleetgate needs is there."""
    WARN = "warn"
    """Works, but not as well as it could, or could not be checked with these credentials."""
    FAIL = "fail"
    """An install would not work: fix it first."""
    SKIP = "skip"
    """Not checked, and nothing is wrong for it (e.g. no --policies given)."""


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    status: Status
    detail: str
    fix: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "status": str(self.status), "detail": self.detail} | (
            {"fix": self.fix} if self.fix else {}
        )


def ok(name: str, detail: str) -> Check:
    return Check(name, Status.OK, detail)


def warn(name: str, detail: str, fix: str = "") -> Check:
    return Check(name, Status.WARN, detail, fix)


def fail(name: str, detail: str, fix: str) -> Check:
    return Check(name, Status.FAIL, detail, fix)


def skip(name: str, detail: str) -> Check:
    return Check(name, Status.SKIP, detail)


def exit_code(checks: Iterable[Check]) -> int:
    """0 when nothing failed (warnings allowed), 1 otherwise."""
    return 1 if any(c.status == Status.FAIL for c in checks) else 0


def plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"
