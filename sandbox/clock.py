"""The sandbox's time: real time sped up by a factor, or a manual clock that tests move.

Karmada's controllers and the simulated members read time only through a :class:`Clock`:
``now()`` (an aware UTC datetime), ``monotonic()`` (seconds, for intervals) and
``sleep(seconds, stop)``. With :class:`ScaledClock` and ``speed=60`` a 10 s status period
passes in 1/6 s of real time and a job that runs an hour ends in a minute; ``now()`` advances
60 times as fast from the moment the clock was made. :class:`ManualClock` moves only when
:meth:`ManualClock.advance` is called: sleepers wake when their time has come.

Request latency injected by :mod:`sandbox.faults` is real time, never scaled.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from typing import Protocol


class Clock(Protocol):
    def now(self) -> dt.datetime: ...

    def monotonic(self) -> float: ...

    def sleep(self, seconds: float, stop: threading.Event | None = None) -> bool:
        """Wait ``seconds`` of clock time; True when ``stop`` was set meanwhile."""
        ...


class ScaledClock:
    """Real time × ``speed`` (1: real time), starting from the real time at creation."""

    def __init__(self, speed: float = 1.0, start: dt.datetime | None = None) -> None:
        if not 0 < speed < float("inf"):
            raise ValueError(f"the clock speed must be more than 0, got {speed}")
        self.speed = speed
        self._epoch = start or dt.datetime.now(dt.UTC)
        self._real_start = time.monotonic()

    def monotonic(self) -> float:
        return (time.monotonic() - self._real_start) * self.speed

    def now(self) -> dt.datetime:
        return self._epoch + dt.timedelta(seconds=self.monotonic())

    def sleep(self, seconds: float, stop: threading.Event | None = None) -> bool:
        real = max(0.0, seconds) / self.speed
        if stop is None:
            time.sleep(real)
            return False
        return stop.wait(real)


class ManualClock:
    """A clock that moves only by :meth:`advance` (or :meth:`set`); for deterministic tests."""

    def __init__(self, start: dt.datetime | None = None) -> None:
        self._start = start or dt.datetime(2025, 1, 1, tzinfo=dt.UTC)
        self._elapsed = 0.0
        self._changed = threading.Condition()

    def monotonic(self) -> float:
        with self._changed:
            return self._elapsed

    def now(self) -> dt.datetime:
        return self._start + dt.timedelta(seconds=self.monotonic())

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("a clock never goes back")
        with self._changed:
            self._elapsed += seconds
            self._changed.notify_all()

    def set(self, when: dt.datetime) -> None:
        self.advance((when - self.now()).total_seconds())

    def sleep(self, seconds: float, stop: threading.Event | None = None) -> bool:
        """Block until the clock has been advanced ``seconds`` past now (or ``stop`` is set;
        it is checked every 50 ms of real time)."""
        with self._changed:
            wake = self._elapsed + max(0.0, seconds)
            while self._elapsed < wake:
                if stop is not None and stop.is_set():
                    return True
                self._changed.wait(0.05 if stop is not None else None)
        return stop is not None and stop.is_set()
