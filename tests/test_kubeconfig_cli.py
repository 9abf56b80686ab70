"""``fleetgate kubeconfig``: a kubeconfig for a ServiceAccount from its token Secret, that
authenticates as the account; clear errors when there is no such Secret or a bad argument."""

from __future__ import annotations

from pathlib import Path

import kubernetes
import yaml

from fleetgate.cli import main
from fleetgate.kubeconfigcli import make
from sandbox.server import Sandbox
from tests.sandbox.conftest import running_sandbox

TOKEN = "kubernetes.io/service-account-token"


def _account(sandbox: Sandbox, name: str) -> None:
    sandbox.store.create("serviceaccounts", {"metadata": {"name": name, "namespace": "default"}})
    secret = {
        "metadata": {
            "name": f"{name}-token",
            "namespace": "default",
            "annotations": {"kubernetes.io/service-account.name": name},
        },
        "type": TOKEN,
    }
    sandbox.store.create("secrets", secret)


def test_the_kubeconfig_authenticates_as_the_service_account(tmp_path: Path) -> None:
    with running_sandbox() as sandbox:
        _account(sandbox, "robot")
        admin = sandbox.write_kubeconfig(tmp_path / "admin")
        text = make(str(admin), None, "default", "robot", "https://elsewhere.invalid:5443")
        config = yaml.safe_load(text)
        assert config["clusters"][0]["cluster"]["server"] == "https://elsewhere.invalid:5443"
        # the same file with the sandbox's address: it is the robot that calls
        text = make(str(admin), None, "default", "robot", sandbox.url)
        (tmp_path / "robot").write_text(text)
        configuration = kubernetes.client.Configuration()
        kubernetes.config.load_kube_config(
            config_file=str(tmp_path / "robot"), client_configuration=configuration
        )
        with kubernetes.client.ApiClient(configuration) as api:
            review = kubernetes.client.AuthenticationV1Api(api).create_self_subject_review(
                {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
            )
        assert review.status.user_info.username == "system:serviceaccount:default:robot"


def test_no_token_secret_is_a_clear_error(tmp_path: Path, capsys, monkeypatch) -> None:
    with running_sandbox() as sandbox:
        admin = sandbox.write_kubeconfig(tmp_path / "admin")
        args = ["kubeconfig", "--kubeconfig", str(admin), "--service-account", "default/nobody"]
        monkeypatch.setattr("fleetgate.kubeconfigcli.WAIT", 0.0)
        assert main(args) == 1
    said = capsys.readouterr().err
    assert "no filled kubernetes.io/service-account-token Secret" in said
    assert "default/nobody" in said and "dist/fleetgate-karmada.yaml" in said
    assert main(["kubeconfig", "--service-account", "nobody"]) == 2
    assert "NAMESPACE/NAME" in capsys.readouterr().err
