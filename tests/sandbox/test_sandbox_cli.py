"""``fleetgate sandbox`` as a user runs it: a process serving HTTPS, its kubeconfig read by kubectl,
faults injected with ``fleetgate sandbox fault``, a clean exit on Ctrl-C."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fleetgate.cli import build_parser
from tests.conftest import REPO, require_tool

PATIENCE_S = 60.0  # a bound on starting the command and on each wait: it stops a hang
FLEETGATE = [sys.executable, "-m", "fleetgate"]


def start(kubeconfig: Path, *options: str) -> tuple[subprocess.Popen, list[str]]:
    """``fleetgate sandbox`` on a free port, once it has announced itself."""
    process = subprocess.Popen(
        [*FLEETGATE, "sandbox", "--port", "0", "--kubeconfig-out", str(kubeconfig), *options],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + PATIENCE_S
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        lines.append(line)
        if line.startswith("  stop:"):  # the last line of the announcement
            return process, lines
    process.kill()
    _, errors = process.communicate(timeout=PATIENCE_S)
    pytest.fail("the sandbox did not start:\n" + "".join(lines) + errors)


def kubectl(kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [require_tool("kubectl"), "--kubeconfig", str(kubeconfig), *args],
        capture_output=True,
        text=True,
        timeout=PATIENCE_S,
        check=False,
    )


def fault(kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*FLEETGATE, "sandbox", "fault", "--kubeconfig", str(kubeconfig), *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=PATIENCE_S,
        check=False,
    )


def test_the_sandbox_command_serves_kubectl_and_stops_on_ctrl_c(tmp_path):
    require_tool("kubectl")
    kubeconfig = tmp_path / "kubeconfig"
    process, lines = start(kubeconfig)
    try:
        text = "".join(lines)
        assert text.startswith("fleetgate sandbox: serving https://127.0.0.1:")
        assert str(kubeconfig) in text
        assert oct(kubeconfig.stat().st_mode & 0o777) == "0o600"

        listed = kubectl(kubeconfig, "get", "namespaces")
        assert listed.returncode == 0, listed.stderr
        assert {"default", "kube-system", "kube-public"} <= {
            line.split()[0] for line in listed.stdout.splitlines()[1:]
        }

        injected = fault(kubeconfig, "error", "500", "--path", "/namespaces$", "--count", "1")
        assert injected.returncode == 0, injected.stderr
        assert '"id": "error-1"' in injected.stdout
        refused = kubectl(kubeconfig, "get", "namespaces")
        assert refused.returncode == 1
        assert "injected fault error-1: 500 InternalError" in refused.stderr
        assert kubectl(kubeconfig, "get", "namespaces").returncode == 0  # count used up

        down = fault(kubeconfig, "cluster-down", "gpu-east", "--unreachable")
        assert down.returncode == 0, down.stderr
        assert '"Unreachable"' in fault(kubeconfig, "list").stdout
        bad = fault(kubeconfig, "fail-job", "no-namespace")
        assert (bad.returncode, "expected NAMESPACE/NAME" in bad.stderr) == (1, True)

        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=PATIENCE_S) == 0
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate(timeout=PATIENCE_S)


def test_a_fault_without_a_running_sandbox_fails_with_a_message(tmp_path):
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: c, cluster: {server: 'http://127.0.0.1:9'}}]\n"
        "users: [{name: c, user: {}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: c}}]\n"
    )
    done = fault(kubeconfig, "list")
    assert done.returncode == 1
    assert "cannot reach the sandbox at http://127.0.0.1:9" in done.stderr


def test_the_parser_knows_the_sandbox_options():
    args = build_parser().parse_args(
        ["sandbox", "--port", "0", "--speed", "60", "--insecure-http", "--fleet", "f.yaml"]
    )
    assert (args.port, args.speed, args.insecure_http, args.fleet) == (
        0,
        60.0,
        True,
        Path("f.yaml"),
    )
    with pytest.raises(SystemExit):
        build_parser().parse_args(["sandbox", "--speed", "0"])
    fault_args = build_parser().parse_args(["sandbox", "fault", "latency", "0.5", "--count", "3"])
    assert (fault_args.fault, fault_args.seconds, fault_args.count) == ("latency", 0.5, 3)
