"""``fleetgate sandbox --token-auth-file``: tenants with their own tokens, authorized by RBAC;
``--front-proxy-ca-out``: the CA an aggregated server trusts the front proxy by."""

from __future__ import annotations

import base64
import json
import signal
import subprocess

import yaml

from sandbox.kubeconfig import write_kubeconfig
from tests.conftest import REPO, require_tool
from tests.sandbox.test_sandbox_cli import FLEETGATE, PATIENCE_S, kubectl, start


def test_token_file_users_are_authenticated_and_authorized_by_rbac(tmp_path):
    require_tool("kubectl")
    tokens = tmp_path / "tokens.csv"
    tokens.write_text('alice-token,alice,1001,"team-a,readers"\n')
    admin, ca_out = tmp_path / "kubeconfig", tmp_path / "front-proxy-ca.crt"
    process, _ = start(admin, "--token-auth-file", str(tokens), "--front-proxy-ca-out", str(ca_out))
    try:
        config = yaml.safe_load(admin.read_text())
        cluster = config["clusters"][0]["cluster"]
        ca = base64.b64decode(cluster["certificate-authority-data"])
        alice = write_kubeconfig(tmp_path / "alice", cluster["server"], ca, "alice-token")

        whoami = kubectl(alice, "auth", "whoami", "-o", "json")
        assert whoami.returncode == 0, whoami.stderr
        assert json.loads(whoami.stdout)["status"]["userInfo"]["groups"] == [
            "team-a",
            "readers",
            "system:authenticated",
        ]
        refused = kubectl(alice, "get", "configmaps", "-n", "default")
        assert refused.returncode == 1
        assert 'User "alice" cannot list resource "configmaps"' in refused.stderr
        granted = kubectl(
            admin, "create", "rolebinding", "readers", "--clusterrole", "cluster-admin",
            "--group", "readers", "-n", "default",
        )  # fmt: skip
        assert granted.returncode == 0, granted.stderr
        assert kubectl(alice, "get", "configmaps", "-n", "default").returncode == 0

        published = kubectl(
            admin, "get", "configmap", "extension-apiserver-authentication", "-n", "kube-system",
            "-o", "jsonpath={.data.requestheader-client-ca-file}",
        )  # fmt: skip
        assert published.stdout == ca_out.read_text()
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=PATIENCE_S) == 0
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate(timeout=PATIENCE_S)


def test_a_token_file_kube_apiserver_would_refuse_stops_the_command(tmp_path):
    tokens = tmp_path / "tokens.csv"
    tokens.write_text("alice-token,alice\n")
    done = subprocess.run(
        [*FLEETGATE, "sandbox", "--port", "0", "--token-auth-file", str(tokens)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=PATIENCE_S,
        check=False,
    )
    assert done.returncode == 1
    assert "must have at least 3 columns" in done.stderr
