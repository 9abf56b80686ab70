"""Secrets and ServiceAccount tokens as kube-apiserver and the token controller treat them
(sandbox.secrets): stringData merged into data, data that must be base64, an immutable type,
the required keys of kubernetes.io/tls, and a service-account-token Secret filled in and
authenticating as its ServiceAccount, by RBAC, while the Secret and the account exist."""

from __future__ import annotations

import base64
from pathlib import Path

import kubernetes
import pytest
from kubernetes.client.exceptions import ApiException

from sandbox.server import Sandbox

NS = "default"


def _create(core: kubernetes.client.CoreV1Api, body: dict) -> kubernetes.client.V1Secret:
    return core.create_namespaced_secret(NS, {"apiVersion": "v1", "kind": "Secret", **body})


def test_string_data_is_merged_into_data_and_never_stored(core, sandbox: Sandbox) -> None:
    made = _create(
        core,
        {
            "metadata": {"name": "s"},
            "data": {"a": base64.b64encode(b"old").decode(), "b": "Yg=="},
            "stringData": {"a": "new"},
        },
    )
    assert made.type == "Opaque"
    assert base64.b64decode(made.data["a"]) == b"new" and made.data["b"] == "Yg=="
    assert "stringData" not in sandbox.store.get("secrets", "s", namespace=NS)


def test_data_that_is_not_base64_is_a_bad_request(core) -> None:
    with pytest.raises(ApiException) as caught:
        _create(core, {"metadata": {"name": "s"}, "data": {"k": "not base64!"}})
    assert caught.value.status == 400 and "illegal base64 data" in caught.value.body


def test_the_type_cannot_change_and_tls_needs_its_keys(core) -> None:
    _create(core, {"metadata": {"name": "s"}, "data": {"k": "dg=="}})
    with pytest.raises(ApiException) as caught:
        core.patch_namespaced_secret("s", NS, {"type": "kubernetes.io/tls"})
    assert caught.value.status == 422 and "field is immutable" in caught.value.body
    with pytest.raises(ApiException) as caught:
        _create(core, {"metadata": {"name": "t"}, "type": "kubernetes.io/tls", "data": {}})
    assert caught.value.status == 422 and "data[tls.crt]" in caught.value.body


def test_a_service_account_token_is_filled_in_and_authenticates_by_rbac(
    core, sandbox: Sandbox, tmp_path: Path
) -> None:
    core.create_namespaced_service_account(NS, {"metadata": {"name": "robot"}})
    annotation = {"kubernetes.io/service-account.name": "robot"}
    token_type = "kubernetes.io/service-account-token"
    made = _create(
        core, {"metadata": {"name": "robot-token", "annotations": annotation}, "type": token_type}
    )
    token = base64.b64decode(made.data["token"]).decode()
    assert base64.b64decode(made.data["namespace"]) == NS.encode()
    assert base64.b64decode(made.data["ca.crt"]) == sandbox.ca_pem
    account = core.read_namespaced_service_account("robot", NS)
    assert made.metadata.annotations["kubernetes.io/service-account.uid"] == account.metadata.uid

    robot = kubernetes.client.CoreV1Api(_client(sandbox, tmp_path, token))
    with pytest.raises(ApiException) as caught:
        robot.list_namespaced_config_map(NS)
    assert caught.value.status == 403
    assert "system:serviceaccount:default:robot" in caught.value.body
    rbac = kubernetes.client.RbacAuthorizationV1Api(core.api_client)
    rule = {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}
    rbac.create_namespaced_role(NS, {"metadata": {"name": "cm"}, "rules": [rule]})
    subject = {"kind": "ServiceAccount", "name": "robot", "namespace": NS}
    role_ref = {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "cm"}
    rbac.create_namespaced_role_binding(
        NS, {"metadata": {"name": "cm"}, "roleRef": role_ref, "subjects": [subject]}
    )
    assert robot.list_namespaced_config_map(NS).items is not None

    core.delete_namespaced_secret("robot-token", NS)  # the token goes with its Secret
    with pytest.raises(ApiException) as caught:
        robot.list_namespaced_config_map(NS)
    assert caught.value.status == 401


def test_a_token_secret_needs_its_account_annotation(core) -> None:
    with pytest.raises(ApiException) as caught:
        _create(core, {"metadata": {"name": "x"}, "type": "kubernetes.io/service-account-token"})
    assert caught.value.status == 422
    assert "kubernetes.io/service-account.name" in caught.value.body


def _client(sandbox: Sandbox, tmp_path: Path, token: str) -> kubernetes.client.ApiClient:
    path = sandbox.write_kubeconfig(tmp_path / "robot.kubeconfig", token=token)
    configuration = kubernetes.client.Configuration()
    kubernetes.config.load_kube_config(config_file=str(path), client_configuration=configuration)
    return kubernetes.client.ApiClient(configuration)
