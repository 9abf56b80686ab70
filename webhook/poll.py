"""Polling files for changes: the certificate pair, and the policy files of a ConfigMap volume.

The kubelet updates Secret and ConfigMap volumes by writing a new hidden directory and swapping
the ``..data`` symlink; inotify reports that on ``..data`` and the hidden ``..2025_…`` copies,
never on the visible file names. ``stat`` follows the symlinks, so a swap changes the inode and
mtime seen here without knowing that layout. A few ``stat`` calls per second cost nothing.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Hashable

from engine.policy.reload import PolicyHolder, Settler, fingerprint

__all__ = ["Poller", "fingerprint", "policy_poller"]

log = logging.getLogger(__name__)


class Poller:
    """Calls ``on_change`` (from its own thread) whenever ``look()`` gives a new value.

    With ``settle``, only once the new value has stayed the same for that many seconds: while a
    change settles, ``look`` is polled again when it would settle (or every ``interval`` if
    shorter), and any further change starts the count again.

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
        settle: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``seen``: the value the current state was loaded from, looked up *before* loading it
        (default: look now). Then a change between that look and the load is caught next time."""
        self._look = look
        self._on_change = on_change
        self._interval = interval
        self._name = name
        self._seen = look() if seen is None else seen
        self._settler = Settler(settle, clock)
        self._pending = False  # a change is settling
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def seen(self) -> Hashable | None:
        """The value last handled: during ``on_change``, the one that settled."""
        return self._seen

    def check(self) -> bool:
        """Poll once; True when a change was seen, had settled and was handled."""
        current = self._look()
        if current == self._seen:
            self._pending = False
            self._settler.restart()
            return False
        self._pending = self._pending or current is not None
        if not self._settler.settled(current):
            return False
        self._pending = False
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

    def _next_wait(self) -> float:
        if not self._pending:
            return self._interval
        return min(self._interval, max(self._settler.remaining(), 0.001))

    def _run(self) -> None:
        while not self._stop.wait(self._next_wait()):
            try:
                self.check()
            except Exception:  # a bug in a handler must not end the polling
                log.exception("%s: handling a change failed", self._name)


def policy_poller(holder: PolicyHolder, interval: float, settle: float) -> Poller:
    """Reload ``holder`` once its files changed and then stayed the same for ``settle`` seconds.

    The holder checks that the files it reads are still the ones that settled, and the same
    after the read (``PolicyHolder.reload``); if not, the files differ from ``seen`` and settle
    again. The poller looks before the first load, so an edit made meanwhile is loaded next.
    """
    look = holder.look
    if look is None:
        raise ValueError("policy_poller needs a holder with a look (PolicyHolder.for_paths)")
    poller = Poller(
        look,
        lambda: holder.reload(expected=poller.seen),
        interval,
        "policy-poller",
        settle=settle,
    )
    return poller
