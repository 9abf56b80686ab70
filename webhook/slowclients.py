"""cheroot, hardened so that slow and idle clients cannot stall the webhook.

cheroot alone lets them (seen in issue 16): its single accept loop does each TLS handshake
(cheroot issue 748), so one TCP connection that never sends a ClientHello stops every other
client for the socket timeout; and it hands each connection to a worker thread that then blocks
reading it, with a timeout per socket operation rather than per request, so clients that send a
byte a second hold every worker for as long as they like.

Here:

- ``LazyHandshakeAdapter`` only attaches the TLS state in the accept loop; no I/O happens there.
- ``RequestGate``, one thread with a selector, holds every connection (new, and kept alive
  between requests) with non-blocking sockets until a whole request has arrived: the TLS
  handshake, the request line and headers, and a body of up to ``BUFFERED_BODY`` bytes. Only
  then does a worker thread get it, so workers never wait for a client. A connection that sends
  nothing is closed after ``idle_timeout``; one whose request has not arrived whole
  ``request_timeout`` after its first byte is closed. The gate answers health probes itself
  (``webhook.probes``), so they never wait for a worker.
- ``_DeadlineConnection`` bounds what a worker still reads (a chunked or larger body) by the
  same deadline; a slower client gets ``408 Request Timeout`` and is disconnected.
- ``GuardedServer`` keeps at most ``max_connections`` open: a new connection beyond that takes
  the place of the oldest one that has sent nothing since it was accepted (so idle connections
  cannot lock clients out), or is closed at once when there is none.

One module past 400 lines: the gate, the deadline reader and the server share one connection's
life cycle; splitting them would put its invariants in two places.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import selectors
import socket
import ssl
import threading
import time
from typing import Any

from cheroot.makefile import MakeFile
from cheroot.server import HTTPConnection
from cheroot.ssl.builtin import BuiltinSSLAdapter
from cheroot.wsgi import Server

from webhook.framing import BUFFERED_BODY, request_complete
from webhook.probes import Probes, raw_answer

__all__ = ["BUFFERED_BODY", "GuardedServer", "LazyHandshakeAdapter", "request_complete"]

log = logging.getLogger(__name__)

_TICK_S = 0.1  # how often the gate looks for expired connections
_PIPELINED_PROBES = 32  # answered at once on one connection; a client sending more is dropped


class LazyHandshakeAdapter(BuiltinSSLAdapter):
    """TLS without a handshake in the accept loop: the request gate does it, non-blocking."""

    def wrap(self, sock: Any) -> tuple[ssl.SSLSocket, dict[str, str]]:
        tls = self.context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        return tls, {"wsgi.url_scheme": "https", "HTTPS": "on"}


class _DeadlineReader:
    """The socket as a connection's request reader sees it: first the bytes the gate read,
    then reads that each wait at most until the deadline of the request in progress."""

    def __init__(self, sock: Any, connection: _DeadlineConnection) -> None:
        self._sock = sock
        self._connection = connection
        self.early = memoryview(b"")

    def recv_into(self, buffer: Any, nbytes: int = 0, flags: int = 0) -> int:
        if self.early:
            size = min(len(self.early), nbytes or len(buffer))
            buffer[:size] = self.early[:size]
            self.early = self.early[size:]
            return size
        remaining = self._connection.remaining()
        if remaining <= 0:
            raise TimeoutError("timed out")  # cheroot answers 408 and closes
        idle = self._connection.server.timeout
        self._sock.settimeout(min(remaining, idle))
        try:
            return int(self._sock.recv_into(buffer, nbytes, flags))
        finally:
            self._sock.settimeout(idle)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)


class _DeadlineConnection(HTTPConnection):
    """A connection whose every request must arrive whole within the server's request_timeout."""

    def __init__(self, server: GuardedServer, sock: Any, makefile: Any = MakeFile) -> None:
        super().__init__(server, sock, makefile)
        self.reader = _DeadlineReader(sock, self)
        self.rfile = makefile(self.reader, "rb", self.rbufsize)
        self.accepted = False  # True once counted against max_connections
        self.served = False  # True once a request of it has gone to a worker
        self.handshaken = not isinstance(sock, ssl.SSLSocket)
        self._deadline: float | None = None

    def remaining(self) -> float:
        if self._deadline is None:
            return float(self.server.timeout)
        return self._deadline - time.monotonic()

    def communicate(self) -> bool:
        self._deadline = time.monotonic() + self.server.request_timeout
        try:
            return bool(super().communicate())
        finally:
            self._deadline = None

    def close(self) -> None:
        try:
            super().close()
        finally:
            self.server.forget(self)


