"""Health probes are answered at once while every worker thread evaluates costly CEL (issue 16,
item 2: "/healthz answers within 100 ms while CEL-heavy requests run").

A real server on 127.0.0.1 with 2 worker threads and an AdmissionPolicy that is slow but
admitted (a quadratic check over the job's labels, loaded with high CEL limits, about a second
per request). Four such requests are sent at once, and each worker, its CEL evaluated, holds its
answer until the probes are done, so both workers are busy and two requests wait for one;
``/healthz`` and ``/readyz`` must still answer 200 before any heavy request is answered: the
request gate answers them itself, without a worker. Nothing is timed (the probes' latency is
printed; ``make bench-webhook`` measures it), so a busy machine cannot fail the test.

Every socket has a timeout and is closed; every wait has a deadline.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from flask import Flask, request

from engine.policy.celcost import CelLimits
from engine.policy.policyset import load_policy_set
from engine.policy.reload import PolicyHolder
from tests.hostile.test_cel_cost import admission_policy, pytorch_job
from tests.waiting import PATIENCE_S, eventually
from tests.webhook.helpers import review
from webhook.app import VERSION_HEADER
from webhook.serve import WebhookServer

VALIDATE = "/validate/workloads"
THREADS = 2
HEAVY_REQUESTS = 2 * THREADS
LABELS = 120  # 120² label comparisons: about a second of CEL per request
QUADRATIC_LABELS = "job.labels.all(k, job.labels.exists(j, j == k))"
PROBE_TIMEOUT_S = PATIENCE_S  # a bound against a hang: the probes' speed is not asserted
HEAVY_TIMEOUT_S = 120.0
HIGH = CelLimits(cost_limit=10**15, budget=10**15)  # admitted, and never out of budget


class Held:
    """Workers that have answered a heavy request hold the answer until ``release`` is set."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.holding = 0
        self._lock = threading.Lock()

    def hold(self, response: Any) -> Any:
        if request.path == VALIDATE:
            with self._lock:
                self.holding += 1
            self.release.wait(HEAVY_TIMEOUT_S)
        return response


@pytest.fixture
def held() -> Iterator[Held]:
    workers = Held()
    yield workers
    workers.release.set()


@pytest.fixture
def slow_app(policy_dir: Path, make_app: Callable[..., Flask], held: Held) -> Flask:
    (policy_dir / "costly.yaml").write_text(admission_policy(QUADRATIC_LABELS, "Ignore"))
    live = PolicyHolder(lambda: load_policy_set([policy_dir], cel_limits=HIGH))
    assert live.reload(), live.status.errors
    app = make_app(live)
    app.after_request(held.hold)
    return app


@pytest.fixture
def switch_interval() -> Iterator[None]:
    """The GIL hand-off interval ``fleetgate webhook`` sets (1 ms, ``webhook.cli``): every
    thread on the way of a probe (accept, gate, client) waits up to it for the GIL held by a
    worker evaluating CEL; at Python's default of 5 ms a probe took 100-300 ms here."""
    default = sys.getswitchinterval()
    sys.setswitchinterval(0.001)
    try:
        yield
    finally:
        sys.setswitchinterval(default)


@pytest.fixture
def server(slow_app: Flask, switch_interval: None) -> Iterator[WebhookServer]:
    server = WebhookServer(slow_app, "127.0.0.1", 0, threads=THREADS, request_timeout=5.0)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def get(server: WebhookServer, path: str, timeout: float = PROBE_TIMEOUT_S) -> tuple[Any, bytes]:
    conn = http.client.HTTPConnection(*server.address, timeout=timeout)
    try:
        conn.request("GET", path)
        reply = conn.getresponse()
        return reply, reply.read()
    finally:
        conn.close()


