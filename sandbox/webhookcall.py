"""One admission webhook call over HTTP(S): the AdmissionReview out, its response back.

Like kube-apiserver's webhook client: ``POST <url>?timeout=<N>s`` with a JSON AdmissionReview,
TLS verified against the configuration's ``caBundle`` (the system CAs when it is empty) with a
real handshake and host name check, one deadline of ``timeoutSeconds`` for the whole call. Any
failure to get a well-formed answer is a :class:`CallError` whose text reads like the real
server's (``Post "https://…": context deadline exceeded``); the caller applies failurePolicy.

Connections are kept alive between calls, as kube-apiserver's client keeps them (a handshake per
call cost ~8 ms a job, at ~4 calls a job, measured for issue 18): after a whole answer without
``Connection: close`` the connection goes back to a pool per webhook service (scheme, host, port
and caBundle), which keeps at most ``IDLE_PER_SERVICE`` idle ones, each for at most
``IDLE_SECONDS``; calls beyond that open more and close them afterwards. A call on a kept
connection that the server closed meanwhile (reset, EOF before the answer) is made once more on a
new connection, as Go's http.Transport does; a timeout is never retried. fleetgate's webhook holds
idle kept-alive connections in its request gate, not in a worker (``webhook.slowclients``), and
closes them after its ``idle_timeout`` (10 s by default): ``IDLE_SECONDS`` is below that, so the
server rarely closes one first.
"""

from __future__ import annotations

import base64
import http.client
import json
import select
import ssl
import threading
import time
from collections.abc import Mapping
from typing import Any, NamedTuple
from urllib.parse import urlsplit, urlunsplit

from sandbox.dns import Hosts, route

REVIEW_VERSION = "admission.k8s.io/v1"
IDLE_PER_SERVICE = 8  # idle kept-alive connections kept per webhook service
IDLE_SECONDS = 5.0  # an idle connection older than this is closed, not reused
# what a kept-alive connection that the server closed while it was idle fails with
_DROPPED = (ConnectionError, ssl.SSLEOFError, ssl.SSLZeroReturnError)


class CallError(Exception):
    """The webhook could not be called, or answered something that is not a review."""


class Service(NamedTuple):
    """Where calls go: connections are shared only between calls to the same service."""

    scheme: str
    host: str
    port: int
    ca_bundle: str


