"""The webhook under soak (``benchmarks/soak.py``): ``fleetgate webhook`` over TLS on a free
port, with a private copy of policies/ plus a CEL-heavy AdmissionPolicy that allows."""

from __future__ import annotations

import re
import shutil
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.webhook.helpers import write_certificates

REPO = Path(__file__).resolve().parent.parent

# Heavy but realistic, and under the static CEL cost limit: every component's every request
# checked against the job's total, every label and annotation key and value checked.
HEAVY_POLICY = """\
apiVersion: fleetgate.io/v1alpha1
kind: AdmissionPolicy
metadata:
  name: soak-cel-heavy
spec:
  description: Soak test, CEL-heavy; allows every well-formed job.
  enforcement: Deny
  validations:
    - expression: >-
        job.components.all(c, c.replicas >= 0 && c.requests.all(r, r.size() <= 317
        && c.requests[r] >= 0.0 && job.total[r] >= c.requests[r]))
        && job.labels.all(k, k.size() <= 317 && job.labels[k].size() <= 63)
        && job.annotations.all(k, k.size() <= 317)
      message: a request or label is out of range
"""


@contextmanager
def webhook(workdir: Path, threads: int) -> Iterator[tuple[subprocess.Popen, int, Any, Path, list]]:
    """A running ``fleetgate webhook``: (process, port, client TLS context, policy dir, log)."""
    policy_dir = workdir / "policies"
    shutil.copytree(REPO / "policies", policy_dir, ignore=shutil.ignore_patterns("kustom*"))
    (policy_dir / "soak-heavy.yaml").write_text(HEAVY_POLICY)
    cert, key, ca, _ = write_certificates(workdir / "tls")
    fleetgate = Path(sys.executable).parent / "fleetgate"
    command = (
        [str(fleetgate), "webhook"] if fleetgate.exists() else [sys.executable, "-m", "webhook"]
    )
    command += [
        "--policies", str(policy_dir), "--host", "127.0.0.1", "--port", "0",
        "--tls-cert", str(cert), "--tls-key", str(key), "--threads", str(threads),
        "--fleet", str(REPO / "examples" / "fleet-snapshot.yaml"),
        "--policy-reload-interval", "1", "--log-level", "WARNING",
    ]  # fmt: skip
    command[-1] = "INFO"  # for the line that says where it listens; then only counted
    process = subprocess.Popen(command, cwd=REPO, stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    log: list[str] = []
    try:
        port = _wait_for_port(process, log)
        threading.Thread(target=_collect, args=(process.stderr, log), daemon=True).start()
        yield process, port, ssl.create_default_context(cafile=str(ca)), policy_dir, log
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)


def _wait_for_port(process: subprocess.Popen, log: list[str]) -> int:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        line = process.stderr.readline()  # type: ignore[union-attr]
        log.append(line)
        if found := re.search(r"serving https://127\.0\.0\.1:(\d+)", line):
            return int(found.group(1))
        if not line and process.poll() is not None:
            break
    raise SystemExit("the webhook did not start:\n" + "".join(log[-20:]))


def _collect(stream: Any, log: list[str]) -> None:
    for line in stream:
        if len(log) < 10_000:
            log.append(line)
