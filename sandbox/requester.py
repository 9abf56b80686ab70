"""Who makes the request a handler thread serves: the HTTP handler names the caller's
``User-Agent``, method and path around the request, and what the store commits on that thread
meanwhile is theirs (:mod:`sandbox.writelog` records it)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

_request = threading.local()


@contextlib.contextmanager
def requester(user_agent: str, method: str, path: str) -> Iterator[None]:
    """Name the writer of whatever the store commits on this thread meanwhile."""
    _request.who = (user_agent or "unknown", method, path)
    try:
        yield
    finally:
        _request.who = None


def current_requester() -> tuple[str, str, str] | None:
    """(User-Agent, method, path) of the request this thread serves; None outside one."""
    return getattr(_request, "who", None)