class ConnectionPool:
    """Idle kept-alive connections by service; thread-safe, bounded (see the module's doc)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: dict[Service, list[tuple[http.client.HTTPConnection, float]]] = {}

    def take(self, service: Service) -> http.client.HTTPConnection | None:
        """The most recently used idle connection to ``service`` still fit for a call."""
        stale: list[http.client.HTTPConnection] = []
        found = None
        now = time.monotonic()
        with self._lock:
            idle = self._idle.get(service, [])
            while idle and found is None:
                connection, since = idle.pop()
                if now - since < IDLE_SECONDS and _open(connection):
                    found = connection
                else:
                    stale.append(connection)
        for connection in stale:
            connection.close()
        return found

    def give(self, service: Service, connection: http.client.HTTPConnection) -> None:
        """Keep ``connection`` for a later call, or close it when enough are idle."""
        with self._lock:
            idle = self._idle.setdefault(service, [])
            if len(idle) < IDLE_PER_SERVICE:
                idle.append((connection, time.monotonic()))
                return
        connection.close()

    def close(self) -> None:
        """Close every idle connection."""
        with self._lock:
            idle = [connection for kept in self._idle.values() for connection, _ in kept]
            self._idle.clear()
        for connection in idle:
            connection.close()


def _open(connection: http.client.HTTPConnection) -> bool:
    """False when the server has closed an idle connection (or sent something unasked)."""
    sock = connection.sock
    if sock is None:
        return False
    if isinstance(sock, ssl.SSLSocket) and sock.pending():
        return False
    try:
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):  # closed
        return False
    return not readable


class TLSContexts:
    """Client TLS contexts by caBundle, built once each (loading a CA costs a few ms), and the
    pool of kept-alive connections (``connections``) the calls made with them share."""

    def __init__(self, hosts: Hosts | None = None) -> None:
        self._lock = threading.Lock()
        self._contexts: dict[str, ssl.SSLContext] = {}
        self.connections = ConnectionPool()
        self.hosts = hosts  # names resolved in place of cluster DNS (sandbox.dns)

    def get(self, ca_bundle: str) -> ssl.SSLContext:
        with self._lock:
            context = self._contexts.get(ca_bundle)
            if context is None:
                context = self._build(ca_bundle)
                self._contexts[ca_bundle] = context
            return context

    @staticmethod
    def _build(ca_bundle: str) -> ssl.SSLContext:
        if not ca_bundle:
            return ssl.create_default_context()
        try:
            pem = base64.b64decode(ca_bundle, validate=True).decode()
            context = ssl.create_default_context(cadata=pem)
        except (ValueError, ssl.SSLError) as error:
            raise CallError(f"invalid caBundle: {error}") from error
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        return context


def with_timeout(url: str, seconds: float) -> str:
    """The URL kube-apiserver posts to: the configured one plus ``timeout=<N>s``."""
    parts = urlsplit(url)
    extra = f"timeout={int(seconds)}s"
    query = f"{parts.query}&{extra}" if parts.query else extra
    return urlunsplit((parts.scheme, parts.netloc, parts.path, query, ""))


def post_review(
    url: str,
    review: Mapping[str, Any],
    timeout: float,
    contexts: TLSContexts,
    ca_bundle: str,
) -> dict[str, Any]:
    """POST ``review`` to ``url`` (already carrying ``?timeout=``); the decoded response."""
    parts = urlsplit(url)
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise CallError(f'Post "{url}": unsupported URL')
    deadline = time.monotonic() + timeout
    data = json.dumps(review, separators=(",", ":")).encode()
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    port = parts.port or (443 if parts.scheme == "https" else 80)
    service = Service(parts.scheme, parts.hostname, port, ca_bundle)
    try:
        status, body = _call(contexts, service, path, data, deadline)
    except TimeoutError as error:
        raise CallError(f'Post "{url}": context deadline exceeded') from error
    except ssl.SSLCertVerificationError as error:
        raise CallError(f'Post "{url}": tls: failed to verify certificate: {error}') from error
    except (OSError, http.client.HTTPException) as error:
        raise CallError(f'Post "{url}": {error}') from error
    if time.monotonic() > deadline:
        raise CallError(f'Post "{url}": context deadline exceeded')
    if status != 200:
        raise CallError(f"expected response code 200, got {status}: {body[:200]!r}")
    try:
        answer = json.loads(body)
    except ValueError as error:
        raise CallError(f"received invalid webhook response: {error}") from error
    return _checked(answer, review["request"]["uid"])


def _call(
    contexts: TLSContexts, service: Service, path: str, data: bytes, deadline: float
) -> tuple[int, bytes]:
    """One exchange on a kept connection, or on a new one when none is idle or the kept one
    turns out to be closed by the server."""
    kept = contexts.connections.take(service)
    if kept is not None:
        try:
            return _exchange(contexts.connections, service, kept, path, data, deadline)
        except _DROPPED:
            pass  # closed while idle: once more, on a new connection
    remaining = max(0.001, deadline - time.monotonic())
    connection: http.client.HTTPConnection
    if service.scheme == "https":
        connection = http.client.HTTPSConnection(
            service.host,
            service.port,
            timeout=remaining,
            context=contexts.get(service.ca_bundle),
        )
    else:
        connection = http.client.HTTPConnection(service.host, service.port, timeout=remaining)
    route(connection, contexts.hosts)
    return _exchange(contexts.connections, service, connection, path, data, deadline)


def _exchange(
    pool: ConnectionPool,
    service: Service,
    connection: http.client.HTTPConnection,
    path: str,
    data: bytes,
    deadline: float,
) -> tuple[int, bytes]:
    """POST on ``connection`` within the deadline; it goes back to the pool after a whole
    answer that leaves it open, and is closed otherwise."""
    kept = False
    try:
        if connection.sock is not None:  # a kept one: this call's deadline
            connection.sock.settimeout(max(0.001, deadline - time.monotonic()))
        connection.request(
            "POST",
            path,
            body=data,
            headers={"Content-Type": "application/json", "Accept": "application/json"},
        )
        if connection.sock is not None:  # the rest of the deadline for the answer
            connection.sock.settimeout(max(0.001, deadline - time.monotonic()))
        reply = connection.getresponse()
        body = reply.read()
        if not reply.will_close:
            pool.give(service, connection)
            kept = True
        return reply.status, body
    finally:
        if not kept:
            connection.close()


def _checked(answer: Any, uid: str) -> dict[str, Any]:
    if not isinstance(answer, dict) or not isinstance(answer.get("response"), dict):
        raise CallError("webhook response was absent")
    if answer.get("apiVersion") != REVIEW_VERSION or answer.get("kind") != "AdmissionReview":
        raise CallError(
            f"expected webhook response of {REVIEW_VERSION}, Kind=AdmissionReview, got "
            f"{answer.get('apiVersion')}, Kind={answer.get('kind')}"
        )
    response = answer["response"]
    if response.get("uid") != uid:
        raise CallError(f'expected response.uid="{uid}", got "{response.get("uid")}"')
    if not isinstance(response.get("allowed"), bool):
        raise CallError("webhook response has no boolean response.allowed")
    return response
