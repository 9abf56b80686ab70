"""Slow and idle clients cannot stall the webhook (issue 16, item 6).

A real server on 127.0.0.1 with 4 worker threads; hostile clients hold more connections than
that: idle TCP connections to the TLS port that never send a ClientHello, and slowloris clients
that send one byte of a request every second. A well-formed AdmissionReview and ``/healthz``
from a real client must still be answered within the client's timeout (the karmada-apiserver
gives a webhook ``timeoutSeconds``, 10 s by default), and the slow clients are disconnected
by the configured deadlines: each test leaves no other way for the server to close them, and
waits for the close on a condition (nothing is timed, so a busy machine cannot fail it).

Every socket has a timeout and is closed in ``finally``; every wait has a deadline.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO
from tests.waiting import PATIENCE_S, eventually
from tests.webhook.helpers import created_binding, review, write_certificates
from tests.webhook.test_webhook_command import refused, start, stop
from webhook.serve import WebhookServer
from webhook.slowclients import BUFFERED_BODY, request_complete

MUTATE = "/mutate/resourcebindings"
THREADS = 4
HOSTILE = 2 * THREADS  # more hostile connections than worker threads
CLIENT_TIMEOUT_S = 10.0  # the karmada-apiserver's default timeoutSeconds for a webhook
REQUEST_TIMEOUT_S = 1.0  # the server's whole-request deadline in these tests
IDLE_TIMEOUT_S = 2.0  # the server's idle-connection timeout in these tests
NEVER_S = 10 * PATIENCE_S  # a deadline no test waits for: only the one under test can close

SCHEMES = pytest.mark.parametrize("scheme", ["https", "http"])


@pytest.fixture
def server(make_app, tmp_path: Path, scheme: str) -> Iterator[WebhookServer]:
    tls = None
    if scheme == "https":
        cert, key, _, _ = write_certificates(tmp_path / "tls")
        tls = (cert, key)
    server = WebhookServer(
        make_app(),
        "127.0.0.1",
        0,
        threads=THREADS,
        tls=tls,
        request_timeout=REQUEST_TIMEOUT_S,
        idle_timeout=IDLE_TIMEOUT_S,
        max_connections=64,
    )
    server.start()
    server.ca = tmp_path / "tls" / "ca.crt" if tls else None  # type: ignore[attr-defined]
    try:
        yield server
    finally:
        server.stop()


def client_context(server: WebhookServer) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(server.ca))  # type: ignore[attr-defined]


def raw_connection(server: WebhookServer) -> socket.socket:
    """A TCP connection that has sent nothing yet (not even a TLS ClientHello)."""
    sock = socket.create_connection(server.address, timeout=CLIENT_TIMEOUT_S)
    sock.settimeout(CLIENT_TIMEOUT_S)
    return sock


def slow_connection(server: WebhookServer) -> socket.socket:
    """A connection ready to trickle an HTTP request: TLS handshake done when HTTPS."""
    sock = raw_connection(server)
    if server.scheme == "https":
        host = server.address[0]
        return client_context(server).wrap_socket(sock, server_hostname=host)
    return sock


SLOW_REQUEST = b"POST " + MUTATE.encode() + b" HTTP/1.1\r\nHost: x\r\n" + b"X-Pad: y\r\n" * 100


@contextlib.contextmanager
def trickling(sockets: list[socket.socket], interval: float = 1.0) -> Iterator[None]:
    """Send one byte of a request on each socket every ``interval`` s until the block ends."""
    stop = threading.Event()

    def trickle() -> None:
        for position in range(len(SLOW_REQUEST)):
            for sock in sockets:
                with contextlib.suppress(OSError):  # the server may have hung up: good
                    sock.sendall(SLOW_REQUEST[position : position + 1])
            if stop.wait(interval):
                return

    thread = threading.Thread(target=trickle, name="slowloris", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(CLIENT_TIMEOUT_S)


@contextlib.contextmanager
def closing_all(sockets: list[socket.socket]) -> Iterator[list[socket.socket]]:
    try:
        yield sockets
    finally:
        for sock in sockets:
            sock.close()


def ask(server: WebhookServer, method: str, path: str, body: Any = None) -> int:
    """One request from a well-behaved client with a 5 s timeout; its HTTP status."""
    host, port = server.address
    if server.scheme == "https":
        conn: http.client.HTTPConnection = http.client.HTTPSConnection(
            host, port, timeout=CLIENT_TIMEOUT_S, context=client_context(server)
        )
    else:
        conn = http.client.HTTPConnection(host, port, timeout=CLIENT_TIMEOUT_S)
    try:
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"} if data else {}
        conn.request(method, path, body=data, headers=headers)
        reply = conn.getresponse()
        reply.read()
        return reply.status
    finally:
        conn.close()


def assert_answered_in_time(server: WebhookServer) -> None:
    """A review and a probe, each answered before the client's timeout."""
    try:
        assert ask(server, "POST", MUTATE, review(created_binding())) == 200
        assert ask(server, "GET", "/healthz") == 200
    except TimeoutError:
        pytest.fail(f"not answered within {CLIENT_TIMEOUT_S} s while slow clients are connected")


