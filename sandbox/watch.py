"""Watch events: a bounded log per resource type, and subscriptions that read from it.

The store appends one :class:`WatchEvent` per write, under its lock, and offers it to every live
:class:`Subscription` of that resource type. A watch that starts from a resourceVersion replays
the log after it; a version older than what the log still holds is answered with 410 Gone
(reason ``Expired``), as the real server's watch cache does. Objects in events are the store's
own (never mutated after storing); a subscription hands out deep copies.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from sandbox.errors import gone
from sandbox.jsoncopy import copy_json
from sandbox.selectors import FieldSelector, LabelSelector

ADDED, MODIFIED, DELETED, BOOKMARK, ERROR = "ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"


@dataclass(frozen=True, slots=True)
class WatchEvent:
    type: str
    object: Mapping[str, Any]
    resource_version: int
    old: Mapping[str, Any] | None = None


class EventLog:
    """The last ``limit`` events of one resource type, oldest first."""

    def __init__(self, limit: int) -> None:
        self._events: deque[WatchEvent] = deque(maxlen=max(1, limit))
        self.compacted = 0  # newest resourceVersion dropped from the log

    def append(self, event: WatchEvent) -> None:
        if len(self._events) == self._events.maxlen:
            self.compacted = self._events[0].resource_version
        self._events.append(event)

    def resize(self, limit: int) -> None:
        events = list(self._events)
        keep = events[-max(1, limit) :]
        dropped = events[: len(events) - len(keep)]
        if dropped:
            self.compacted = dropped[-1].resource_version
        self._events = deque(keep, maxlen=max(1, limit))

    def since(self, resource_version: int) -> list[WatchEvent]:
        """Events after ``resource_version``; 410 Gone when some were already dropped."""
        if resource_version < self.compacted:
            raise gone(f"too old resource version: {resource_version} ({self.compacted + 1})")
        return [e for e in self._events if e.resource_version > resource_version]


@dataclass(frozen=True, slots=True)
class WatchFilter:
    namespace: str | None = None
    labels: LabelSelector = field(default_factory=LabelSelector)
    fields: FieldSelector = field(default_factory=FieldSelector)

    def matches(self, obj: Mapping[str, Any] | None) -> bool:
        if obj is None:
            return False
        meta = obj.get("metadata") or {}
        if self.namespace is not None and meta.get("namespace") != self.namespace:
            return False
        return self.labels.matches(meta.get("labels")) and self.fields.matches(obj)

    def translate(self, event: WatchEvent) -> str | None:
        """The event type this watcher sees, or None: an object entering or leaving the
        selection arrives as ADDED or DELETED, as the real server's filtered watches do."""
        now = self.matches(event.object)
        if event.type != MODIFIED:
            return event.type if now else None
        before = self.matches(event.old)
        if before and now:
            return MODIFIED
        if now:
            return ADDED
        return DELETED if before else None


class Subscription:
    """One watch. Iterate it, or call :meth:`get`; each item is ``{"type", "object"}``.

    The iterator ends when the subscription is closed: by :meth:`close`, by the store's
    :meth:`~sandbox.store.Store.close`, or because its queue overflowed (a consumer that does not
    keep up is dropped, as the real server drops slow watchers; watch again from the last
    resourceVersion seen). ``progress`` is the newest resourceVersion offered to it, filtered or
    not: the resourceVersion a BOOKMARK may carry. ``start``: the resourceVersion the watch
    started from; only events after it are sent, and no bookmark below it (a watch from a
    version the store has not reached yet waits silently for it, as the watch cache's does).
    """

    def __init__(
        self,
        watch_filter: WatchFilter,
        api_version: str,
        maxsize: int,
        progress: int,
        on_close: Callable[[Subscription], None],
        *,
        start: int = 0,
    ) -> None:
        self._filter = watch_filter
        self._api_version = api_version
        self._queue: queue.Queue[tuple[str, Mapping[str, Any]] | None] = queue.Queue(maxsize)
        self._on_close = on_close
        self._closed = threading.Event()
        self.progress = progress
        self.start = start
        self.overflowed = False

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    def offer(self, event: WatchEvent) -> None:
        """Called by the store, under its lock."""
        self.progress = max(self.progress, event.resource_version)
        if event.resource_version <= self.start:
            return
        seen_as = self._filter.translate(event)
        if seen_as is None or self.closed:
            return
        try:
            self._queue.put_nowait((seen_as, event.object))
        except queue.Full:
            self.overflowed = True
            self._finish()

    @property
    def bookmark_version(self) -> int | None:
        """The resourceVersion a BOOKMARK would carry now; None while below ``start``."""
        return self.progress if self.progress >= self.start else None

    def get(self, timeout: float | None = None, *, shared: bool = False) -> dict[str, Any] | None:
        """The next event, or None after ``timeout`` seconds or once closed and drained.

        The event's object is a copy the caller may change; with ``shared``, a shallow one
        whose nested values are the store's own (never changed after they are stored): for a
        caller that only reads it, such as the HTTP stream serializing it (a deep copy per
        event was 7 % of the sandbox's CPU under ``make bench-e2e``)."""
        if self.closed and self._queue.empty():
            return None
        try:
            item = self._queue.get(timeout=timeout)
        except queue.Empty:
            return None
        if item is None:  # the end marker; `closed` is already set
            return None
        kind, obj = item
        out = dict(obj) if shared else copy_json(obj)
        out["apiVersion"] = self._api_version
        return {"type": kind, "object": out}

    def __iter__(self) -> Iterator[dict[str, Any]]:
        while True:
            event = self.get(timeout=0.5)
            if event is not None:
                yield event
            elif self.closed and self._queue.empty():
                return

    def _finish(self) -> None:
        if not self._closed.is_set():
            self._closed.set()
            # When full, the reader sees `closed` once it drains the queue.
            with contextlib.suppress(queue.Full):
                self._queue.put_nowait(None)

    def close(self) -> None:
        """Stop receiving events; idempotent."""
        self._finish()
        self._on_close(self)

    def run(
        self, callback: Callable[[dict[str, Any]], None], name: str = "watch"
    ) -> threading.Thread:
        """Deliver each event to ``callback`` on a daemon thread until closed."""

        def deliver() -> None:
            for event in self:
                callback(event)

        thread = threading.Thread(target=deliver, name=name, daemon=True)
        thread.start()
        return thread
