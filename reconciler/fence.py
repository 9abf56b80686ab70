"""Fencing: no write leaves this replica after its lease deadline.

The write gate (``LeaderElector.is_leader``) is asked before a write; a replica frozen after
that check (SIGSTOP, a stop-the-world pause, a host suspended) would send the write when it
wakes, while another replica may hold the Lease by then. So the deadline is checked again on a
monotonic clock at the moment each piece of a write request leaves: :func:`install` gives an
``ApiClient``'s connection pools a connection class whose ``send`` refuses (raises
:class:`Fenced`, and the connection is dropped) when ``deadline()`` has passed. A request whose
headers left in time but whose body would leave late is cut off: the API server never gets a
whole request, so nothing is written.

Fenced: every mutating request (POST, PUT, PATCH, DELETE) but those to Leases (the election
itself renews through the same client). Reads are never fenced. ``remaining()`` is what is left
of the lease, for request timeouts that end inside it.

The API server is told the same bound: a fenced request's URL carries ``timeout=`` with what is
left of the lease when its request line is written (kube-apiserver's request deadline, see
``sandbox.deadline``), so a write that arrives in time but would be committed after the lease
ended (a stalled API server, slow admission webhooks) is answered 504 and not committed.

What remains (docs/reconciler.md, "Fencing"): the instants between the deadline check and the
``sendall`` system call (a thread frozen exactly there sends when it wakes), the time the
request takes to reach the API server (its deadline counts from its arrival), and a write whose
storage transaction has begun when the deadline passes. Kubernetes has no fencing token a write
could carry, as client-go has none.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import urllib3
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

from engine.errors import FleetgateError

MUTATING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
UNFENCED_PATHS = ("/apis/coordination.k8s.io/",)  # the Lease: renewing it is what fences


class Fenced(FleetgateError, urllib3.exceptions.HTTPError):
    """A write was not sent: this replica's lease deadline had passed when it would leave."""


class Fence:
    """``deadline()``: the ``clock()`` time after which no write may leave (None: none may)."""

    def __init__(
        self,
        deadline: Callable[[], float | None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.deadline = deadline
        self.clock = clock
        self.refused = 0  # writes cut off at the deadline
        self._lock = threading.Lock()

    def remaining(self) -> float:
        """Seconds of the lease left now (0 when none)."""
        until = self.deadline()
        return 0.0 if until is None else max(0.0, until - self.clock())

    def fenced(self, method: str, url: str) -> bool:
        return method in MUTATING and not url.startswith(UNFENCED_PATHS)

    def bounded(self, method: str, url: str) -> str:
        """``url`` with the API server's deadline for a fenced request: ``timeout=`` what is
        left of the lease, in whole milliseconds (at least 1: 0 would mean no bound)."""
        if not self.fenced(method, url):
            return url
        millis = max(1, int(self.remaining() * 1000))
        return f"{url}{'&' if '?' in url else '?'}timeout={millis}ms"

    def check(self, method: str, url: str) -> None:
        if not self.fenced(method, url):
            return
        until = self.deadline()
        now = self.clock()
        if until is None or now >= until:
            with self._lock:
                self.refused += 1
            late = "no lease" if until is None else f"{now - until:.3f}s past the lease deadline"
            raise Fenced(f"{method} {url.split('?')[0]} not sent: {late}")


class _FencedMixin:
    fence: Fence
    _fenced_request: tuple[str, str] = ("GET", "")

    def putrequest(self, method: str, url: str, *args: Any, **kwargs: Any) -> None:
        self._fenced_request = (method, url)
        url = self.fence.bounded(method, url)  # the API server drops it past the lease
        super().putrequest(method, url, *args, **kwargs)  # type: ignore[misc]

    def send(self, data: Any) -> None:
        self.fence.check(*self._fenced_request)  # right before the bytes leave
        super().send(data)  # type: ignore[misc]


def install(api_client: Any, fence: Fence) -> None:
    """Fence every write ``api_client`` sends (its pools opened so far are closed first)."""
    manager = api_client.rest_client.pool_manager
    plain = type("FencedHTTPConnection", (_FencedMixin, HTTPConnection), {"fence": fence})
    secure = type("FencedHTTPSConnection", (_FencedMixin, HTTPSConnection), {"fence": fence})
    manager.pool_classes_by_scheme = {
        "http": type("FencedHTTPConnectionPool", (HTTPConnectionPool,), {"ConnectionCls": plain}),
        "https": type(
            "FencedHTTPSConnectionPool", (HTTPSConnectionPool,), {"ConnectionCls": secure}
        ),
    }
    manager.clear()
