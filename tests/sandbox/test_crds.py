"""The sandbox serves the Karmada CRDs it validates with as apiextensions.k8s.io/v1
CustomResourceDefinitions, established as the apiextensions-apiserver leaves them: read
through the kubernetes client, and only those of its CRD directory."""

from __future__ import annotations

import shutil
from pathlib import Path

import kubernetes
import pytest

from sandbox.schema import crd_directory, load_schemas
from sandbox.server import Sandbox
from sandbox.store import Store
from tests.conftest import missing

BINDINGS = "resourcebindings.work.karmada.io"


@pytest.fixture
def crds() -> Path:
    directory = crd_directory()
    if not (directory / "work.karmada.io_resourcebindings.yaml").is_file():
        missing(f"the Karmada CRDs are not at {directory} (FLEETGATE_KARMADA_CRDS)")
    return directory


def _served(sandbox: Sandbox, tmp_path: Path) -> list[dict]:
    configuration = kubernetes.client.Configuration()
    kubernetes.config.load_kube_config(
        config_file=str(sandbox.write_kubeconfig(tmp_path / "kubeconfig")),
        client_configuration=configuration,
    )
    with kubernetes.client.ApiClient(configuration) as api:
        found = kubernetes.client.ApiextensionsV1Api(api).list_custom_resource_definition()
        return [api.sanitize_for_serialization(item) for item in found.items]


def test_the_karmada_crds_are_served_established(crds: Path, tmp_path: Path) -> None:
    with Sandbox(Store(schemas=load_schemas(crds))) as sandbox:
        served = {crd["metadata"]["name"]: crd for crd in _served(sandbox, tmp_path)}
    assert {
        BINDINGS,
        "clusterresourcebindings.work.karmada.io",
        "propagationpolicies.policy.karmada.io",
        "clusterpropagationpolicies.policy.karmada.io",
    } <= set(served)
    bindings = served[BINDINGS]
    assert bindings["spec"]["names"]["kind"] == "ResourceBinding"
    versions = {v["name"]: v for v in bindings["spec"]["versions"]}
    assert versions["v1alpha2"]["storage"] is True
    assert (
        "suspension"
        in (versions["v1alpha2"]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"])
    )
    status = bindings["status"]
    assert status["acceptedNames"] == bindings["spec"]["names"]
    assert status["storedVersions"] == ["v1alpha2"]
    conditions = {c["type"]: c for c in status["conditions"]}
    assert conditions["Established"]["status"] == "True"
    assert conditions["Established"]["reason"] == "InitialNamesAccepted"
    assert conditions["NamesAccepted"]["reason"] == "NoConflicts"


def test_a_directory_without_a_crd_is_a_server_without_it(crds: Path, tmp_path: Path) -> None:
    partial = tmp_path / "crds"
    shutil.copytree(crds, partial)
    (partial / "work.karmada.io_resourcebindings.yaml").unlink()
    with Sandbox(Store(schemas=load_schemas(partial))) as sandbox:
        names = {crd["metadata"]["name"] for crd in _served(sandbox, tmp_path)}
    assert BINDINGS not in names
    assert "clusterresourcebindings.work.karmada.io" in names


def test_a_restart_keeps_the_crds_as_they_are(crds: Path) -> None:
    store = Store(schemas=load_schemas(crds))
    with Sandbox(store) as sandbox:
        key = "customresourcedefinitions.apiextensions.k8s.io"
        before = store.get(key, BINDINGS)["metadata"]["resourceVersion"]
        sandbox.restart(store)
        assert store.get(key, BINDINGS)["metadata"]["resourceVersion"] == before


def test_without_a_crd_directory_there_are_none(tmp_path: Path) -> None:
    with Sandbox(Store(schemas=load_schemas(tmp_path / "absent"))) as sandbox:
        assert _served(sandbox, tmp_path) == []
