"""The sandbox's webhook client keeps connections alive between admission calls, as
kube-apiserver does, and makes a call once more on a new connection when the server closed the
kept one (``sandbox.webhookcall``)."""

from __future__ import annotations

import base64
import contextlib
import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from sandbox import tls
from sandbox.webhookcall import Service, TLSContexts, post_review
from tests.sandbox.test_webhooks import fleetgate_webhook
from tests.webhook.helpers import created_binding, review


class _Counting(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int]) -> None:
        super().__init__(address, _Reviewer)
        self.lock = threading.Lock()
        self.connections = 0  # accepted
        self.requests = 0  # received, answered or not
        self.drop = set[int]()  # requests (numbered from 1) that get no answer: the socket closes
        self.close_after = set[int]()  # requests after whose answer the server closes, unasked


class _Reviewer(BaseHTTPRequestHandler):
    """Answers every AdmissionReview with ``allowed: true``; one instance per connection."""

    protocol_version = "HTTP/1.1"
    server: _Counting

    def setup(self) -> None:
        super().setup()
        with self.server.lock:
            self.server.connections += 1

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        with self.server.lock:
            self.server.requests += 1
            number = self.server.requests
        if number in self.server.drop:
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        uid = json.loads(body)["request"]["uid"]
        answer = {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "response": {"uid": uid, "allowed": True},
        }
        data = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()
        if number in self.server.close_after:
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextlib.contextmanager
def counting_webhook() -> Iterator[tuple[_Counting, str, str]]:
    """A tiny HTTPS webhook on 127.0.0.1: yields (server, URL, caBundle)."""
    certificate = tls.generate()
    server = _Counting(("127.0.0.1", 0))
    server.socket = certificate.server_context().wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        host, port = server.server_address[:2]
        ca_bundle = base64.b64encode(certificate.ca_pem).decode()
        yield server, f"https://{host}:{port}/validate?timeout=10s", ca_bundle
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def call(url: str, contexts: TLSContexts, ca_bundle: str, uid: str) -> dict[str, Any]:
    sent = review(created_binding(), uid=uid)
    return post_review(url, sent, 10.0, contexts, ca_bundle)


def test_two_admission_calls_share_one_connection():
    contexts = TLSContexts()
    with counting_webhook() as (server, url, ca_bundle):
        try:
            assert call(url, contexts, ca_bundle, "first")["allowed"] is True
            assert call(url, contexts, ca_bundle, "second")["allowed"] is True
        finally:
            contexts.connections.close()
    assert (server.connections, server.requests) == (1, 2)


def test_a_kept_connection_the_server_dropped_is_retried_once_on_a_new_one():
    contexts = TLSContexts()
    with counting_webhook() as (server, url, ca_bundle):
        server.drop.add(2)  # the second call's request, on the kept connection: no answer
        try:
            call(url, contexts, ca_bundle, "first")
            assert call(url, contexts, ca_bundle, "second")["uid"] == "second"
        finally:
            contexts.connections.close()
    assert (server.connections, server.requests) == (2, 3)


def test_a_kept_connection_the_server_closed_while_idle_is_not_used():
    contexts = TLSContexts()
    with counting_webhook() as (server, url, ca_bundle):
        server.close_after.add(1)
        try:
            for uid in ("first", "second", "third"):
                assert call(url, contexts, ca_bundle, uid)["uid"] == uid
        finally:
            contexts.connections.close()
    # no request was sent on the closed one; the third call used the second's connection
    assert (server.connections, server.requests) == (2, 3)


def test_fleetgates_webhook_keeps_the_connection_alive(tmp_path: Path):
    contexts = TLSContexts()
    with fleetgate_webhook(tmp_path / "tls") as (base_url, ca_bundle):
        url = f"{base_url}/mutate/resourcebindings?timeout=10s"
        service = Service("https", "127.0.0.1", int(base_url.rsplit(":", 1)[1]), ca_bundle)
        ports = []
        try:
            for uid in ("first", "second"):
                assert call(url, contexts, ca_bundle, uid)["allowed"] is True
                kept = contexts.connections.take(service)
                assert kept is not None and kept.sock is not None
                ports.append(kept.sock.getsockname()[1])
                contexts.connections.give(service, kept)
        finally:
            contexts.connections.close()
    assert ports[0] == ports[1]
