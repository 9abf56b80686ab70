"""kubectl against the sandbox: discovery, get, apply, describe, api-resources.

Skipped when kubectl is not installed, except under CI=true, where it fails (scripts/test-tools.sh
installs Debian's kubernetes-client).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest
import yaml

from sandbox.server import Sandbox
from tests.sandbox.builders import binding, cluster, owner_ref

KUBECTL = shutil.which("kubectl")


@pytest.fixture(autouse=True)
def need_kubectl() -> None:
    if KUBECTL is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("CI=true but kubectl is not installed")
        pytest.skip("kubectl is not installed")


@pytest.fixture
def kubectl(kubeconfig: Path, tmp_path: Path):
    def run(*args: str) -> str:
        env = {**os.environ, "HOME": str(tmp_path), "KUBECACHEDIR": str(tmp_path / "cache")}
        result = subprocess.run(
            [KUBECTL, "--kubeconfig", str(kubeconfig), *args],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
            check=False,
        )
        assert result.returncode == 0, f"kubectl {' '.join(args)}: {result.stderr}"
        return result.stdout

    return run


MANIFEST = """\
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: train
  namespace: default
  labels: {team: vision}
spec:
  pytorchReplicaSpecs:
    Worker:
      replicas: REPLICAS
      template:
        spec:
          containers:
          - name: pytorch
            image: pytorch:2
            resources: {limits: {nvidia.com/gpu: 8}}
---
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: train
  namespace: default
spec:
  resourceSelectors:
  - apiVersion: kubeflow.org/v1
    kind: PyTorchJob
    name: train
  placement:
    clusterAffinity:
      clusterNames: [member1]
"""


def test_get_clusters(sandbox: Sandbox, kubectl):
    sandbox.store.create("clusters.cluster.karmada.io", cluster("member1"))
    sandbox.store.create("clusters.cluster.karmada.io", cluster("member2"))
    lines = kubectl("get", "clusters").splitlines()
    assert lines[0].split()[0] == "NAME" and "AGE" in lines[0]
    assert [line.split()[0] for line in lines[1:]] == ["member1", "member2"]


def test_apply_create_then_configure(sandbox: Sandbox, kubectl, tmp_path: Path):
    manifest = tmp_path / "job.yaml"
    manifest.write_text(MANIFEST.replace("REPLICAS", "2"))
    out = kubectl("apply", "-f", str(manifest))
    assert "pytorchjob.kubeflow.org/train created" in out
    assert "propagationpolicy.policy.karmada.io/train created" in out
    assert "unchanged" in kubectl("apply", "-f", str(manifest))

    manifest.write_text(MANIFEST.replace("REPLICAS", "4"))
    assert "pytorchjob.kubeflow.org/train configured" in kubectl("apply", "-f", str(manifest))
    job = sandbox.store.get("pytorchjobs.kubeflow.org", "train", namespace="default")
    assert job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 4
    assert job["metadata"]["generation"] == 2
    assert "kubectl.kubernetes.io/last-applied-configuration" in job["metadata"]["annotations"]
    policies = kubectl("get", "pp", "-o", "name")
    assert policies.strip() == "propagationpolicy.policy.karmada.io/train"


def test_get_rb_all_namespaces_as_yaml(sandbox: Sandbox, kubectl):
    store = sandbox.store
    store.create("namespaces", {"metadata": {"name": "team-a"}})
    store.create("resourcebindings.work.karmada.io", binding("a"))
    store.create("resourcebindings.work.karmada.io", binding("b", namespace="team-a", replicas=2))
    document = yaml.safe_load(kubectl("get", "rb", "-A", "-o", "yaml"))
    assert document["kind"] == "List"
    found = {(i["metadata"]["namespace"], i["metadata"]["name"]) for i in document["items"]}
    assert found == {("default", "a-pytorchjob"), ("team-a", "b-pytorchjob")}
    assert all(i["apiVersion"] == "work.karmada.io/v1alpha2" for i in document["items"])
    table = kubectl("get", "rb", "-A").splitlines()
    assert table[0].split()[:2] == ["NAMESPACE", "NAME"]


def test_describe_pytorchjob_shows_its_events(sandbox: Sandbox, kubectl, tmp_path: Path):
    manifest = tmp_path / "job.yaml"
    manifest.write_text(MANIFEST.replace("REPLICAS", "2"))
    kubectl("apply", "-f", str(manifest))
    job = sandbox.store.get("pytorchjobs.kubeflow.org", "train", namespace="default")
    sandbox.store.create(
        "events",
        {
            "metadata": {"name": "train.admitted", "namespace": "default"},
            "involvedObject": {**owner_ref(job), "namespace": "default"},
            "reason": "Admitted",
            "message": "admitted to member1",
            "type": "Normal",
            "count": 1,
        },
    )
    out = kubectl("describe", "pytorchjob", "train")
    assert "Name:         train" in out
    assert "Kind:         PyTorchJob" in out
    assert "nvidia.com/gpu" in out
    assert "Admitted" in out and "admitted to member1" in out


def test_api_resources(kubectl):
    rows = {line.split()[0]: line.split() for line in kubectl("api-resources").splitlines()[1:]}
    assert rows["resourcebindings"][1:] == [
        "rb",
        "work.karmada.io/v1alpha2",
        "true",
        "ResourceBinding",
    ]
    assert rows["clusterpropagationpolicies"][1:] == [
        "cpp",
        "policy.karmada.io/v1alpha1",
        "false",
        "ClusterPropagationPolicy",
    ]
    assert rows["pytorchjobs"][1:] == ["kubeflow.org/v1", "true", "PyTorchJob"]
    assert rows["clusters"][1:] == ["cluster.karmada.io/v1alpha1", "false", "Cluster"]
    assert "sparkapplications" in rows and "rayjobs" in rows


def test_kubectl_sees_server_errors(sandbox: Sandbox, kubeconfig: Path, tmp_path: Path):
    def apply(namespace: str, replicas: str) -> subprocess.CompletedProcess[str]:
        manifest = tmp_path / "rb.yaml"
        manifest.write_text(
            textwrap.dedent(
                f"""\
                apiVersion: work.karmada.io/v1alpha2
                kind: ResourceBinding
                metadata: {{name: rb, namespace: {namespace}}}
                spec: {{replicas: {replicas}, resource: {{apiVersion: v1, kind: Pod, name: p}}}}
                """
            )
        )
        return subprocess.run(
            [KUBECTL, "--kubeconfig", str(kubeconfig), "apply", "-f", str(manifest)],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "HOME": str(tmp_path)},
            check=False,
        )

    missing = apply("ghost", "1")
    assert missing.returncode != 0
    assert 'namespaces "ghost" not found' in missing.stderr
    if sandbox.store.schemas.validators:
        invalid = apply("default", "three")
        assert invalid.returncode != 0
        assert "spec.replicas" in invalid.stderr and "is invalid" in invalid.stderr
