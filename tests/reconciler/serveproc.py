"""``fleetgate serve`` as a child process, for the serve, kill and two-replica tests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

from tests.conftest import REPO
from tests.waiting import eventually_value

ELECTION = ("--lease-duration", "3", "--renew-deadline", "2", "--retry-period", "0.5")


class ServeProcess:
    """One ``fleetgate serve`` (``python -m reconciler.cli``) on 127.0.0.1, its stdout read on
    a thread (the API URL is announced there), its stderr in ``log``."""

    def __init__(self, kubeconfig: Path, identity: str, log: Path, *extra: str) -> None:
        self.identity = identity
        self.log = log
        self.lines: list[str] = []
        self.api_url = ""
        self._announced = threading.Event()
        command = [
            sys.executable,
            "-m",
            "reconciler.cli",
            "--kubeconfig",
            str(kubeconfig),
            "--policies",
            str(REPO / "policies"),
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--tls-host",
            "127.0.0.1",
            "--identity",
            identity,
            "--lease-namespace",
            "kube-system",
            *extra,
        ]
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        with log.open("ab") as err:
            self.process = subprocess.Popen(
                command, cwd=REPO, stdout=subprocess.PIPE, stderr=err, env=env, text=True
            )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip())
            if line.strip().startswith("api: "):
                self.api_url = line.split("api: ", 1)[1].strip()
                self._announced.set()

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Until /readyz answers 200 (policies loaded, informers synced)."""
        deadline = time.monotonic() + timeout
        if not self._announced.wait(timeout):
            raise AssertionError(f"serve {self.identity} did not start:\n{self.stderr()}")
        while time.monotonic() < deadline:
            if self.get("/readyz")[0] == 200:
                return
            if self.process.poll() is not None:
                break
            time.sleep(0.1)
        raise AssertionError(f"serve {self.identity} not ready:\n{self.stderr()}")

    def address(self, what: str, timeout: float = 30.0) -> str:
        """The URL serve prints for ``what`` (``webhook``, ``visibility``). Serve prints its
        addresses at once after the api line ``wait_ready`` waits for; the reader appends them
        in turn, so this one may come a moment later."""

        def printed() -> str | None:
            lines = [x.strip() for x in self.lines]
            return next((x.split(": ", 1)[1] for x in lines if x.startswith(f"{what}: ")), None)

        return eventually_value(printed, timeout, f"serve {self.identity}'s {what} address")

    def get(self, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(self.api_url + path, timeout=5) as answer:
                return answer.status, answer.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode()
        except OSError as error:
            return 0, str(error)

    def signal(self, signum: int) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signum)

    def wait(self, timeout: float) -> int:
        return self.process.wait(timeout)

    def stop(self) -> None:
        """Make sure the process is gone (SIGKILL if it is still running)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)
        self._reader.join(5)

    def stderr(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]