@contextlib.contextmanager
def heavy_requests(server: WebhookServer) -> Iterator[list[int]]:
    """``HEAVY_REQUESTS`` costly admission requests in flight; yields the list of their
    statuses, filled in as they are answered."""
    body = json.dumps(review(pytorch_job(LABELS), operation="CREATE")).encode()
    statuses: list[int] = []

    def send() -> None:
        conn = http.client.HTTPConnection(*server.address, timeout=HEAVY_TIMEOUT_S)
        try:
            conn.request("POST", VALIDATE, body, {"Content-Type": "application/json"})
            reply = conn.getresponse()
            reply.read()
            statuses.append(reply.status)
        finally:
            conn.close()

    threads = [threading.Thread(target=send, daemon=True) for _ in range(HEAVY_REQUESTS)]
    for thread in threads:
        thread.start()
    try:
        yield statuses
    finally:
        for thread in threads:
            thread.join(HEAVY_TIMEOUT_S)
    assert statuses == [200] * HEAVY_REQUESTS


def ask_healthz(server: WebhookServer) -> bool:
    reply, body = get(server, "/healthz")
    return (reply.status, body) == (200, b"ok\n")


def probe_latencies(server: WebhookServer, path: str, times: int) -> list[float]:
    latencies = []
    for _ in range(times):
        started = time.monotonic()
        try:
            reply, _ = get(server, path)
        except TimeoutError:
            pytest.fail(f"{path} not answered within {PROBE_TIMEOUT_S} s while CEL runs")
        assert reply.status == 200
        latencies.append(time.monotonic() - started)
    return latencies


def test_probes_are_answered_while_every_worker_is_taken_by_costly_cel(server, held: Held):
    with heavy_requests(server) as answered:
        eventually(lambda: held.holding == THREADS, what="both workers taken")
        healthz = probe_latencies(server, "/healthz", 5)
        readyz = probe_latencies(server, "/readyz", 5)
        print(f"\n/healthz under load: max {max(healthz) * 1000:.1f} ms; "
              f"/readyz: max {max(readyz) * 1000:.1f} ms")  # fmt: skip
        assert answered == [], "a heavy request was answered before the probes"
        assert held.holding == THREADS  # the other two still wait for a worker
        held.release.set()


# -- the gate's answers are the app's ------------------------------------------------------------


def raw_exchange(server: WebhookServer, request: bytes) -> bytes:
    """Send raw bytes on one connection, the last request with ``Connection: close``; what
    comes back until the server closes it."""
    sock = socket.create_connection(server.address, timeout=5.0)
    try:
        sock.sendall(request)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
        return data
    finally:
        sock.close()


@pytest.mark.parametrize("path", ["/healthz", "/readyz", "/readyz?verbose=1"])
def test_the_gate_answers_as_the_app_would(server, slow_app: Flask, path: str):
    expected = slow_app.test_client().get(path)
    reply, body = get(server, path, timeout=5.0)
    assert (reply.status, body) == (expected.status_code, expected.data)
    assert reply.getheader("Content-Type") == expected.headers["Content-Type"]
    assert reply.getheader("Content-Length") == str(len(expected.data))
    assert reply.getheader(VERSION_HEADER) == expected.headers.get(VERSION_HEADER)


def test_a_kept_alive_connection_goes_on_after_a_probe(server):
    conn = http.client.HTTPConnection(*server.address, timeout=5.0)
    try:
        for path in ("/healthz", "/readyz", "/healthz", "/metrics"):
            conn.request("GET", path)
            reply = conn.getresponse()
            reply.read()
            assert reply.status == 200, path
    finally:
        conn.close()


def test_pipelined_requests_and_connection_close(server):
    data = raw_exchange(
        server,
        b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
        b"HEAD /readyz HTTP/1.1\r\nHost: x\r\n\r\n"
        b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"  # a worker's, with the rest after it
        b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    )
    assert data.count(b"HTTP/1.1 200 OK\r\n") == 4, data
    assert data.count(b"\r\n\r\nok\n") == 2  # HEAD has no body
    assert b"fleetgate_policy_ready 1.0" in data
    assert b"Connection: close\r\n" in data.rsplit(b"HTTP/1.1", 1)[1]


def test_probes_by_other_methods_still_go_to_the_app(server):
    reply = raw_exchange(
        server,
        b"POST /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    )
    assert reply.startswith(b"HTTP/1.1 405 ")


def test_a_flood_of_pipelined_probes_is_cut_off(server):
    data = raw_exchange(server, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n" * 10_000)
    assert 0 < data.count(b"HTTP/1.1 200 OK\r\n") < 10_000
    assert ask_healthz(server)
