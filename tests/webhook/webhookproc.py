"""``fleetgate webhook`` as a child process (``python -m webhook``), over HTTPS on 127.0.0.1
as deploy/deployment.yaml runs it, for the tests that need the real command."""

from __future__ import annotations

import os
import re
import signal
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from email.message import Message
from pathlib import Path

from tests.conftest import REPO
from tests.webhook.helpers import write_certificates

PATIENCE_S = 60.0  # a bound on starting, on each request and on stopping: it stops a hang


class WebhookProcess:
    """The command on the example policies with a fresh certificate under ``directory``;
    ``url`` once it serves. Its stderr (the log) is kept in ``lines``."""

    def __init__(self, directory: Path, env: Mapping[str, str] | None = None) -> None:
        cert, key, ca, _ = write_certificates(directory)
        self.context = ssl.create_default_context(cafile=str(ca))
        command = [sys.executable, "-m", "webhook", "--policies", str(REPO / "policies")]
        command += ["--tls-cert", str(cert), "--tls-key", str(key)]
        command += ["--host", "127.0.0.1", "--port", "0", "--threads", "2"]
        self.process = subprocess.Popen(
            command,
            cwd=REPO,
            stderr=subprocess.PIPE,
            text=True,
            env={**(env if env is not None else os.environ), "PYTHONUNBUFFERED": "1"},
        )
        self.lines: list[str] = []
        self.url = self._wait_serving()
        threading.Thread(target=self._read, daemon=True).start()  # the log never blocks it

    def _wait_serving(self) -> str:
        assert self.process.stderr is not None
        deadline = time.monotonic() + PATIENCE_S
        while time.monotonic() < deadline:
            line = self.process.stderr.readline()
            self.lines.append(line)
            if found := re.search(r"serving (https://127\.0\.0\.1:\d+)", line):
                return found.group(1)
            if not line and self.process.poll() is not None:
                break
        self.process.kill()
        self.process.wait(PATIENCE_S)
        raise AssertionError("fleetgate webhook did not start:\n" + "".join(self.lines))

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.append(line)

    def get(self, path: str) -> tuple[int, Message, str]:
        """Status, headers and body of ``GET path``."""
        request = urllib.request.Request(self.url + path)
        try:
            with urllib.request.urlopen(request, timeout=PATIENCE_S, context=self.context) as r:
                return r.status, r.headers, r.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.headers, error.read().decode()

    def stop(self) -> int:
        """SIGTERM, then its exit status (SIGKILL if it outlives the bound)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(PATIENCE_S)
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait(PATIENCE_S)
