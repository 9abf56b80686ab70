"""The whole loop as a newcomer sees it: ``fleetgate sandbox`` with the example fleet, then
kubectl only. Needs kubectl (skipped without it, failing under CI=true)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import yaml

from tests.conftest import REPO, require_tool
from tests.sandbox.test_sandbox_cli import kubectl, start

T = TypeVar("T")
JOB = REPO / "examples" / "sandbox" / "pytorchjob.yaml"
DEADLINE_S = 60.0  # a bound against a hang, not a measure


def eventually(probe: Callable[[], T | None], what: str, timeout: float = DEADLINE_S) -> T:
    """``probe()`` until it returns something, for at most ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        found = probe()
        if found is not None:
            return found
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def test_kubectl_applies_a_pytorchjob_and_watches_it_run(tmp_path: Path):
    require_tool("kubectl")
    kubeconfig = tmp_path / "kubeconfig"
    process, lines = start(
        kubeconfig, "--fleet", str(REPO / "examples" / "fleet.yaml"), "--speed", "60"
    )
    try:
        announced = "".join(lines)
        assert "clusters:   gpu-east (4 nodes), gpu-west (4 nodes), cpu-spot (16 nodes)" in (
            announced
        )
        assert "60x real time" in announced

        def clusters() -> list[str] | None:
            listed = kubectl(kubeconfig, "get", "clusters")
            assert listed.returncode == 0, listed.stderr
            rows = [line.split() for line in listed.stdout.splitlines()]
            names = sorted(row[0] for row in rows[1:])
            return names if len(names) == 3 else None

        assert eventually(clusters, "the fleet's clusters") == ["cpu-spot", "gpu-east", "gpu-west"]

        applied = kubectl(kubeconfig, "apply", "-f", str(JOB))
        assert applied.returncode == 0, applied.stderr
        assert applied.stdout.splitlines() == [
            "namespace/vision created",
            "propagationpolicy.policy.karmada.io/training-jobs created",
            "pytorchjob.kubeflow.org/resnet-ddp created",
        ]

        def binding() -> dict | None:
            got = kubectl(kubeconfig, "get", "rb", "-A", "-o", "yaml")
            assert got.returncode == 0, got.stderr
            items = yaml.safe_load(got.stdout)["items"]
            return items[0] if items and items[0]["spec"].get("clusters") else None

        rb = eventually(binding, "the ResourceBinding, placed")
        assert (rb["metadata"]["namespace"], rb["metadata"]["name"]) == (
            "vision",
            "resnet-ddp-pytorchjob",
        )
        labels = rb["metadata"]["labels"]
        assert set(labels) >= {
            "propagationpolicy.karmada.io/permanent-id",
            "resourcebinding.karmada.io/permanent-id",
        }
        resource = rb["spec"]["resource"]
        assert {k: resource[k] for k in ("apiVersion", "kind", "namespace", "name")} == {
            "apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob",
            "namespace": "vision",
            "name": "resnet-ddp",
        }
        assert resource["uid"] and resource["resourceVersion"]
        assert rb["spec"]["clusters"][0]["name"] in ("gpu-east", "gpu-west")

        seen: list[str] = []

        def described() -> str | None:
            out = kubectl(kubeconfig, "describe", "pytorchjob", "-n", "vision", "resnet-ddp")
            assert out.returncode == 0, out.stderr
            seen.append(out.stdout)
            return out.stdout if "PyTorchJobSucceeded" in out.stdout else None

        final = eventually(described, "the job to succeed")
        assert "Name:         resnet-ddp" in final
        assert "Namespace:    vision" in final
        assert "sandbox.fleetgate.io/duration: 30s" in final
        for reason in ("PyTorchJobCreated", "PyTorchJobRunning", "PyTorchJobSucceeded"):
            assert reason in final
        assert "Status:" in final and "Conditions:" in final

        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=DEADLINE_S) == 0
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate(timeout=DEADLINE_S)


def test_a_broken_fleet_file_is_reported_and_nothing_starts(tmp_path: Path):
    broken = tmp_path / "fleet.yaml"
    broken.write_text("clusters:\n- name: Not_A_DNS_Label\n  nodes: []\n")
    done = subprocess.run(
        [sys.executable, "-m", "fleetgate", "sandbox", "--port", "0", "--fleet", str(broken)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=DEADLINE_S,
        check=False,
    )
    assert done.returncode == 1, done.stdout
    assert "error(s) in the fleet file" in done.stderr
    assert str(broken) in done.stderr
    assert not (tmp_path / "sandbox.kubeconfig").exists()
