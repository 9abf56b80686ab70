"""The soak's traffic (``benchmarks/soak.py``): what the threads share (``Run``), keep-alive
clients of good and garbage requests, slowloris and idle connections, policy rewrites, and the
samples of the webhook's RSS and policy metrics."""

from __future__ import annotations

import collections
import http.client
import re
import select
import socket
import ssl
import threading
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.soak_requests import MUTATE, garbage

CLIENT_TIMEOUT_S = 10.0  # the karmada-apiserver's default timeoutSeconds
MAX_SLOW = 32  # slowloris and idle connections, each


@dataclass
class Run:
    """Where the threads send (``port``, ``context``), when they stop, and what they record:
    under one lock, added in one batch when each thread ends."""

    port: int
    context: ssl.SSLContext
    stop: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    good: dict[str, list[float]] = field(default_factory=lambda: collections.defaultdict(list))
    good_failures: collections.Counter = field(default_factory=collections.Counter)
    garbage: collections.Counter = field(default_factory=collections.Counter)
    garbage_max_s: float = 0.0
    slow: collections.Counter = field(default_factory=collections.Counter)
    rewrites: collections.Counter = field(default_factory=collections.Counter)


class Connection:
    """One keep-alive HTTPS connection that reopens itself after an error or a close."""

    def __init__(self, run: Run) -> None:
        self._open = lambda: http.client.HTTPSConnection(
            "127.0.0.1", run.port, timeout=CLIENT_TIMEOUT_S, context=run.context
        )
        self.conn = self._open()

    def call(self, method: str, path: str, body: bytes) -> tuple[int, bytes]:
        """(status, body); status 0 for a connection error or timeout."""
        headers = {"Content-Type": "application/json"} if method == "POST" else {}
        try:
            self.conn.request(method, path, body if method == "POST" else None, headers)
            reply = self.conn.getresponse()
            data = reply.read()
            if reply.will_close:
                self.conn.close()
            return reply.status, data
        except (OSError, http.client.HTTPException):
            self.conn.close()
            self.conn = self._open()
            return 0, b""

    def close(self) -> None:
        self.conn.close()


def good_client(
    run: Run, bodies: list[tuple[str, bytes]], kind: Callable[[str], str], pause: float = 0.0
) -> None:
    conn = Connection(run)
    mine: dict[str, list[float]] = collections.defaultdict(list)
    failures: collections.Counter = collections.Counter()
    i = 0
    try:
        while not run.stop.is_set():
            path, body = bodies[i % len(bodies)]
            i += 1
            started = time.perf_counter()
            status, data = conn.call("POST", path, body)
            elapsed = time.perf_counter() - started
            name = kind(path)
            mine[name].append(elapsed)
            if status != 200 or b'"allowed"' not in data:
                failures[f"{name} {status}"] += 1
            if pause:
                run.stop.wait(pause)
    finally:
        conn.close()
        with run.lock:
            for name, times in mine.items():
                run.good[name].extend(times)
            run.good_failures.update(failures)


def garbage_client(run: Run, pause: float) -> None:
    conn = Connection(run)
    seen: collections.Counter = collections.Counter()
    worst = 0.0
    requests = garbage()
    try:
        while not run.stop.is_set():
            for kind, method, path, body in requests:
                if run.stop.is_set():
                    break
                started = time.perf_counter()
                status, data = conn.call(method, path, body)
                worst = max(worst, time.perf_counter() - started)
                seen[(kind, _outcome(status, data))] += 1
                run.stop.wait(pause)
    finally:
        conn.close()
        with run.lock:
            run.garbage.update(seen)
            run.garbage_max_s = max(run.garbage_max_s, worst)


def _outcome(status: int, data: bytes) -> str:
    """The status, and for a 200 whether the AdmissionReview allowed (a denial is a refusal)."""
    if status == 200:
        return "200 allowed" if b'"allowed":true' in data else "200 denied"
    return str(status)


def slow_clients(run: Run, slowloris: int, idle: int) -> None:
    """``slowloris`` TLS connections that send a byte a second, ``idle`` that send nothing."""
    request = f"POST {MUTATE} HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n".encode()
    open_: dict[socket.socket, tuple[str, int]] = {}  # socket → (kind, bytes sent)

    def connect(kind: str) -> None:
        try:
            raw = socket.create_connection(("127.0.0.1", run.port), timeout=2)
            sock = (
                run.context.wrap_socket(raw, server_hostname="127.0.0.1") if kind == "slow" else raw
            )
            sock.settimeout(2)
            open_[sock] = (kind, 0)
            results_local[f"{kind} opened"] += 1
        except (OSError, ssl.SSLError):
            results_local[f"{kind} connect failed"] += 1

    results_local: collections.Counter = collections.Counter()
    try:
        for _ in range(min(slowloris, MAX_SLOW)):
            connect("slow")
        for _ in range(min(idle, MAX_SLOW)):
            connect("idle")
        while not run.stop.wait(1.0):
            for sock, (kind, sent) in list(open_.items()):
                closed = False
                try:
                    if kind == "slow":
                        sock.send(request[sent % len(request) : sent % len(request) + 1])
                        open_[sock] = (kind, sent + 1)
                    readable, _, _ = select.select([sock], [], [], 0)
                    if readable and not sock.recv(4096):
                        closed = True
                except (OSError, ssl.SSLError):
                    closed = True
                if closed:
                    results_local[f"{kind} dropped by server"] += 1
                    with suppress(OSError):
                        sock.close()
                    del open_[sock]
                    connect(kind)
    finally:
        for sock in open_:
            with suppress(OSError):
                sock.close()
        with run.lock:
            run.slow.update(results_local)


RELOAD_PATIENCE_S = 60.0  # how long a rewrite may wait to be read before the soak goes on


def rewriter(run: Run, policy_dir: Path, every: float) -> None:
    """admission.yaml: an invalid change, a valid one, the original; every ``every`` seconds,
    each once the webhook has read the one before (loaded or refused it), so that every
    rewrite counted was one the webhook saw, however busy the machine."""
    target = policy_dir / "admission.yaml"
    original = target.read_text()
    valid = original.replace("<= 64.0", "<= 96.0").replace("the fleet has 64", "the limit is 96")
    invalid = original.replace("<= 64.0", "<= 64.0 &&")  # a CEL syntax error
    steps = (("invalid", invalid), ("valid", valid), ("original", original))
    conn = Connection(run)
    i = 0
    try:
        while not run.stop.wait(every):
            name, text = steps[i % len(steps)]
            before = reads(conn)
            target.write_text(text)
            with run.lock:
                run.rewrites[name] += 1
            i += 1
            deadline = time.monotonic() + RELOAD_PATIENCE_S
            while reads(conn) == before and time.monotonic() < deadline:
                time.sleep(0.05)
    finally:
        target.write_text(original)
        conn.close()


def reads(conn: Connection) -> float:
    """The policy loads the webhook has made, successful or not."""
    values = metric_values(conn)
    return values.get("fleetgate_policy_reloads_total", 0.0) + values.get(
        "fleetgate_policy_reload_failures_total", 0.0
    )


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def metric_values(conn: Connection) -> dict[str, float]:
    status, data = conn.call("GET", "/metrics", b"")
    found = re.findall(r"^(fleetgate_policy_\w+?)(?:\{[^}]*\})? (\S+)$", data.decode(), re.M)
    return {name: float(value) for name, value in found} if status == 200 else {}
