"""The sandbox's own record of writes: who changed what, in the order the store committed it.

:class:`WriteLog` listens to the store (one entry per committed change: create, update, patch,
status, delete; a no-op write commits nothing and is not recorded) and serves the record at
``GET /sandbox/writes``. Entries are numbered in commit order (``seq``, the same order as
resourceVersions) and bounded: the oldest are dropped past ``limit``.

The writer's identity is the HTTP request's ``User-Agent`` (the ``kubernetes`` client sends
what ``ApiClient.user_agent`` says, e.g. ``fleetgate-reconciler/<identity>``); the handler
thread names it around the request (:mod:`sandbox.requester`), and the store commits the write on
that same thread. Writes of the in-process controllers (Karmada's, simulated) carry
``IN_PROCESS``. For Leases the entry also carries ``spec.holderIdentity`` as written, so a test
can rebuild the lease terms from the record alone and check that only the holder wrote.

``GET /sandbox/writes`` answers ``{"entries": [...], "dropped": N, "next": SEQ}``; query
parameters filter: ``resource`` (e.g. ``resourcebindings.work.karmada.io``), ``user``
(a prefix), ``since`` (entries with ``seq`` > since). ``DELETE`` clears the record.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from sandbox import errors
from sandbox.requester import current_requester

if TYPE_CHECKING:
    from sandbox.server import Sandbox
    from sandbox.watch import WatchEvent

ENDPOINT = "/sandbox/writes"
IN_PROCESS = "sandbox:in-process"
DEFAULT_LIMIT = 100_000
LEASES = "leases.coordination.k8s.io"
_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}
_EVENT_VERBS = {"ADDED": "create", "MODIFIED": "update", "DELETED": "delete"}


@dataclass(frozen=True, slots=True)
class Write:
    seq: int
    time: float  # wall-clock seconds (time.time()) when the store committed it
    user: str
    verb: str  # create | update | patch | delete (of the HTTP request; in-process: the event's)
    subresource: str  # "status" or ""
    resource: str  # the resource key, e.g. "resourcebindings.work.karmada.io"
    namespace: str
    name: str
    resource_version: str
    event: str  # ADDED | MODIFIED | DELETED
    holder: str | None = None  # Leases: spec.holderIdentity after the write


class WriteLog:
    def __init__(self, limit: int = DEFAULT_LIMIT) -> None:
        if limit < 1:
            raise ValueError(f"the write log needs room for at least 1 entry, got {limit}")
        self._entries: deque[Write] = deque(maxlen=limit)
        self._lock = threading.Lock()
        self._seq = 0
        self.dropped = 0

    def attach(self, sandbox: Sandbox) -> WriteLog:
        """Listen to ``sandbox``'s store and serve ``/sandbox/writes`` on it."""
        sandbox.store.add_listener(self.record)
        sandbox.routes[ENDPOINT] = self.handle_http
        return self

    def record(self, resource: str, event: WatchEvent) -> None:
        """A store listener: runs under the store's lock, so it only appends."""
        who = current_requester()
        user, method, path = who if who is not None else (IN_PROCESS, "", "")
        meta: Mapping[str, Any] = event.object.get("metadata") or {}
        holder = None
        if resource == LEASES and event.type != "DELETED":
            holder = str((event.object.get("spec") or {}).get("holderIdentity") or "")
        with self._lock:
            self._seq += 1
            if len(self._entries) == self._entries.maxlen:
                self.dropped += 1
            self._entries.append(
                Write(
                    self._seq,
                    time.time(),
                    user,
                    _VERBS.get(method) or _EVENT_VERBS.get(event.type, event.type.lower()),
                    "status" if path.rstrip("/").endswith("/status") else "",
                    resource,
                    str(meta.get("namespace") or ""),
                    str(meta.get("name") or ""),
                    str(meta.get("resourceVersion") or event.resource_version),
                    event.type,
                    holder,
                )
            )

    @property
    def last_seq(self) -> int:
        """The ``seq`` of the newest entry (0: none yet)."""
        with self._lock:
            return self._seq

    def entries(self, resource: str = "", user: str = "", since: int = 0) -> list[Write]:
        with self._lock:
            return [
                w
                for w in self._entries
                if w.seq > since
                and (not resource or w.resource == resource)
                and w.user.startswith(user)
            ]

    def clear(self) -> int:
        with self._lock:
            cleared = len(self._entries)
            self._entries.clear()
            return cleared

    def handle_http(self, method: str, query: dict[str, str], body: bytes) -> tuple[int, Any]:
        if method == "DELETE":
            return 200, {"cleared": self.clear()}
        if method != "GET":
            raise errors.method_not_allowed(method, ENDPOINT)
        try:
            since = int(query.get("since") or 0)
        except ValueError as error:
            raise errors.bad_request(f"{ENDPOINT}: since must be an integer: {error}") from error
        chosen = self.entries(query.get("resource", ""), query.get("user", ""), since)
        return 200, {
            "entries": [asdict(w) for w in chosen],
            "dropped": self.dropped,
            "next": chosen[-1].seq if chosen else since,
        }
