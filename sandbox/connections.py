"""The listening server under the sandbox's API: the standard library's ``ThreadingHTTPServer``,
one thread per connection, running a handler it is given (:class:`sandbox.http.ApiHandler`).

Chosen over werkzeug's development server and cheroot because a watch is a response that
streams for minutes: http.server lets the handler write chunks straight to the socket, with no
WSGI buffering or worker-pool sizing to get wrong (a cheroot pool would be exhausted by idle
watches), and it needs nothing beyond the standard library. Connections are bounded
(``max_connections``; one over the bound is answered 429 and closed) and tracked, so
:meth:`sandbox.server.Sandbox.stop` ends every watch and closes every socket before it returns.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import socket
import ssl
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sandbox.access import Access
    from sandbox.store import Store
    from sandbox.watch import Subscription

log = logging.getLogger("fleetgate.sandbox")

# A hook sees each request (method, path, query) before it is served; it may sleep (latency)
# or raise sandbox.errors.StatusError (an injected 409/429/500). Faults plug in here.
RequestHook = Callable[[str, str, dict[str, str]], None]
# An endpoint of the sandbox itself (e.g. /sandbox/faults): (method, query, body) → (code, JSON).
ExtraRoute = Callable[[str, dict[str, str], bytes], tuple[int, Any]]

_TOO_MANY_BODY = json.dumps(
    {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "TooManyRequests"}
    | {"message": "too many connections to the sandbox", "code": 429}
).encode()
_TOO_MANY = (
    b"HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\nConnection: close\r\n"
    + f"Content-Length: {len(_TOO_MANY_BODY)}\r\n\r\n".encode()
    + _TOO_MANY_BODY
)


class ApiHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(
        self,
        address: tuple[str, int],
        handler: type[BaseHTTPRequestHandler],
        store: Store,
        *,
        context: ssl.SSLContext | None,
        access: Access,
        max_connections: int,
        bookmark_interval: float,
    ) -> None:
        super().__init__(address, handler)
        self.store = store
        self.access = access
        self.context = context
        self.bookmark_interval = bookmark_interval
        self.request_hooks: list[RequestHook] = []
        self.routes: dict[str, ExtraRoute] = {}
        self.stopping = threading.Event()
        self._slots = threading.BoundedSemaphore(max_connections)
        self._lock = threading.Lock()
        # accepted socket → the socket to shut down when stopping: the TLS socket once wrapped
        # (wrapping detaches the accepted one, whose shutdown would then do nothing)
        self._connections: dict[socket.socket, socket.socket] = {}
        self._watches: dict[Subscription, str] = {}  # → the request path
        self._aborted: set[Subscription] = set()

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            with contextlib.suppress(OSError):
                request.sendall(_TOO_MANY)
            self.shutdown_request(request)
            return
        with self._lock:
            self._connections[request] = request
        super().process_request(request, client_address)

    def finish_request(self, request: Any, client_address: Any) -> None:
        if self.context is not None:
            accepted = request
            request.settimeout(10)
            try:
                request = self.context.wrap_socket(request, server_side=True)
            except (ssl.SSLError, OSError) as error:
                log.debug("TLS handshake with %s failed: %s", client_address, error)
                return
            request.settimeout(None)
            with self._lock:
                if accepted in self._connections:
                    self._connections[accepted] = request
        super().finish_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._lock:
            known = self._connections.pop(request, None) is not None
        super().shutdown_request(request)
        if known:
            self._slots.release()

    def track_watch(self, subscription: Subscription, path: str = "") -> None:
        with self._lock:
            self._watches[subscription] = path

    def untrack_watch(self, subscription: Subscription) -> bool:
        """Forget a finished watch; True when it was ended by :meth:`drop_watches` (abrupt)."""
        with self._lock:
            self._watches.pop(subscription, None)
            aborted = subscription in self._aborted
            self._aborted.discard(subscription)
            return aborted

    def drop_watches(self, path: str = "", abrupt: bool = False) -> int:
        """End the open watches whose request path (with query) matches the regular expression
        ``path`` (all by default). ``abrupt``: close the connection mid-stream rather than end
        the chunked response. Returns how many were dropped."""
        pattern = re.compile(path)
        with self._lock:
            chosen = [s for s, p in self._watches.items() if pattern.search(p)]
            if abrupt:
                self._aborted.update(chosen)
        for subscription in chosen:
            subscription.close()
        return len(chosen)

    def close_everything(self) -> None:
        self.stopping.set()
        with self._lock:
            watches, connections = list(self._watches), list(self._connections.values())
        for subscription in watches:
            subscription.close()
        for connection in connections:
            with contextlib.suppress(OSError):  # already closed by its peer
                connection.shutdown(socket.SHUT_RDWR)