class _Waiting:
    """A connection in the gate: the bytes read so far and its deadline."""

    __slots__ = ("buffer", "conn", "deadline", "since")

    def __init__(self, conn: _DeadlineConnection, now: float) -> None:
        self.conn = conn
        self.since = now
        self.deadline: float | None = None  # set by the first bytes
        self.buffer = bytearray()


class RequestGate:
    """One thread that holds connections until a whole request has arrived (see the module)."""

    def __init__(self, server: GuardedServer) -> None:
        self._server = server
        self._selector = selectors.DefaultSelector()
        self._incoming: queue.SimpleQueue[tuple[_DeadlineConnection, bool]] = queue.SimpleQueue()
        self._wake_read, self._wake_write = socket.socketpair()
        for end in (self._wake_read, self._wake_write):
            end.setblocking(False)
        self._selector.register(self._wake_read, selectors.EVENT_READ, None)
        self._waiting: dict[int, _Waiting] = {}
        self._stop = threading.Event()
        self._closing = threading.Lock()  # add() against _close(): no connection left behind
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="webhook-request-gate", daemon=True)

    def __len__(self) -> int:
        return len(self._waiting)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread.ident is None:  # never started
            self._close()
            return
        with self._closing:
            if not self._closed:
                self._wake()
        self._thread.join(timeout)

    def add(self, conn: _DeadlineConnection, *, over_cap: bool = False) -> None:
        """Hold ``conn`` until its next request has arrived (any thread may call this).

        ``over_cap``: a new connection beyond ``max_connections``; it takes the place of the
        oldest connection that has sent nothing since it was accepted, or is closed.
        """
        with self._closing:
            if self._closed:  # the server stopped while a worker finished this connection
                conn.close()
                return
            self._incoming.put((conn, over_cap))
            self._wake()

    def _wake(self) -> None:
        with contextlib.suppress(BlockingIOError):  # a wake-up is already pending
            self._wake_write.send(b"\0")

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                for key, _ in self._selector.select(timeout=_TICK_S):
                    if key.data is None:
                        with contextlib.suppress(BlockingIOError):
                            self._wake_read.recv(4096)
                    else:
                        self._advance(key.data, time.monotonic(), woken=True)
                self._admit()
                self._expire(time.monotonic())
        finally:
            self._close()

    def _close(self) -> None:
        with self._closing:
            self._closed = True
        for waiting in list(self._waiting.values()):
            self._drop(waiting)
        while not self._incoming.empty():
            self._incoming.get_nowait()[0].close()
        self._selector.close()
        self._wake_read.close()
        self._wake_write.close()

    def _admit(self) -> None:
        now = time.monotonic()
        while True:
            try:
                conn, over_cap = self._incoming.get_nowait()
            except queue.Empty:
                return
            if self._stop.is_set() or (over_cap and not self._evict_for(conn)):
                conn.close()
                continue
            waiting = _Waiting(conn, now)
            try:
                conn.socket.setblocking(False)
                self._selector.register(conn.socket, selectors.EVENT_READ, waiting)
            except (OSError, ValueError):  # closed meanwhile
                conn.close()
                continue
            self._waiting[id(conn)] = waiting
            self._advance(waiting, now, woken=False)  # TLS may hold decrypted bytes already

    def _advance(self, waiting: _Waiting, now: float, *, woken: bool) -> None:
        """Handshake and read what has arrived, without blocking; pass on a whole request."""
        conn, sock = waiting.conn, waiting.conn.socket
        if woken and waiting.deadline is None:
            waiting.deadline = now + self._server.request_timeout
        try:
            if not conn.handshaken:
                sock.do_handshake()
                conn.handshaken = True
                if sock.getpeercert():  # a verified client certificate: its subject, as
                    # cheroot's adapter names it (SSL_CLIENT_VERIFY, SSL_CLIENT_S_DN_CN, …)
                    conn.ssl_env = {**conn.ssl_env, **self._server.ssl_adapter.get_environ(sock)}
            answered = 0
            while True:
                while request_complete(waiting.buffer):
                    if not self._answer_probe(waiting, now):
                        self._pass_on(waiting)
                        return
                    answered += 1
                    if id(conn) not in self._waiting:  # answered, and closed
                        return
                    if answered > _PIPELINED_PROBES:  # would hold the gate: not a kubelet
                        self._drop(waiting)
                        return
                chunk = sock.recv(65536)
                if not chunk:  # the client hung up
                    self._drop(waiting)
                    return
                waiting.buffer += chunk
                if waiting.deadline is None:
                    waiting.deadline = now + self._server.request_timeout
        except ssl.SSLWantWriteError:
            self._selector.modify(sock, selectors.EVENT_WRITE, waiting)
        except (ssl.SSLWantReadError, BlockingIOError):
            self._selector.modify(sock, selectors.EVENT_READ, waiting)
        except OSError as err:  # a failed handshake, a reset: this client is gone
            log.debug("dropped the connection from %s: %s", conn.remote_addr, err)
            self._drop(waiting)

    def _evict_for(self, conn: _DeadlineConnection) -> bool:
        """Close the oldest connection that has sent nothing since it was accepted, and count
        ``conn`` in its place; False when there is none (kept-alive ones are never evicted)."""
        silent = [w for w in self._waiting.values() if w.deadline is None and not w.conn.served]
        if not silent:
            self._server.refuse(conn)
            return False
        self._drop(min(silent, key=lambda waiting: waiting.since))
        self._server.count(conn)
        return True

    def _answer_probe(self, waiting: _Waiting, now: float) -> bool:
        """Answer the health probe at the head of the buffer here; False when it is none.

        A client that does not take the few hundred bytes of the answer at once is dropped.
        """
        probes = self._server.probes
        answer = probes and raw_answer(probes, waiting.buffer, self._server.server_name)
        if not answer:
            return False
        del waiting.buffer[: answer.consumed]
        waiting.conn.served = True
        try:
            sent = waiting.conn.socket.send(answer.response)
        except OSError:  # ssl.SSLWantWriteError and BlockingIOError are ones
            sent = 0
        if sent < len(answer.response) or not answer.keep_alive:
            self._drop(waiting)
        else:
            waiting.since = now
            waiting.deadline = now + self._server.request_timeout if waiting.buffer else None
        return True

    def _pass_on(self, waiting: _Waiting) -> None:
        conn = waiting.conn
        conn.served = True
        self._forget(waiting)
        conn.socket.setblocking(True)
        conn.socket.settimeout(self._server.timeout)
        conn.reader.early = memoryview(bytes(waiting.buffer))
        self._server.dispatch(conn)

    def _expire(self, now: float) -> None:
        idle = self._server.timeout
        for waiting in list(self._waiting.values()):
            if waiting.deadline is None and now - waiting.since > idle:
                self._drop(waiting)  # sent nothing
            elif waiting.deadline is not None and now > waiting.deadline:
                log.debug("closed %s: its request did not arrive in time", waiting.conn.remote_addr)
                self._drop(waiting)

    def _forget(self, waiting: _Waiting) -> None:
        self._waiting.pop(id(waiting.conn), None)
        with contextlib.suppress(KeyError, ValueError, OSError):
            self._selector.unregister(waiting.conn.socket)

    def _drop(self, waiting: _Waiting) -> None:
        self._forget(waiting)
        with contextlib.suppress(OSError):
            waiting.conn.close()


