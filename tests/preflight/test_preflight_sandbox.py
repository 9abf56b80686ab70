"""Issue 33, done when: ``fleetgate preflight`` against the sandbox passes, and against a sandbox
missing a CRD or a permission fails naming it.

The sandbox plays an installed karmada-apiserver: the Karmada CRDs, the reconciler's RBAC of
deploy/karmada-apiserver/ (its ServiceAccount's token as the kubeconfig),
fleetgate's webhook running and registered with deploy/karmada-apiserver's configurations, and
member clusters serving every job kind.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import shutil
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import yaml

from engine.members.model import MemberCluster
from engine.members.spec import ClusterSpec, NodeGroup
from engine.members.status import cluster_object
from engine.workloads.registry import known_kinds
from fleetgate.cli import main
from fleetgate.kubeconfigcli import make
from sandbox.schema import crd_directory, load_schemas
from sandbox.server import Sandbox
from sandbox.store import Store
from tests.conftest import REPO, missing
from tests.sandbox.test_webhooks import fleetgate_webhook, register

DEPLOY = REPO / "deploy" / "karmada-apiserver"
# the karmada-apiserver's part of the release but the webhook configurations (registered with
# the test's webhook URL where a test wants them): namespace, identities, RBAC, APIService
RBAC = ("reconciler-rbac.yaml", "webhook-rbac.yaml", "visibility.yaml")
RECONCILER = ("fleetgate-system", "fleetgate-reconciler")
NOW = dt.datetime(2026, 5, 1, tzinfo=dt.UTC)
EVERY_KIND = tuple(known_kinds())


@pytest.fixture(scope="module")
def crds() -> Path:
    directory = crd_directory()
    if not (directory / "work.karmada.io_resourcebindings.yaml").is_file():
        missing(f"the Karmada CRDs are not at {directory} (FLEETGATE_KARMADA_CRDS)")
    return directory


@contextlib.contextmanager
def karmada(crds: Path) -> Iterator[Sandbox]:
    """The sandbox with the CRDs of ``crds`` and fleetgate's RBAC applied."""
    with Sandbox(Store(schemas=load_schemas(crds))) as sandbox:
        for name in RBAC:
            for document in yaml.safe_load_all((DEPLOY / name).read_text()):
                kind = sandbox.store.resource_for(document["apiVersion"], document["kind"])
                sandbox.store.create(kind, document)
        yield sandbox


def join(sandbox: Sandbox, name: str, kinds: tuple[tuple[str, str], ...] = EVERY_KIND) -> None:
    """A Ready member cluster serving ``kinds`` (and the built-in kinds), as Karmada lists it."""
    spec = ClusterSpec(
        name, kinds=kinds, nodes=(NodeGroup.of(2, {"cpu": 32, "memory": 128 * 2**30}),)
    )
    cluster = cluster_object(MemberCluster(spec, NOW), NOW)
    stored = sandbox.store.create("clusters.cluster.karmada.io", cluster)
    stored["status"] = cluster["status"]
    sandbox.store.update_status("clusters.cluster.karmada.io", stored)


def reconciler_kubeconfig(sandbox: Sandbox, tmp_path: Path) -> Path:
    admin = sandbox.write_kubeconfig(tmp_path / "admin.kubeconfig")
    path = tmp_path / "reconciler.kubeconfig"
    path.write_text(make(str(admin), None, *RECONCILER, sandbox.url, wait=0.0))
    return path


@contextlib.contextmanager
def webhook_registered(sandbox: Sandbox, tmp_path: Path) -> Iterator[None]:
    """fleetgate's webhook on 127.0.0.1, registered with the shipped configurations."""
    admin = sandbox.write_kubeconfig(tmp_path / "register.kubeconfig")
    configuration = kubernetes.client.Configuration()
    kubernetes.config.load_kube_config(str(admin), client_configuration=configuration)
    with fleetgate_webhook(tmp_path / "tls") as (url, ca_bundle):
        with kubernetes.client.ApiClient(configuration) as api:
            register(api, url, ca_bundle)
        yield


def preflight(
    kubeconfig: Path, capsys: pytest.CaptureFixture[str], *extra: str
) -> tuple[int, dict]:
    code = main(["preflight", "--kubeconfig", str(kubeconfig), "-o", "json", *extra])
    return code, json.loads(capsys.readouterr().out)


