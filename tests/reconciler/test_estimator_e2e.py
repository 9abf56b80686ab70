"""The scheduler estimators end to end: the HTTPS sandbox with fleetgate's webhook and Karmada's
controllers over examples/fleet.yaml, the sandbox's karmada-scheduler-estimators over its member
model (gRPC on 127.0.0.1), and the reconciler asking them before each cycle, in process (as in
test_loop.py: ``run_once`` on a shared fake clock) and as ``fleetgate serve`` with
``--scheduler-estimator`` options."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import kubernetes
import pytest

from engine.fleet.model import PodShape
from engine.policy.reload import PolicyHolder
from reconciler.estimator import EstimatorClient, request_for
from reconciler.estimatorargs import EstimatorSettings
from reconciler.loop import PassSummary, Reconciler
from reconciler.metrics import ReconcilerMetrics
from reconciler.settings import ReconcilerSettings
from sandbox.karmada import KarmadaControllers
from sandbox.karmada.estimator import MemberEstimators, for_controllers, max_available_replicas
from tests.conftest import REPO
from tests.reconciler.conftest import time_limit
from tests.reconciler.serveproc import ServeProcess
from tests.reconciler.test_loop import (
    Clock,
    binding,
    caught_up,
    clock,
    custom,
    eventually,
    fleet_world,
    submit,
)

__all__ = ["clock", "custom", "fleet_world"]  # fixtures used by name

CLUSTERS = ("cpu-spot", "gpu-east", "gpu-west")
PATIENT = 30.0  # seconds: nothing hangs, so no pass waits this long


@pytest.fixture(autouse=True)
def bounded() -> Iterator[None]:
    with time_limit(90):
        yield


@pytest.fixture
def estimators(fleet_world: KarmadaControllers) -> Iterator[MemberEstimators]:
    with for_controllers(fleet_world) as served:
        yield served


@pytest.fixture
def timeout() -> float:
    return PATIENT


@pytest.fixture
def rec(
    api_client: kubernetes.client.ApiClient,
    clock: Clock,
    estimators: MemberEstimators,
    timeout: float,
) -> Iterator[Reconciler]:
    """A reconciler over policies/ asking every member's estimator; no pass thread."""
    holder = PolicyHolder.for_paths([REPO / "policies"])
    assert holder.reload(), holder.status.errors
    client = EstimatorClient(EstimatorSettings(estimators.addresses, timeout=timeout))
    reconciler = Reconciler(
        api_client, holder, ReconcilerSettings(request_timeout=10), clock=clock, estimator=client
    )
    try:
        reconciler.start(loop=False)
        assert reconciler.wait_synced(15)
        yield reconciler
    finally:
        reconciler.stop()
        client.close()


def step(karmada: KarmadaControllers, rec: Reconciler, custom) -> PassSummary:
    karmada.run_once()
    caught_up(rec, custom)
    summary = rec.run_once()
    assert summary.errors == 0, summary
    return summary


def gpu_shape(shapes: set[PodShape]) -> PodShape:
    return next(s for s in shapes if ("nvidia.com/gpu", 8000) in s)


def test_a_pass_carries_the_estimators_answers_and_counts_them(
    custom, fleet_world: KarmadaControllers, estimators: MemberEstimators, rec: Reconciler
):
    metrics = ReconcilerMetrics().attach(rec)
    submit(custom, "first", workers=2)  # 3 pods of 8 GPUs, pending before this pass
    summary = step(fleet_world, rec, custom)
    assert rec.last_snapshot is not None
    estimates = rec.last_snapshot.estimates
    assert estimates.failed == {}
    shapes = {shape for _, shape in estimates.replicas}
    assert set(estimates.replicas) == {(c, s) for c in CLUSTERS for s in shapes}
    gpu = gpu_shape(shapes)
    assert estimates.replicas["gpu-east", gpu] == 4  # four empty nodes of 8 GPUs
    assert estimates.replicas["cpu-spot", gpu] == 0
    for (cluster, shape), answer in estimates.replicas.items():
        wanted = request_for(cluster, shape).replica_requirements
        assert answer == max_available_replicas(fleet_world.member(cluster), wanted)
    assert summary.estimator_requests == {(c, "ok"): len(shapes) for c in CLUSTERS}
    text = metrics.exposition().decode()
    for cluster in CLUSTERS:
        line = f'fleetgate_estimator_requests_total{{cluster="{cluster}",result="ok"}}'
        assert f"{line} {float(len(shapes))}" in text

    # admitted now: the next pass has nothing pending, so asks nothing
    assert binding(custom, "first")["spec"].get("clusters")
    assert step(fleet_world, rec, custom).estimator_requests == {}
    assert rec.last_snapshot.estimates.replicas == {}


@pytest.mark.parametrize("timeout", [3.0])  # karmada-scheduler's default
def test_a_hanging_estimator_leaves_its_cluster_to_the_models(
    custom, fleet_world: KarmadaControllers, estimators: MemberEstimators, rec: Reconciler
):
    metrics = ReconcilerMetrics().attach(rec)
    estimators.hang("gpu-west")  # no answer until healed: the pass gives up at its timeout
    submit(custom, "first", workers=2)
    summary = step(fleet_world, rec, custom)
    assert rec.last_snapshot is not None
    estimates = rec.last_snapshot.estimates
    assert set(estimates.failed) == {"gpu-west"}
    assert estimates.failed["gpu-west"].startswith("timeout: no answer from 127.0.0.1:")
    assert {c for c, _ in estimates.replicas} == {"cpu-spot", "gpu-east"}
    asked = len({s for _, s in estimates.replicas})
    assert summary.estimator_requests[("gpu-west", "timeout")] == asked
    assert summary.decisions >= 1  # the cycle ran on the models for gpu-west
    text = metrics.exposition().decode()
    timeouts = r'fleetgate_estimator_requests_total\{cluster="gpu-west",result="timeout"\} (\S+)'
    found = re.search(timeouts, text)
    assert found is not None and float(found.group(1)) == asked

    estimators.heal("gpu-west")
    submit(custom, "second", workers=2)
    again = step(fleet_world, rec, custom)
    assert rec.last_snapshot.estimates.failed == {}
    assert again.estimator_requests.get(("gpu-west", "ok"), 0) >= 1


def test_serve_asks_the_estimators_named_on_its_command_line(
    kubeconfig: Path,
    custom,
    fleet_world: KarmadaControllers,
    estimators: MemberEstimators,
    tmp_path: Path,
):
    named = [f"--scheduler-estimator={c}={a}" for c, a in sorted(estimators.addresses.items())]
    named.append(f"--scheduler-estimator-timeout={PATIENT:g}s")
    served = ServeProcess(
        kubeconfig, "replica-e", tmp_path / "serve.log", "--no-leader-elect", *named
    )
    try:
        served.wait_ready()
        submit(custom, "first", workers=2)
        fleet_world.run_once()  # the detector makes the (suspended) binding
        eventually(lambda: bool(binding(custom, "first")["spec"].get("clusters")), 30)
        ok = [f'fleetgate_estimator_requests_total{{cluster="{c}",result="ok"}}' for c in CLUSTERS]
        # the pass that admitted it asked first; its metrics are recorded once its writes are done
        eventually(lambda: all(line in served.get("/metrics")[1] for line in ok), 30)
        assert 'result="timeout"' not in served.get("/metrics")[1]
        assert all(estimators.calls[c] >= 1 for c in CLUSTERS)
    finally:
        served.stop()
