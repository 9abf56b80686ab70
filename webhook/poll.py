"""Polling files for changes: the certificate pair, and the policy files of a ConfigMap volume.

The kubelet updates Secret and ConfigMap volumes by writing a new hidden directory and swapping
the ``..data`` symlink; inotify reports that on ``..data`` and the hidden ``..2025_…`` copies,
never on the visible file names. ``stat`` follows the symlinks, so a swap changes the inode and
mtime seen here without knowing that layout. A few ``stat`` calls per second cost nothing.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Hashable, Iterable
from pathlib import Path

log = logging.getLogger(__name__)


def fingerprint(paths: Iterable[Path]) -> tuple[tuple[str, int, int, int], ...] | None:
    """(path, mtime, size, inode) of each file, symlinks followed; None while one is missing."""
    try:
        return tuple(
            (str(path), s.st_mtime_ns, s.st_size, s.st_ino)
            for path in paths
            for s in (path.stat(),)
        )
    except OSError:
        return None  # mid-swap: look again next time


class Poller:
    """Calls ``on_change`` (from its own thread) whenever ``look()`` gives a new value.

    The value is recorded as seen after each call, whatever ``on_change`` did: a file that fails
    to load is retried when it changes again, not on every poll.
    """

    def __init__(
        self,
        look: Callable[[], Hashable | None],
        on_change: Callable[[], object],
        interval: float,
        name: str,
        *,
        seen: Hashable | None = None,
    ) -> None:
        """``seen``: the value the current state was loaded from, looked up *before* loading it
        (default: look now). Then a change between that look and the load is caught next time."""
        self._look = look
        self._on_change = on_change
        self._interval = interval
        self._name = name
        self._seen = look() if seen is None else seen
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def check(self) -> bool:
        """Poll once; True when a change was seen and handled."""
        current = self._look()
        if current is None or current == self._seen:
            return False
        self._seen = current
        self._on_change()
        return True

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def __enter__(self) -> Poller:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self.check()
            except Exception:  # a bug in a handler must not end the polling
                log.exception("%s: handling a change failed", self._name)
