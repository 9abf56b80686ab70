"""``fleetgate dashboard``'s server: its files, and only the reads its page makes, forwarded to
the API server (the sandbox's, without the visibility API here) as the kubeconfig's user."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from flask.testing import FlaskClient

from fleetgate.dashboardserver import DASHBOARD, create_dashboard_app
from fleetgate.liveapi import PREFIX, Live
from tests.conftest import REPO
from tests.sandbox.conftest import sandbox
from tests.waiting import eventually_value

__all__ = ["sandbox"]  # a fixture used by name

LOCAL = {"Host": "127.0.0.1:8765"}


@pytest.fixture
def client(kubeconfig: Path) -> Iterator[FlaskClient]:
    config = yaml.safe_load(kubeconfig.read_text())
    config["contexts"][0]["context"]["namespace"] = "research"
    kubeconfig.write_text(yaml.safe_dump(config))
    live = Live(str(kubeconfig), None)
    app = create_dashboard_app(live)
    app.config["fleetgate.port"] = 8765
    try:
        yield app.test_client()
    finally:
        live.close()


def test_the_page_and_its_files_are_served_with_a_policy_that_keeps_it_local(client) -> None:
    assert client.get("/", headers=LOCAL).headers["Location"].endswith(DASHBOARD)
    page = client.get(DASHBOARD, headers=LOCAL)
    assert page.status_code == 200 and page.mimetype == "text/html"
    policy = page.headers["Content-Security-Policy"]
    assert "connect-src 'self'" in policy and "default-src 'none'" in policy
    script = client.get(f"{DASHBOARD}app.js", headers=LOCAL)
    assert script.status_code == 200 and script.mimetype == "text/javascript"
    assert client.get(f"{DASHBOARD}config.json", headers=LOCAL).json["namespace"] == "research"
    assert client.get(f"{DASHBOARD}__init__.py", headers=LOCAL).status_code == 404


def test_only_the_pages_reads_are_forwarded_as_the_user(client) -> None:
    events = client.get("/api/v1/namespaces/research/events", headers=LOCAL)
    assert events.status_code == 200 and events.json["kind"] == "EventList"
    # the API server's own answer, passed on: this one serves no visibility API
    assert client.get(f"{PREFIX}/queues", headers=LOCAL).status_code == 404
    for path in (
        "/api/v1/namespaces/research/secrets",
        "/api/v1/namespaces/Not_A_Name/events",
        "/apis/cluster.karmada.io/v1alpha1/clusters",
        f"{PREFIX}/../../../api/v1/namespaces/research/secrets",
        f"{PREFIX}/%2e%2e/%2e%2e/%2e%2e/api/v1/namespaces/research/secrets",
    ):
        answer = client.get(path, headers=LOCAL)
        assert answer.status_code in (400, 404) and answer.json["kind"] == "Status", path
        assert "SecretList" not in answer.get_data(as_text=True)
    refused = client.post(f"{PREFIX}/queues", headers=LOCAL)
    assert refused.status_code == 405 and refused.json["reason"] == "MethodNotAllowed"


@pytest.mark.parametrize("host", ["evil.example:8765", "127.0.0.1:9999", "localhost.evil:8765"])
def test_a_request_naming_another_host_is_refused(client, host: str) -> None:
    answer = client.get(f"{PREFIX}/queues", headers={"Host": host})
    assert answer.status_code == 403 and "127.0.0.1 only" in answer.json["message"]


def test_fleetgate_dashboard_says_its_address_and_stops_on_sigterm(
    kubeconfig: Path, tmp_path: Path
) -> None:
    command = [sys.executable, "-m", "fleetgate", "dashboard", "--kubeconfig", str(kubeconfig),
               "--port", "0"]  # fmt: skip
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    errors = tmp_path / "stderr"  # a file, not a pipe nobody reads: a full pipe would block it
    with errors.open("w") as stderr:
        process = subprocess.Popen(
            command, cwd=REPO, stdout=subprocess.PIPE, stderr=stderr, text=True, env=env
        )
    try:
        assert process.stdout is not None
        line = eventually_value(lambda: process.stdout.readline() or None, 60)
        assert line.startswith("dashboard: http://127.0.0.1:"), line
        process.send_signal(signal.SIGTERM)
        try:
            code = process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"not stopped on SIGTERM:\n{errors.read_text()}") from None
        assert code == 0, errors.read_text()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)


def test_a_kubeconfig_that_cannot_be_read_is_one_line(tmp_path: Path) -> None:
    broken = tmp_path / "kubeconfig"
    broken.write_text("not: [a kubeconfig")
    done = subprocess.run(
        [sys.executable, "-m", "fleetgate", "dashboard", "--kubeconfig", str(broken)],
        cwd=REPO, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.startswith("fleetgate: cannot read the kubeconfig:")