class GuardedServer(Server):
    """cheroot's WSGI server with the request gate, deadlines and a connection cap."""

    ConnectionClass = _DeadlineConnection

    def __init__(
        self,
        *args: Any,
        request_timeout: float,
        max_connections: int,
        probes: Probes | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.request_timeout = request_timeout
        self.max_connections = max_connections
        self.probes = probes  # answered by the gate; without them, by the app
        self.refused = 0
        self.gate = RequestGate(self)
        self._open: set[int] = set()
        self._open_lock = threading.Lock()

    @property
    def open_connections(self) -> int:
        return len(self._open)

    def prepare(self) -> None:
        super().prepare()
        self.gate.start()

    def stop(self) -> None:
        super().stop()
        self.gate.stop()

    def process_conn(self, conn: Any) -> None:
        """A new connection, from cheroot's accept loop: count it, then to the gate."""
        if getattr(conn, "accepted", True):
            self.dispatch(conn)
            return
        conn.accepted = True
        with self._open_lock:
            full = len(self._open) >= self.max_connections
            if not full:
                self._open.add(id(conn))
        self.gate.add(conn, over_cap=full)

    def count(self, conn: Any) -> None:
        with self._open_lock:
            self._open.add(id(conn))

    def refuse(self, conn: Any) -> None:
        self.refused += 1
        if self.refused == 1 or self.refused % 1000 == 0:  # not a line per connection
            log.warning(
                "%d connections open (the most --max-connections allows), none of them idle "
                "since accepted: closed a new one from %s; %d closed so far",
                self.max_connections,
                conn.remote_addr,
                self.refused,
            )

    def put_conn(self, conn: Any) -> None:
        """A kept-alive connection after its response: to the gate for its next request."""
        if not self.ready:
            conn.close()
        elif conn.rfile.has_data():  # a pipelined request is buffered already
            self.dispatch(conn)
        else:
            self.gate.add(conn)

    def dispatch(self, conn: Any) -> None:
        """To a worker thread."""
        super().process_conn(conn)

    def forget(self, conn: Any) -> None:
        with self._open_lock:
            self._open.discard(id(conn))
