"""Issue 29, finding 4: a bad policy edit plus any restart was an outage. A replica that started
while the policy files did not load exited 1, and with the leader killed during a bad edit there
was no reconciler for 49 s (with crash-loop backoff, minutes). Now the leader stores each set it
loads (``reconciler.lastgood``); replicas that start on broken files run on that set, say so,
and keep deciding; with no stored set a replica waits, unready, and starts once the files load.
``fleetgate serve`` as child processes against the sandbox, Karmada's controllers in this one."""

from __future__ import annotations

import functools
import shutil
import signal
from collections.abc import Iterator
from pathlib import Path

import kubernetes
import pytest

from engine import annotations as ann
from engine.policy.policyset import load_policy_set
from reconciler.lastgood import DEFAULT_NAME, KEY
from sandbox.karmada import KarmadaControllers
from tests.conftest import REPO
from tests.reconciler.conftest import time_limit
from tests.reconciler.serveproc import ELECTION, ServeProcess
from tests.reconciler.test_loop import binding, clock, custom, eventually, fleet_world, submit

__all__ = ["clock", "custom", "fleet_world"]  # fixtures used by name

NAMESPACE = "kube-system"  # ServeProcess's --lease-namespace


@functools.cache
def version() -> str:
    """The example policies' version (loaded when first needed, not at collection)."""
    return load_policy_set([REPO / "policies"]).version


@pytest.fixture(autouse=True)
def bounded() -> Iterator[None]:
    with time_limit(150):
        yield


def broken(tmp_path: Path) -> Path:
    """The example policies with one edit that does not load (a queue's weight as text)."""
    directory = tmp_path / "policies"
    shutil.copytree(REPO / "policies", directory)
    queues = directory / "queues.yaml"
    text = queues.read_text()
    assert "weight: " in text
    queues.write_text(text.replace("weight: ", "weight: heavy # ", 1))
    return directory


def stored(api: kubernetes.client.ApiClient) -> kubernetes.client.V1ConfigMap | None:
    core = kubernetes.client.CoreV1Api(api)
    try:
        return core.read_namespaced_config_map(DEFAULT_NAME, NAMESPACE)
    except kubernetes.client.ApiException as error:
        assert error.status == 404
        return None


def metric(served: ServeProcess, name: str) -> str:
    code, text = served.get("/metrics")
    assert code == 200
    return next(line.split()[-1] for line in text.splitlines() if line.startswith(name + " "))


def test_replicas_started_on_broken_files_keep_deciding_on_the_last_good_set(
    api_client, kubeconfig: Path, custom, fleet_world: KarmadaControllers, tmp_path
):
    first = ServeProcess(kubeconfig, "replica-1", tmp_path / "r1.log", *ELECTION)
    try:
        first.wait_ready()
        eventually(lambda: stored(api_client) is not None, 30)  # the leader stored its set
        kept = stored(api_client)
        assert kept.metadata.annotations[ann.POLICY_VERSION] == version()
        assert KEY in kept.data
        first.signal(signal.SIGTERM)
        assert first.wait(30) == 0, first.stderr()
    finally:
        first.stop()

    bad = broken(tmp_path)
    replicas = [
        ServeProcess(kubeconfig, name, tmp_path / f"{name}.log", *ELECTION, "--policies", str(bad))
        for name in ("replica-2", "replica-3")
    ]
    try:
        for served in replicas:
            served.wait_ready()  # no exit, no crash loop: ready on the stored set
            code, said = served.get("/readyz")
            assert code == 200 and f"policy version {version()}" in said, said
            assert "the last good set from ConfigMap kube-system/" in said
            assert "queues.yaml" in said  # which file does not load
            assert metric(served, "fleetgate_policy_fallback") == "1.0"
            assert metric(served, "fleetgate_policy_healthy") == "0.0"
        events = kubernetes.client.CoreV1Api(api_client).list_namespaced_event(NAMESPACE).items
        assert any(e.reason == "PolicyFallback" and e.type == "Warning" for e in events)

        submit(custom, "first", workers=2)  # the leader decides it on the last good set
        fleet_world.run_once()
        eventually(lambda: bool(binding(custom, "first")["spec"].get("clusters")), 30)
        notes = binding(custom, "first")["metadata"]["annotations"]
        assert notes[ann.POLICY_VERSION] == version()
        # the fallback is never stored as if the files had loaded
        assert stored(api_client).metadata.annotations[ann.POLICY_VERSION] == version()
    finally:
        for served in replicas:
            served.stop()


def test_with_no_stored_set_a_replica_waits_unready_until_the_files_load(
    kubeconfig: Path, custom, fleet_world: KarmadaControllers, tmp_path
):
    bad = broken(tmp_path)
    served = ServeProcess(
        kubeconfig, "replica-1", tmp_path / "r.log", "--no-leader-elect", "--policies", str(bad)
    )
    try:
        eventually(lambda: bool(served.api_url) or served.process.poll() is not None, 60)
        assert served.process.poll() is None, served.stderr()  # serving, not exited
        code, said = served.get("/readyz")
        assert code == 503 and "no valid policy set" in said and "queues.yaml" in said, said
        submit(custom, "first", workers=2)
        fleet_world.run_once()
        assert not binding(custom, "first")["spec"].get("clusters")  # nothing decided

        shutil.copy(REPO / "policies" / "queues.yaml", bad / "queues.yaml")  # the fix
        served.wait_ready()
        assert served.get("/readyz")[1].strip() == f"ready: policy version {version()}"
        eventually(lambda: bool(binding(custom, "first")["spec"].get("clusters")), 30)
    finally:
        served.stop()
