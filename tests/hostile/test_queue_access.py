"""Issue 29, finding 1: any namespace could use any queue. Tried as a hostile tenant would: a
namespace of no tenant (``scratch``, with a PropagationPolicy of its own, so Karmada binds its
jobs) labels a PyTorchJob into ``prod-inference`` with PriorityClass ``inference-critical``.
Before ``Queue.spec.namespaceSelector`` it was admitted at priority 2000; now the cycle rejects
it with ``QueueNotAllowed`` and the same job from the ``inference`` tenant's namespace is
admitted. Through ``fleetgate dry-run`` on the example fleet and policies."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleetgate.cli import main
from tests.conftest import REPO

SNAPSHOT = REPO / "examples" / "fleet-snapshot.yaml"
JOB = REPO / "examples" / "jobs" / "pytorch-finetune.yaml"


def claimed(namespace: str) -> list[dict[str, Any]]:
    """A PropagationPolicy that claims the namespace's PyTorchJobs, and for ``scratch`` the
    Namespace (no tenant label; the example fleet has the tenants' own)."""
    scratch = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "scratch"}}
    policy = {
        "apiVersion": "policy.karmada.io/v1alpha1",
        "kind": "PropagationPolicy",
        "metadata": {"name": "anything", "namespace": namespace},
        "spec": {
            "resourceSelectors": [{"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob"}],
            "placement": {"clusterAffinity": {"clusterNames": ["gpu-east", "gpu-west"]}},
        },
    }
    return [policy, *([scratch] if namespace == "scratch" else [])]


def sneaky(namespace: str) -> dict[str, Any]:
    job = copy.deepcopy(yaml.safe_load(JOB.read_text()))
    job["metadata"]["namespace"] = namespace
    job["metadata"]["name"] = "sneaky"
    job["metadata"].setdefault("labels", {})["fleetgate.io/queue"] = "prod-inference"
    job["spec"]["runPolicy"] = {"schedulingPolicy": {"priorityClass": "inference-critical"}}
    for role in job["spec"]["pytorchReplicaSpecs"].values():
        role["replicas"] = 1
        resources = role["template"]["spec"]["containers"][0]["resources"]
        resources["limits"]["nvidia.com/gpu"] = "1"
        resources["requests"] = {"cpu": "1", "memory": "8Gi"}
    return job


def decide(tmp_path: Path, capsys: pytest.CaptureFixture[str], namespace: str) -> dict:
    extra = tmp_path / "scratch.yaml"
    extra.write_text(yaml.safe_dump_all(claimed(namespace)))
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump(sneaky(namespace)))
    code = main(
        ["dry-run", "--policies", str(REPO / "policies"), "--snapshot", str(SNAPSHOT), str(extra),
         "--job", str(job), "--now", "2025-03-10T10:00:00Z", "-o", "json"]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0, out
    found = [d for d in json.loads(out)["decisions"] if d["workload"].endswith("/sneaky")]
    assert len(found) == 1, out
    return found[0]


def test_a_namespace_of_no_tenant_cannot_label_its_job_into_prod_inference(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    decision = decide(tmp_path, capsys, "scratch")
    assert (decision["action"], decision["reason"]) == ("Reject", "QueueNotAllowed"), decision
    assert decision["message"] == (
        "namespace scratch may not use queue prod-inference: its labels do not match its "
        "spec.namespaceSelector"
    )


def test_the_inference_tenant_may(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    decision = decide(tmp_path, capsys, "inference")
    assert decision["reason"] != "QueueNotAllowed", decision
    assert decision["queue"] == "prod-inference"
