"""Waiting in a command's main thread for SIGTERM or SIGINT, with no lock in the handler.

Two ways to miss a signal, both seen in CI as ``fleetgate dashboard`` never stopping on a
SIGTERM sent just after it printed its address:

- A handler that sets a ``threading.Event`` the main thread waits on can deadlock: Python runs
  the handler in the main thread between two bytecodes, which may fall inside ``Event.wait``
  while it holds the Event's lock, and that lock is not reentrant.
- A signal sent to the process is taken by any one of its threads. When a server thread takes
  it, the main thread's blocking read is not interrupted, and Python runs handlers in the main
  thread only: the handler waits for a read that waits for the handler.

So the main thread blocks reading a pipe that ``signal.set_wakeup_fd`` names: Python's own
C-level handler writes the signal's number there from whichever thread took it, before any
Python code runs. A signal that comes at any moment, before the wait too, ends it.
``fleetgate serve``, ``webhook``, ``sandbox`` and ``dashboard`` stop this way.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterable
from types import FrameType


class StopSignals:
    """Install the handlers (in the main thread, before announcing an address: whoever reads it
    may stop us at once), then ``wait``; ``close`` when done."""

    def __init__(self, signals: Iterable[int] = (signal.SIGTERM, signal.SIGINT)) -> None:
        self._read, self._write = os.pipe()
        os.set_blocking(self._write, False)
        self._closed = False
        self._signals = frozenset(signals)
        # a full pipe already holds a wake-up: no warning for the byte that did not fit
        self._before = signal.set_wakeup_fd(self._write, warn_on_full_buffer=False)
        for signum in self._signals:
            signal.signal(signum, self._handle)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        """Nothing to do: replacing the default action (SIGTERM ends the process at once) is
        the point, and the wake-up byte is written already."""

    def wait(self) -> int:
        """Block until one of the signals came (at once if one came already); which one.
        (Any other signal with a Python handler wakes the pipe too: read on past it.)"""
        while (signum := os.read(self._read, 1)[0]) not in self._signals:
            pass
        return signum

    def close(self) -> None:
        """Give the wake-up back and close the pipe (again: nothing); a signal after it is
        ignored."""
        if not self._closed:
            self._closed = True
            signal.set_wakeup_fd(self._before)
            for fd in (self._read, self._write):
                os.close(fd)
