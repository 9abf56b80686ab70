"""Issue 29, finding 7 (the webhook's part): fleetgate's own marks on a binding were anyone's.
Tried as a hostile tenant would, with RBAC to patch ResourceBindings in its namespace but not
fleetgate's account: it marks its waiting job admitted and resets its preemption count. Through
the sandbox (its RBAC, and the caller's userInfo in the admission review, as kube-apiserver
sends it) and fleetgate's real webhook: the binding keeps fleetgate's marks, the tenant is
warned, and its other changes go through."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import kubernetes
import pytest

from engine import annotations as ann
from sandbox.authn import User
from sandbox.karmada import KarmadaControllers
from sandbox.server import Sandbox
from sandbox.store import Store
from tests.reconciler.test_loop import RB, binding, clock, custom, fleet_world, submit
from tests.sandbox.conftest import api_client, kubeconfig

__all__ = ["api_client", "clock", "custom", "fleet_world", "kubeconfig"]  # fixtures by name

MALLORY = "tok-mallory"


@pytest.fixture
def sandbox() -> Iterator[Sandbox]:
    server = Sandbox(Store(event_log_limit=1000), users={MALLORY: User("mallory")})
    server.start(port=0)
    try:
        yield server
    finally:
        server.stop(timeout=5)


def test_a_tenant_cannot_mark_its_job_admitted(
    sandbox: Sandbox, api_client, custom, fleet_world: KarmadaControllers, tmp_path: Path
) -> None:
    rbac = kubernetes.client.RbacAuthorizationV1Api(api_client)
    rule = {"apiGroups": ["work.karmada.io"], "resources": ["resourcebindings"],
            "verbs": ["get", "patch", "update"]}  # fmt: skip
    rbac.create_namespaced_role("research", {"metadata": {"name": "rb"}, "rules": [rule]})
    rbac.create_namespaced_role_binding(
        "research",
        {
            "metadata": {"name": "rb-mallory"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "rb"},
            "subjects": [
                {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "mallory"}
            ],
        },
    )
    submit(custom, "first", workers=2)
    fleet_world.run_once()  # the detector makes the binding; fleetgate's webhook holds it
    held = binding(custom, "first")
    assert held["metadata"]["labels"][ann.MANAGED] == "true"

    config = kubernetes.client.Configuration()
    kubeconfig = sandbox.write_kubeconfig(tmp_path / "mallory", token=MALLORY)
    kubernetes.config.load_kube_config(config_file=str(kubeconfig), client_configuration=config)
    with kubernetes.client.ApiClient(config) as as_mallory:
        forged = {
            "metadata": {
                "labels": {"mallory-was-here": "yes"},
                "annotations": {
                    ann.ADMITTED_AT: "2025-03-10T09:30:00Z",
                    ann.ADMITTED_TO: "gpu-east",
                    ann.PREEMPTIONS: "0",
                    ann.QUEUED_AT: "2000-01-01T00:00:00Z",  # the head of every queue
                },
            }
        }
        _, _, headers = kubernetes.client.CustomObjectsApi(
            as_mallory
        ).patch_namespaced_custom_object_with_http_info(*RB, "first-pytorchjob", forged)
    after = binding(custom, "first")
    notes = after["metadata"]["annotations"]
    assert ann.ADMITTED_AT not in notes and ann.ADMITTED_TO not in notes
    assert notes[ann.QUEUED_AT] == held["metadata"]["annotations"][ann.QUEUED_AT]
    assert ann.PREEMPTIONS not in notes
    assert after["metadata"]["labels"]["mallory-was-here"] == "yes"  # the rest went through
    assert "fleetgate wrote back" in headers.get("Warning", ""), headers
