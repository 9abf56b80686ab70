"""A watch client that goes away mid-stream ends its watch quietly: a debug line, no 500, no
traceback (``sandbox.http``'s watch writer)."""

from __future__ import annotations

import logging
import socket
import ssl
import struct
import time
from urllib.parse import urlsplit

import pytest

from sandbox.server import Sandbox

GONE = "watch client went away"


def test_a_client_gone_before_the_last_write_ends_the_watch_quietly(
    sandbox: Sandbox, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
):
    caplog.set_level(logging.DEBUG, logger="fleetgate.sandbox")
    url = urlsplit(sandbox.url)
    assert sandbox.ca_pem is not None and url.hostname and url.port
    context = ssl.create_default_context(cadata=sandbox.ca_pem.decode())
    raw = socket.create_connection((url.hostname, url.port), timeout=5)
    client = context.wrap_socket(raw, server_hostname=url.hostname)
    # no object matches: the server's first write after the headers is the final chunk, due
    # when timeoutSeconds has passed
    client.sendall(
        b"GET /api/v1/namespaces/default/configmaps?watch=1&timeoutSeconds=1"
        b"&fieldSelector=metadata.name%3Dnone HTTP/1.1\r\n"
        + f"Host: {url.netloc}\r\nAuthorization: Bearer {sandbox.token}\r\n\r\n".encode()
    )
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = client.recv(4096)
        assert chunk, head
        head += chunk
    assert head.startswith(b"HTTP/1.1 200"), head
    client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    client.close()  # a reset: the server's next write fails

    give_up = time.monotonic() + 15
    while GONE not in caplog.text and "failed" not in caplog.text and time.monotonic() < give_up:
        time.sleep(0.05)
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert GONE in caplog.text
    assert "Traceback" not in capfd.readouterr().err
