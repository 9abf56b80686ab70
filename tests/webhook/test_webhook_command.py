"""``fleetgate webhook`` (run here as ``python -m webhook``): start, serve, reload, stop.

Also the ConfigMap volume layout: each file exists twice (a symlink and the real file in a hidden
timestamped directory) and an update swaps the ``..data`` symlink; the command polls the files,
and ``stat`` follows the symlinks to the new copies.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.policy.policyset import load_policy_set
from engine.policy.reload import PolicyHolder
from engine.policy.source import policy_files
from tests.conftest import REPO
from tests.sandbox.conftest import api_client, kubeconfig, sandbox
from tests.webhook.helpers import created_binding, review, write_certificates
from webhook.poll import Poller, fingerprint

__all__ = ["api_client", "kubeconfig", "sandbox"]  # fixtures used by name

PATIENCE_S = 60.0  # a bound on starting the command and on each wait: it stops a hang


def configmap_volume(root: Path, source: Path, stamp: str) -> Path:
    """Lay out ``source``'s files the way the kubelet mounts a ConfigMap; swap if it exists."""
    root.mkdir(exist_ok=True)
    version = root / f"..{stamp}"
    version.mkdir()
    for file in sorted(source.glob("*.yaml")):
        shutil.copyfile(file, version / file.name)
    staging = root / "..data_tmp"
    staging.symlink_to(version.name)
    staging.replace(root / "..data")  # the atomic swap
    for file in sorted(source.glob("*.yaml")):
        link = root / file.name
        if not link.is_symlink():
            link.symlink_to(Path("..data") / file.name)
    return root


def watched_files(directory: Path) -> list[Path]:
    """The files whose fingerprint the command polls."""
    return policy_files([directory])[0]


def test_a_configmap_volume_loads_like_the_plain_directory(tmp_path):
    volume = configmap_volume(tmp_path / "policies", REPO / "policies", "2025_03_10_09_00_00.1")
    paths = watched_files(volume)
    assert paths == [volume / name for name in ("admission.yaml", "queues.yaml", "scheduling.yaml")]
    assert load_policy_set([volume]).digest == load_policy_set([REPO / "policies"]).digest


def test_a_configmap_update_is_reloaded(tmp_path):
    source = tmp_path / "source"
    shutil.copytree(REPO / "policies", source)
    volume = configmap_volume(tmp_path / "policies", source, "2025_03_10_09_00_00.1")
    holder = PolicyHolder(lambda: load_policy_set([volume]))
    assert holder.reload(), holder.status.errors
    first = holder.current.version
    poller = Poller(lambda: fingerprint(watched_files(volume)), holder.reload, 60, "test")
    assert not poller.check()
    queues = source / "queues.yaml"
    queues.write_text(queues.read_text().replace("  weight: 2\n", "  weight: 3\n"))
    configmap_volume(volume, source, "2025_03_10_09_05_00.2")
    assert poller.check()
    assert holder.current.version != first
    assert holder.status.healthy
    assert not poller.check()  # nothing changed since


def test_a_bad_policy_edit_is_reported_once_and_retried_when_the_files_change(tmp_path):
    live = tmp_path / "policies"
    shutil.copytree(REPO / "policies", live)
    holder = PolicyHolder(lambda: load_policy_set([live]))
    assert holder.reload()
    poller = Poller(lambda: fingerprint(watched_files(live)), holder.reload, 60, "test")
    queues = live / "queues.yaml"
    good = queues.read_text()
    queues.write_text(good.replace("  weight: 2\n", "  weight: -2\n"))
    assert poller.check()
    assert not poller.check()
    assert holder.status.failures == 1
    queues.write_text(good.replace("  weight: 2\n", "  weight: 4\n"))
    assert poller.check()
    assert holder.status.healthy


def test_the_command_reloads_edited_policies(tmp_path):
    live = tmp_path / "policies"
    shutil.copytree(REPO / "policies", live)
    process, port, _ = start(
        [
            "--policies",
            str(live),
            "--insecure-http",
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--policy-reload-interval",
            "0.05",
        ]
    )
    try:
        first = readyz_version(port)
        queues = live / "queues.yaml"
        queues.write_text(queues.read_text().replace("  weight: 2\n", "  weight: 3\n"))
        deadline = time.monotonic() + PATIENCE_S
        while readyz_version(port) == first:
            assert time.monotonic() < deadline, "the edit was not reloaded"
            time.sleep(0.05)
    finally:
        assert stop(process) == 0


def readyz_version(port: int) -> str:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=PATIENCE_S)
    conn.request("GET", "/readyz")
    reply = conn.getresponse()
    reply.read()
    conn.close()
    return reply.headers["X-Fleetgate-Policy-Version"]


def start(args: list[str]) -> tuple[subprocess.Popen, int, str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "webhook", *args],
        cwd=REPO,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    deadline = time.monotonic() + PATIENCE_S
    assert process.stderr is not None
    lines = []
    while time.monotonic() < deadline:
        line = process.stderr.readline()
        lines.append(line)
        if found := re.search(r"serving https?://127\.0\.0\.1:(\d+)", line):
            return process, int(found.group(1)), "".join(lines)
        if not line and process.poll() is not None:
            break
    process.kill()
    pytest.fail("the webhook did not start:\n" + "".join(lines))


def stop(process: subprocess.Popen) -> int:
    process.send_signal(signal.SIGTERM)
    try:
        return process.wait(timeout=PATIENCE_S)
    finally:
        if process.poll() is None:
            process.kill()


