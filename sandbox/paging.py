"""``limit``/``continue`` paging over a consistent snapshot.

The first page of a limited list keeps the sorted list of (immutable) stored objects as they
were at its resourceVersion; continue tokens point into it. Later pages therefore show the same
state whatever was written meanwhile, as etcd's MVCC reads do. Snapshots are few and short-lived:
a token whose snapshot was dropped is answered with 410 Gone (``Expired``), as the real server
answers a continue token older than the etcd compaction; the client relists.
"""

from __future__ import annotations

import base64
import itertools
import json
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sandbox.errors import bad_request, gone

_EXPIRED = (
    "The provided continue parameter is too old to display a consistent list result. "
    "You can start a new list without the continue parameter."
)


@dataclass(frozen=True, slots=True)
class Page:
    items: Sequence[Mapping[str, Any]]
    resource_version: int
    continue_token: str
    remaining: int


class Snapshots:
    """Bounded, expiring store of list snapshots for continue tokens."""

    def __init__(
        self,
        capacity: int = 64,
        ttl_seconds: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._capacity = capacity
        self._ttl = ttl_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._snapshots: OrderedDict[int, tuple[float, int, Sequence[Mapping[str, Any]]]] = (
            OrderedDict()
        )

    def first_page(
        self, items: Sequence[Mapping[str, Any]], resource_version: int, limit: int
    ) -> Page:
        if limit <= 0 or len(items) <= limit:
            return Page(items, resource_version, "", 0)
        with self._lock:
            snapshot_id = next(self._ids)
            self._snapshots[snapshot_id] = (self._clock(), resource_version, items)
            while len(self._snapshots) > self._capacity:
                self._snapshots.popitem(last=False)
        return self._page(snapshot_id, resource_version, items, 0, limit)

    def next_page(self, token: str, limit: int) -> Page:
        snapshot_id, offset = _decode(token)
        with self._lock:
            self._expire()
            entry = self._snapshots.get(snapshot_id)
        if entry is None:
            raise gone(_EXPIRED)
        _, resource_version, items = entry
        return self._page(snapshot_id, resource_version, items, offset, limit)

    def _page(
        self, snapshot_id: int, rv: int, items: Sequence[Mapping[str, Any]], offset: int, limit: int
    ) -> Page:
        end = len(items) if limit <= 0 else offset + limit
        page = items[offset:end]
        remaining = max(0, len(items) - end)
        token = _encode(snapshot_id, end) if remaining else ""
        if not remaining:
            with self._lock:
                self._snapshots.pop(snapshot_id, None)
        return Page(page, rv, token, remaining)

    def _expire(self) -> None:
        deadline = self._clock() - self._ttl
        for snapshot_id, (created, _, _) in list(self._snapshots.items()):
            if created < deadline:
                del self._snapshots[snapshot_id]


def _encode(snapshot_id: int, offset: int) -> str:
    raw = json.dumps({"v": "sandbox/v1", "s": snapshot_id, "o": offset}).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode(token: str) -> tuple[int, int]:
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        data = json.loads(raw)
        return int(data["s"]), int(data["o"])
    except (ValueError, KeyError, TypeError) as error:
        raise bad_request(f"continue key is not valid: {error}") from error
