"""Waiting in a command's main thread for SIGTERM or SIGINT, with no lock in the handler.

A handler that sets a ``threading.Event`` the main thread waits on can deadlock: Python runs the
handler in the main thread between two bytecodes, which may fall inside ``Event.wait`` while it
holds the Event's lock, and that lock is not reentrant (seen once in CI: ``fleetgate dashboard``
never stopped on a SIGTERM sent just after it printed its address). Here the handler writes a
byte to a pipe and the main thread blocks reading it (PEP 475 retries the read after the
handler), so a signal that comes at any moment, before the wait too, ends it.
``fleetgate serve``, ``webhook``, ``sandbox`` and ``dashboard`` stop this way.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterable
from types import FrameType


class StopSignals:
    """Install the handlers (before announcing an address: whoever reads it may stop us at
    once), then ``wait``; ``close`` when done."""

    def __init__(self, signals: Iterable[int] = (signal.SIGTERM, signal.SIGINT)) -> None:
        self._read, self._write = os.pipe()
        os.set_blocking(self._write, False)
        self.received: int | None = None
        self._closed = False
        for signum in signals:
            signal.signal(signum, self._handle)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.received = signum
        # full: a byte is already waiting; closed: the wait is over
        with contextlib.suppress(OSError):
            os.write(self._write, b"\0")

    def wait(self) -> int | None:
        """Block until one of the signals came (at once if one came already); which one."""
        os.read(self._read, 1)
        return self.received

    def close(self) -> None:
        """Close the pipe (again: nothing); a signal after it is ignored."""
        if not self._closed:
            self._closed = True
            for fd in (self._read, self._write):
                os.close(fd)
