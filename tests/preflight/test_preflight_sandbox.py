"""Issue 33, done when: ``fleetgate preflight`` against the sandbox passes, and against a sandbox
missing a CRD or a permission fails naming it.

The sandbox plays an installed karmada-apiserver (tests/preflight/controlplane.py): the Karmada
CRDs, fleetgate's RBAC of deploy/karmada-apiserver/ (the reconciler's ServiceAccount's token as
a kubeconfig), fleetgate's webhook running and registered with the shipped configurations, and
member clusters.
"""

from __future__ import annotations

import json
import shutil
import socket
from pathlib import Path
from typing import Any

import kubernetes
import pytest

from fleetgate.cli import main
from sandbox.server import Sandbox
from tests.conftest import REPO
from tests.preflight.controlplane import (
    RECONCILER,
    crds,
    join,
    karmada,
    reconciler_kubeconfig,
    webhook_registered,
)
from tests.sandbox.test_webhooks import register

__all__ = ["crds"]  # the fixture, used by name


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