def rows(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {check["name"]: check for check in report["checks"]}


def test_an_installed_control_plane_passes_every_check(crds, tmp_path, capsys) -> None:
    with karmada(crds) as sandbox, webhook_registered(sandbox, tmp_path):
        join(sandbox, "gpu-east")
        join(sandbox, "gpu-west")
        admin = sandbox.write_kubeconfig(tmp_path / "admin.kubeconfig")
        code, report = preflight(
            admin, capsys, "--policies", str(REPO / "policies"),
            "--service-account", "/".join(RECONCILER),
        )  # fmt: skip
    found = rows(report)
    assert {n: c["detail"] for n, c in found.items() if c["status"] != "ok"} == {}
    assert code == 0 and report["passed"] is True
    assert {name: c["status"] for name, c in found.items() if c["status"] != "ok"} == {}
    assert found["rbac for fleetgate serve"]["detail"].startswith(
        "system:serviceaccount:fleetgate-system:fleetgate-reconciler has all"
    )
    assert "came back held" in found["webhook holds bindings"]["detail"]
    assert found["kind PyTorchJob (kubeflow.org/v1)"]["detail"] == "served by gpu-east, gpu-west"
    assert "failurePolicy Fail" in found["mutating webhook"]["detail"]


def test_the_reconcilers_own_token_passes(crds, tmp_path, capsys) -> None:
    """Its RBAC is all serve needs; what it may not read (CRDs, the webhook's objects) is a
    warning, checked by discovery where it can be."""
    with karmada(crds) as sandbox, webhook_registered(sandbox, tmp_path):
        join(sandbox, "gpu-east")
        code, report = preflight(reconciler_kubeconfig(sandbox, tmp_path), capsys)
    found = rows(report)
    assert code == 0, report
    assert found["rbac for fleetgate serve"]["status"] == "ok"
    assert (
        "system:serviceaccount:fleetgate-system:fleetgate-reconciler has all"
        in (found["rbac for fleetgate serve"]["detail"])
    )
    bindings = found["crd resourcebindings.work.karmada.io"]
    assert bindings["status"] == "warn" and "served (discovery)" in bindings["detail"]
    assert found["namespace fleetgate-system"]["status"] == "ok"
    assert found["mutating webhook"]["status"] == "warn"


def test_a_missing_crd_fails_naming_it(crds, tmp_path, capsys) -> None:
    partial = tmp_path / "crds"
    shutil.copytree(crds, partial)
    (partial / "work.karmada.io_resourcebindings.yaml").unlink()
    with karmada(partial) as sandbox:
        admin = sandbox.write_kubeconfig(tmp_path / "admin.kubeconfig")
        code = main(["preflight", "--kubeconfig", str(admin)])
    out = capsys.readouterr().out
    table = {line.split()[0] + " " + line.split()[1]: line.split()[2:] for line in
             out.splitlines() if line.startswith("crd ")}  # fmt: skip
    assert code == 1
    assert table["crd resourcebindings.work.karmada.io"] == ["fail", "not", "installed"]
    assert table["crd clusterresourcebindings.work.karmada.io"][0] == "ok"
    assert "  fail  crd resourcebindings.work.karmada.io: install Karmada's CRDs" in out
    assert out.splitlines()[-1] == "preflight failed: 7 ok, 3 warn, 1 fail, 3 skip"


def test_a_missing_permission_fails_naming_it(crds, tmp_path, capsys) -> None:
    with karmada(crds) as sandbox:
        role = sandbox.store.get("clusterroles.rbac.authorization.k8s.io", RECONCILER[1])
        for rule in role["rules"]:
            if "resourcebindings/status" in rule["resources"]:
                rule["resources"].remove("resourcebindings/status")
        sandbox.store.update("clusterroles.rbac.authorization.k8s.io", role)
        code, report = preflight(reconciler_kubeconfig(sandbox, tmp_path), capsys)
    check = rows(report)["rbac for fleetgate serve"]
    assert code == 1 and check["status"] == "fail"
    assert "lacks 1 permission of" in check["detail"]
    assert check["detail"].endswith(": patch resourcebindings.work.karmada.io/status")
    assert "ClusterRole and Role fleetgate-reconciler" in check["fix"]


def test_a_webhook_that_does_not_answer_fails(crds, tmp_path, capsys) -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    with karmada(crds) as sandbox:
        admin = sandbox.write_kubeconfig(tmp_path / "admin.kubeconfig")
        configuration = kubernetes.client.Configuration()
        kubernetes.config.load_kube_config(str(admin), client_configuration=configuration)
        with kubernetes.client.ApiClient(configuration) as api:
            register(api, f"https://127.0.0.1:{port}", "")
        code, report = preflight(admin, capsys)
    found = rows(report)
    assert code == 1
    probe = found["webhook holds bindings"]
    assert probe["status"] == "fail" and "was refused" in probe["detail"]
    assert "failed calling webhook" in probe["detail"]
    assert "no caBundle" in found["mutating webhook"]["detail"]


def test_a_kind_no_member_serves_fails_and_one_some_lack_warns(crds, tmp_path, capsys) -> None:
    pytorch = ("kubeflow.org/v1", "PyTorchJob")
    with karmada(crds) as sandbox:
        join(sandbox, "gpu-east", (pytorch,))
        join(sandbox, "cpu-spot", ())
        admin = sandbox.write_kubeconfig(tmp_path / "admin.kubeconfig")
        code, report = preflight(admin, capsys)
    found = rows(report)
    assert code == 1
    assert found["member clusters"]["detail"] == "2 clusters: cpu-spot, gpu-east, all Ready"
    assert found["kind PyTorchJob (kubeflow.org/v1)"]["status"] == "warn"
    assert found["kind PyTorchJob (kubeflow.org/v1)"]["detail"] == (
        "served by gpu-east; not by cpu-spot"
    )
    tfjob = found["kind TFJob (kubeflow.org/v1)"]
    assert tfjob["status"] == "fail" and "no Ready member cluster serves it" in tfjob["detail"]
    assert found["kind Job (batch/v1)"]["status"] == "ok"  # a built-in kind: every member


def test_an_unreachable_server_or_kubeconfig_is_a_usage_error(tmp_path, capsys) -> None:
    with Sandbox() as sandbox:
        kubeconfig = sandbox.write_kubeconfig(tmp_path / "gone.kubeconfig")
    assert main(["preflight", "--kubeconfig", str(kubeconfig)]) == 2
    assert "cannot reach the API server at https://127.0.0.1:" in capsys.readouterr().err
    assert main(["preflight", "--kubeconfig", str(tmp_path / "absent")]) == 2
    assert "cannot read the kubeconfig" in capsys.readouterr().err


def test_a_refused_token_is_a_usage_error(tmp_path, capsys) -> None:
    with Sandbox() as sandbox:
        kubeconfig = sandbox.write_kubeconfig(tmp_path / "k", token="not-a-token")
        assert main(["preflight", "--kubeconfig", str(kubeconfig)]) == 2
    assert "refused the kubeconfig's credentials" in capsys.readouterr().err
