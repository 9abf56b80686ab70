"""Waiting in tests: on a condition, with a bound, never a fixed sleep.

The bound only stops a test that would otherwise hang; it is generous because the suite must
pass with every core busy (``make test`` beside a CPU hog), so no test measures how fast
anything happens. Budgets are counted work (requests, passes, CEL cost units), not seconds.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

PATIENCE_S = 30.0  # seconds before a wait gives up: a guard against hangs, not a measure
POLL_S = 0.02  # seconds between looks


def eventually(
    check: Callable[[], bool],
    timeout: float = PATIENCE_S,
    what: str = "",
    detail: Callable[[], object] | None = None,
) -> None:
    """Return once ``check()`` is true; fail the test if it is still false after ``timeout``
    (saying ``detail()``, the state then, when given)."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            said = f"; {detail()}" if detail is not None else ""
            raise AssertionError(f"{what or 'condition'} not met within {timeout:g} s{said}")
        time.sleep(POLL_S)


def eventually_value(
    probe: Callable[[], T | None], timeout: float = PATIENCE_S, what: str = ""
) -> T:
    """The first value ``probe()`` gives that is not None; fail the test after ``timeout``."""
    deadline = time.monotonic() + timeout
    while (value := probe()) is None:
        if time.monotonic() > deadline:
            raise AssertionError(f"{what or 'a value'} not there within {timeout:g} s")
        time.sleep(POLL_S)
    return value


def never(check: Callable[[], bool], window: float = 0.5, what: str = "") -> None:
    """Fail if ``check()`` becomes true within ``window`` seconds. A thing that must not happen
    can only be watched for a while: a slow wrong behaviour may be missed, a right one never
    fails, however busy the machine."""
    deadline = time.monotonic() + window
    while time.monotonic() < deadline:
        if check():
            raise AssertionError(f"{what or 'condition'} happened")
        time.sleep(POLL_S)