def test_the_command_serves_https_and_stops_cleanly_on_sigterm(tmp_path):
    cert, key, ca, _ = write_certificates(tmp_path / "tls")
    process, port, _ = start(
        [
            "--policies",
            str(REPO / "policies"),
            "--tls-cert",
            str(cert),
            "--tls-key",
            str(key),
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--threads",
            "4",
            "--revision",
            "abc1234",
            "--fleet",
            str(REPO / "examples" / "fleet-snapshot.yaml"),
        ]
    )
    try:
        context = ssl.create_default_context(cafile=str(ca))
        conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=PATIENCE_S, context=context)
        conn.request("POST", "/mutate/resourcebindings", json.dumps(review(created_binding())))
        reply = conn.getresponse()
        answer = json.loads(reply.read())
        assert reply.status == 200
        assert answer["response"]["auditAnnotations"]["policy-version"].endswith("@abc1234")
        conn.close()
    finally:
        assert stop(process) == 0


def test_plain_http_is_logged_loudly(tmp_path):
    process, port, log = start(
        [
            "--policies",
            str(REPO / "policies"),
            "--insecure-http",
            "--host",
            "127.0.0.1",
            "--port",
            "0",
        ]
    )
    assert "INSECURE: --insecure-http serves admission reviews over plain HTTP" in log
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=PATIENCE_S)
        conn.request("GET", "/readyz")
        assert conn.getresponse().status == 200
        conn.close()
    finally:
        assert stop(process) == 0


def test_usage_errors_exit_2():
    done = subprocess.run(
        [sys.executable, "-m", "webhook", "--policies", str(REPO / "policies")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=PATIENCE_S,
    )
    assert done.returncode == 2
    assert "--tls-cert and --tls-key (or --tls-secret) are required" in done.stderr


def test_a_port_in_use_exits_1(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "webhook",
                "--policies",
                str(REPO / "policies"),
                "--insecure-http",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
            ],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=PATIENCE_S,
        )
    assert done.returncode == 1
    assert "cannot start" in done.stderr


def refused(args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "webhook", "--policies", str(REPO / "policies"), *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=PATIENCE_S,
    )


def test_a_fleet_snapshot_that_cannot_be_read_refuses_to_start(tmp_path):
    missing = tmp_path / "nope.yaml"
    done = refused(["--insecure-http", "--port", "0", "--fleet", str(missing)])
    assert done.returncode == 1
    assert f"{missing}: no such file or directory" in done.stderr
    assert "cannot start" in done.stderr
    assert "serving" not in done.stderr


def test_a_fleet_snapshot_with_malformed_objects_only_warns(tmp_path):
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(
        (REPO / "examples" / "fleet-snapshot.yaml").read_text()
        + "---\napiVersion: cluster.karmada.io/v1alpha1\nkind: Cluster\n"
        "metadata: {name: odd}\nspec: {taints: oops}\n"
    )
    process, _, log = start(
        [
            *("--policies", str(REPO / "policies"), "--insecure-http"),
            *("--host", "127.0.0.1", "--port", "0", "--fleet", str(fleet)),
        ]
    )
    try:
        assert f"fleet snapshot: {fleet}: Cluster/odd: spec.taints: " in log
    finally:
        assert stop(process) == 0


@pytest.mark.parametrize("bad", ["cert", "key"])
def test_a_missing_certificate_or_key_is_named(bad, tmp_path):
    cert, key, _, _ = write_certificates(tmp_path / "tls")
    missing = tmp_path / f"no-{bad}.pem"
    files = {"cert": cert, "key": key, bad: missing}
    done = refused(
        ["--tls-cert", str(files["cert"]), "--tls-key", str(files["key"]), "--port", "0"]
    )
    assert done.returncode == 1
    what = {"cert": "certificate", "key": "key"}[bad]
    assert f"cannot start: {what} {missing}: no such file or directory" in done.stderr


def test_a_certificate_that_does_not_load_names_both_files(tmp_path):
    cert, key, _, _ = write_certificates(tmp_path / "tls")
    cert.write_text("not a certificate\n")
    done = refused(["--tls-cert", str(cert), "--tls-key", str(key), "--port", "0"])
    assert done.returncode == 1
    assert f"cannot start: certificate {cert} and key {key} do not load as a PEM" in done.stderr


def test_with_a_kubeconfig_the_command_denies_a_queue_the_namespace_may_not_use(
    tmp_path, sandbox, api_client, kubeconfig
):
    # catches: the standalone webhook letting any namespace into any queue (issue 29, item 1):
    # it watches Namespaces on the API server of --kubeconfig and denies as the cycle rejects
    import kubernetes

    from tests.webhook.test_validate import pytorchjob

    core = kubernetes.client.CoreV1Api(api_client)
    for name in ("scratch", "research"):
        core.create_namespace({"metadata": {"name": name}})
    process, port, _ = start(
        ["--policies", str(REPO / "policies"), "--insecure-http", "--host", "127.0.0.1",
         "--port", "0", "--kubeconfig", str(kubeconfig)]
    )  # fmt: skip
    try:
        answers = {}
        for namespace in ("scratch", "research"):
            job = pytorchjob()  # research-training, by its label
            job["metadata"]["namespace"] = namespace
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=PATIENCE_S)
            conn.request("POST", "/validate/workloads", json.dumps(review(job)))
            answers[namespace] = json.loads(conn.getresponse().read())["response"]
            conn.close()
    finally:
        assert stop(process) == 0
    assert answers["research"]["allowed"] is True
    assert answers["scratch"]["allowed"] is False
    assert (
        "namespace scratch may not use queue research-training"
        in (answers["scratch"]["status"]["message"])
    )