def closed_by_server(sock: socket.socket, patience: float = PATIENCE_S) -> bool:
    """Whether the server closes ``sock`` (EOF, reset, or an answer then EOF) within
    ``patience`` seconds."""
    deadline = time.monotonic() + patience
    sock.settimeout(0.2)
    while time.monotonic() < deadline:
        try:
            if sock.recv(4096) == b"":
                return True
        except TimeoutError:
            continue
        except (OSError, ssl.SSLError):
            return True
    return False


def accepted(server: WebhookServer, count: int) -> None:
    """Until the server has accepted ``count`` connections."""
    guarded = server._server  # the cheroot server behind the gate
    eventually(lambda: guarded.open_connections >= count, what=f"{count} connections accepted")


# -- answered while hostile clients are connected ------------------------------------------------


@SCHEMES
def test_answered_while_more_idle_connections_than_threads_are_open(server):
    with closing_all([raw_connection(server) for _ in range(HOSTILE)]):
        accepted(server, HOSTILE)
        assert_answered_in_time(server)


@SCHEMES
def test_answered_while_more_slowloris_clients_than_threads_trickle(server):
    slow = [slow_connection(server) for _ in range(HOSTILE)]
    with closing_all(slow), trickling(slow):
        accepted(server, HOSTILE)
        assert_answered_in_time(server)


@SCHEMES
def test_answered_while_idle_and_slowloris_clients_are_connected_together(server):
    idle = [raw_connection(server) for _ in range(HOSTILE)]
    slow = [slow_connection(server) for _ in range(HOSTILE)]
    with closing_all(idle), closing_all(slow), trickling(slow):
        accepted(server, 2 * HOSTILE)
        assert_answered_in_time(server)
        assert_answered_in_time(server)  # and again, as the slow ones keep coming


# -- slow clients are disconnected ----------------------------------------------------------------


@SCHEMES
def test_a_slowloris_client_is_disconnected_within_the_request_deadline(server):
    # trickling a byte a second, under the idle timeout: only the request deadline can cut it
    with closing_all([slow_connection(server)]) as sockets, trickling(sockets):
        assert closed_by_server(sockets[0]), "a trickling client kept past its request deadline"


@SCHEMES
def test_a_body_trickled_past_what_the_gate_buffers_is_cut_at_the_deadline(server):
    head = f"POST {MUTATE} HTTP/1.1\r\nHost: x\r\nContent-Length: {2 * BUFFERED_BODY}\r\n\r\n"
    with closing_all([slow_connection(server)]) as sockets:
        sockets[0].sendall(head.encode() + b" " * (BUFFERED_BODY + 1))  # a worker reads the rest
        with trickling(sockets):
            assert closed_by_server(sockets[0]), "a trickling body kept past the request deadline"


@SCHEMES
def test_an_idle_connection_is_closed_within_the_idle_timeout(server):
    with closing_all([raw_connection(server)]) as sockets:  # no byte: no request deadline
        assert closed_by_server(sockets[0]), "an idle connection kept past its idle timeout"


@contextlib.contextmanager
def capped_server(make_app, tmp_path: Path, scheme: str, cap: int) -> Iterator[WebhookServer]:
    tls = write_certificates(tmp_path / "tls")[:2] if scheme == "https" else None
    server = WebhookServer(
        make_app(),
        "127.0.0.1",
        0,
        threads=THREADS,
        tls=tls,
        max_connections=cap,
        request_timeout=NEVER_S,  # only the cap closes a connection in these tests
        idle_timeout=NEVER_S,
    )
    server.start()
    server.ca = tmp_path / "tls" / "ca.crt"  # type: ignore[attr-defined]
    try:
        yield server
    finally:
        server.stop()


@SCHEMES
def test_idle_connections_over_the_cap_give_way_to_new_ones(make_app, tmp_path, scheme):
    cap = 6
    with capped_server(make_app, tmp_path, scheme, cap) as server:
        with closing_all([raw_connection(server) for _ in range(cap)]) as idle:
            accepted(server, cap)
            assert_answered_in_time(server)  # on new connections: the oldest idle ones go
            oldest = closed_by_server(idle[0])
            closed = [oldest] + [closed_by_server(sock, 0.5) for sock in idle[1:]]
        assert closed[0], "the oldest idle connection was kept"
        assert closed == sorted(closed, reverse=True), "a younger idle connection went first"
        assert sum(closed) <= 2  # two new connections (the second may reuse a freed place)


