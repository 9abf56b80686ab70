"""The deadline kube-apiserver gives every request that is not long-running.

Its ``WithRequestDeadline`` filter reads ``?timeout=`` (a Go duration: ``1500ms``, ``2s``,
``1m30s``); the request's context then ends that long after the request arrived, and never later
than the server's request timeout (60 s by default): a timeout of 0, a negative one or none at
all gets that maximum. A value that does not parse is a 400 before anything else. When the context
ends before the write reaches storage, nothing is stored and the handler answers 504 ``Timeout``
("request did not complete within requested timeout - context deadline exceeded").

A client can therefore bound when its write may still be committed: fleetgate's reconciler sends
what is left of its lease (``reconciler.fence``), so a write that sits in a stalled API server
(slow admission webhooks, a starved process) past that moment is dropped rather than committed
while another replica holds the Lease.

The sandbox serves a request on one thread and commits on it, so the deadline is thread-local:
the HTTP handler sets it around the request (:func:`request_deadline`) and the store calls
:func:`check` under its lock right before it commits, the last moment, as etcd's transaction is
the last point kube-apiserver's context is consulted. In-process writes (the simulated Karmada
controllers) have no deadline.
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
from collections.abc import Iterator, Mapping

from sandbox import errors

MAXIMUM_SECONDS = 60.0  # kube-apiserver's --request-timeout default
_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_PART = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_state = threading.local()


def parse_duration(text: str) -> float:
    """Seconds in Go's ``time.ParseDuration`` syntax: an optional sign, then one or more
    decimal numbers each with a unit; ``0`` alone is allowed. ValueError otherwise."""
    body = text[1:] if text[:1] in "+-" else text
    if body == "0":
        return 0.0
    seconds, at = 0.0, 0
    while at < len(body):
        found = _PART.match(body, at)
        if found is None:
            break
        seconds += float(found.group(1)) * _UNITS[found.group(2)]
        at = found.end()
    if not body or at != len(body):
        raise ValueError(f'time: invalid duration "{text}"')
    return -seconds if text.startswith("-") else seconds


def deadline_of(
    query: Mapping[str, str], arrived: float, maximum: float = MAXIMUM_SECONDS
) -> float:
    """The monotonic time a request that ``arrived`` then must be done by; a 400 StatusError
    for a ``timeout`` that does not parse."""
    value = query.get("timeout") or ""
    timeout = maximum
    if value:
        try:
            asked = parse_duration(value)
        except ValueError as error:
            raise errors.bad_request(
                f"invalid timeout specified in the request URL - {error}"
            ) from None
        if 0 < asked < maximum:
            timeout = asked
    return arrived + timeout


@contextlib.contextmanager
def request_deadline(deadline: float | None) -> Iterator[None]:
    """The deadline of the request this thread serves (None: none), for :func:`check`."""
    _state.deadline = deadline
    try:
        yield
    finally:
        _state.deadline = None


def current() -> float | None:
    """The monotonic deadline of the request this thread serves; None outside one."""
    return getattr(_state, "deadline", None)


def check() -> None:
    """Before a commit: 504 Timeout when this thread's request is past its deadline."""
    deadline = current()
    if deadline is not None and time.monotonic() >= deadline:
        raise errors.StatusError(
            errors.status(
                504,
                "Timeout",
                "Timeout: request did not complete within requested timeout - "
                "context deadline exceeded",
            )
        )
