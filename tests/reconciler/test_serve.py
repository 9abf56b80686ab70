"""``fleetgate serve`` as a child process against the sandbox (fleetgate's webhook registered,
Karmada's controllers in this process): it admits a job, and SIGTERM stops it with exit
status 0 after releasing its Lease."""

from __future__ import annotations

import json
import signal
import ssl
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import kubernetes
import pytest

from sandbox.karmada import KarmadaControllers
from sandbox.server import Sandbox
from sandbox.writelog import WriteLog
from tests.conftest import REPO
from tests.reconciler.conftest import time_limit
from tests.reconciler.serveproc import ELECTION, ServeProcess
from tests.reconciler.test_loop import binding, clock, custom, eventually, fleet_world, submit
from tests.webhook.helpers import write_certificates

__all__ = ["clock", "custom", "fleet_world"]  # fixtures used by name

RB_KEY = "resourcebindings.work.karmada.io"
LEASES = ("fleetgate-reconciler", "kube-system")
SERVE = (sys.executable, "-m", "reconciler.cli", "--policies", str(REPO / "policies"))


@pytest.fixture(autouse=True)
def bounded() -> Iterator[None]:
    with time_limit(90):
        yield


@pytest.fixture
def writes(sandbox: Sandbox) -> WriteLog:
    return WriteLog().attach(sandbox)


def lease(api: kubernetes.client.ApiClient) -> dict:
    read = kubernetes.client.CoordinationV1Api(api).read_namespaced_lease(
        *LEASES, _preload_content=False
    )
    return json.loads(read.data)["spec"]


def test_serve_admits_a_job_and_stops_cleanly_on_sigterm(
    api_client, kubeconfig: Path, custom, fleet_world: KarmadaControllers, writes, tmp_path
):
    served = ServeProcess(kubeconfig, "replica-1", tmp_path / "serve.log", *ELECTION)
    try:
        served.wait_ready()
        eventually(lambda: served.get("/leader")[1].startswith("leader"), 20)
        assert lease(api_client)["holderIdentity"] == "replica-1"

        submit(custom, "first", workers=2)
        fleet_world.run_once()  # the detector makes the (suspended) binding
        eventually(lambda: bool(binding(custom, "first")["spec"].get("clusters")), 30)
        users = {w.user for w in writes.entries(RB_KEY) if w.name == "first-pytorchjob"}
        assert "fleetgate-reconciler/replica-1" in users

        served.signal(signal.SIGTERM)
        assert served.wait(30) == 0, served.stderr()
        assert not lease(api_client).get("holderIdentity")  # released
        assert "stopped" in served.stderr()
    finally:
        served.stop()


def test_serve_runs_the_webhook_in_process(kubeconfig: Path, tmp_path, sandbox: Sandbox):
    cert, key, ca_file, _ = write_certificates(tmp_path / "tls")
    served = ServeProcess(
        kubeconfig,
        "replica-w",
        tmp_path / "serve.log",
        "--no-leader-elect",
        "--webhook-port",
        "0",
        "--tls-cert",
        str(cert),
        "--tls-key",
        str(key),
    )
    try:
        served.wait_ready()
        url = served.address("webhook")
        context = ssl.create_default_context(cafile=str(ca_file))
        context.check_hostname = False
        with urllib.request.urlopen(url + "/readyz", timeout=5, context=context) as answer:
            assert answer.status == 200
            assert "policy version" in answer.read().decode()
        assert served.get("/leader")[1].startswith("leader election off")
        served.signal(signal.SIGINT)
        assert served.wait(30) == 0, served.stderr()
    finally:
        served.stop()


def test_serve_refuses_an_unreadable_kubeconfig_naming_it(tmp_path):
    missing = tmp_path / "nope.kubeconfig"
    done = subprocess.run(
        [*SERVE, "--kubeconfig", str(missing), "--port", "0", "--host", "127.0.0.1"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1, done.stderr
    assert str(missing) in done.stderr


def test_webhook_port_without_a_certificate_is_a_usage_error(tmp_path):
    done = subprocess.run(
        [*SERVE, "--kubeconfig", str(tmp_path / "k"), "--webhook-port", "0"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "--tls-cert and --tls-key" in done.stderr