@SCHEMES
def test_connections_over_the_cap_are_closed_at_once_when_none_is_idle(make_app, tmp_path, scheme):
    cap = 6
    with capped_server(make_app, tmp_path, scheme, cap) as server:
        slow = [slow_connection(server) for _ in range(cap)]
        with closing_all(slow), trickling(slow):
            eventually(lambda: heard_from(server) == cap, what="a byte from each")  # none idle
            with closing_all([raw_connection(server) for _ in range(3)]) as extra:
                for sock in extra:
                    assert closed_by_server(sock), "over the cap yet kept"
                assert server._server.refused == 3  # closed as over the cap, none let in
        eventually(lambda: server._server.open_connections < cap, what="the freed places")
        assert_answered_in_time(server)


def heard_from(server: WebhookServer) -> int:
    """The connections in the request gate that have sent a byte (never evicted as idle)."""
    waiting = list(server._server.gate._waiting.values())
    return sum(1 for w in waiting if w.deadline is not None)


# -- when a request is whole --------------------------------------------------------------------

HEAD = b"POST /x HTTP/1.1\r\nHost: x\r\n"
CHUNKED = HEAD + b"Transfer-Encoding: chunked\r\n\r\n"


@pytest.mark.parametrize(
    ("data", "whole"),
    [
        (HEAD, False),
        (HEAD + b"\r\n", True),
        (HEAD + b"Content-Length: 5\r\n\r\nabc", False),
        (HEAD + b"Content-Length: 5\r\n\r\nabcde", True),
        (HEAD + b"Content-Length: five\r\n\r\n", True),  # cheroot answers 400
        (HEAD + b"Content-Length: 999999999\r\n\r\n" + b"x" * BUFFERED_BODY, True),
        (CHUNKED + b"5\r\nhel", False),
        (CHUNKED + b"5\r\nhello\r\n0\r\n", False),
        (CHUNKED + b"5\r\nhello\r\n0\r\n\r\n", True),
        (CHUNKED + b"5\r\nhello\r\n0\r\nX-Trailer: y\r\n", False),
        (CHUNKED + b"5\r\nhello\r\n0\r\nX-Trailer: y\r\n\r\n", True),
        (CHUNKED + b"zz\r\n", True),  # malformed: cheroot refuses it
        (b"x" * (64 * 1024 + 1), True),  # a head too long: cheroot refuses it
    ],
)
def test_the_gate_passes_a_request_on_once_it_is_whole(data, whole):
    assert request_complete(data) is whole


# -- the command line ----------------------------------------------------------------------------


def test_the_command_takes_a_request_timeout_and_a_connection_cap():
    process, port, _ = start(
        [
            *("--policies", str(REPO / "policies"), "--insecure-http"),
            *("--host", "127.0.0.1", "--port", "0", "--threads", "2"),
            *("--request-timeout", "1", "--max-connections", "8"),
        ]
    )
    try:
        sock = socket.create_connection(("127.0.0.1", port), timeout=CLIENT_TIMEOUT_S)
        with closing_all([sock]), trickling([sock]):
            assert closed_by_server(sock), "a trickling client kept past --request-timeout"
    finally:
        assert stop(process) == 0


@pytest.mark.parametrize(
    ("option", "why"),
    [
        (("--request-timeout", "0"), "must be more than 0 seconds"),
        (("--request-timeout", "nan"), "must be more than 0 seconds"),
        (("--max-connections", "0"), "must be at least 1"),
    ],
)
def test_bad_limits_are_usage_errors(option, why):
    done: subprocess.CompletedProcess[str] = refused(["--insecure-http", *option])
    assert done.returncode == 2
    assert f"argument {option[0]}: {why}" in done.stderr


class _Handed:
    """A connection a worker hands back to the gate: only ``close`` matters here."""

    closed = False

    def close(self) -> None:
        self.closed = True


def test_a_connection_handed_back_after_the_gate_stopped_is_closed_not_an_error() -> None:
    """A worker finishing a kept-alive connection while the server stops hands it back to a
    gate whose wake-up socket is already closed: the connection is closed, nothing raises
    (it used to raise OSError: Bad file descriptor from the worker thread)."""
    from webhook.slowclients import RequestGate

    idle_server = type("IdleServer", (), {"timeout": 10.0, "request_timeout": 1.0})()
    gate = RequestGate(server=idle_server)  # type: ignore[arg-type]  # no connection ever comes
    gate.start()
    gate.stop(timeout=5.0)
    handed = _Handed()
    gate.add(handed)  # type: ignore[arg-type]
    assert handed.closed
    gate.stop(timeout=1.0)  # stopping twice is harmless too
