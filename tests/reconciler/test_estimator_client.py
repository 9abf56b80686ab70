"""The estimator client (reconciler.estimator) against the sandbox's karmada-scheduler-estimators
(sandbox.karmada.estimator) over real gRPC on 127.0.0.1: the member model's answers; a hanging
estimator (released by the test, never slept on), a refused connection, an error status and a
TLS certificate from another CA each leave that cluster to its resource models, with the reason
and every call counted."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from engine.cycle.placement.estimates import pod_shape
from engine.fleet.model import Snapshot
from engine.fleet.snapshot import build_snapshot
from engine.members import Fleet, JobSpec, PodGroup, cluster_object, load_fleet
from engine.resources import Resources
from reconciler.estimator import EstimatorClient, quantity_text, request_for
from reconciler.estimatorargs import EstimatorSettings
from sandbox import tls
from sandbox.karmada.estimator import MemberEstimators, max_available_replicas
from tests.conftest import REPO

NOW = datetime(2026, 1, 1, tzinfo=UTC)
GIB = 2**30
GPU8 = pod_shape({"cpu": 16_000, "memory": 64 * GIB * 1000, "nvidia.com/gpu": 8000, "pods": 1000})
GPU4 = pod_shape({"cpu": 8_000, "nvidia.com/gpu": 4000, "pods": 1000})
SMALL = pod_shape({"cpu": 500, "pods": 1000})
SHAPES = (GPU8, GPU4, SMALL)


@pytest.fixture
def fleet() -> Fleet:
    return Fleet(load_fleet(REPO / "examples" / "fleet.yaml"), NOW)


@pytest.fixture
def estimators(fleet: Fleet) -> Iterator[MemberEstimators]:
    with MemberEstimators({m.name: m for m in fleet}) as served:
        yield served


@pytest.fixture
def clients() -> Iterator[list[EstimatorClient]]:
    made: list[EstimatorClient] = []
    yield made
    for client in made:
        client.close()


def snapshot_of(fleet: Fleet) -> Snapshot:
    return build_snapshot([("", cluster_object(m, NOW)) for m in fleet])


def client_for(
    clients: list[EstimatorClient], addresses: dict[str, str], **settings: Any
) -> EstimatorClient:
    client = EstimatorClient(EstimatorSettings(addresses=addresses, **settings))
    clients.append(client)
    return client


def occupy_two_gpu_nodes(fleet: Fleet) -> None:
    """gpu-east: a gang of two 8-GPU pods binds to two of its four nodes."""
    pods = PodGroup("w", 2, Resources({"nvidia.com/gpu": 8, "cpu": 100}))
    job = JobSpec("busy", (pods,), timedelta(hours=1))
    member = fleet["gpu-east"]
    member.submit(job, NOW)
    member.step(NOW)
    assert member.job_state("busy").pods_bound == 2


def test_the_answers_are_the_member_model_s(fleet, estimators, clients):
    occupy_two_gpu_nodes(fleet)
    client = client_for(clients, estimators.addresses, timeout=30)
    asked = client.ask(snapshot_of(fleet), SHAPES)
    assert asked.estimates.failed == {}
    replicas = asked.estimates.replicas
    # by hand: gpu-east has two nodes with 8 GPUs free (190 cpu, 110 pods each): 2 pods of 8
    # GPUs, 4 of 4 GPUs; 500m pods: each busy node holds one pod and 90 cpu (180 such pods),
    # capped by its 109 free pod slots; each free node by its 110
    assert replicas["gpu-east", GPU8] == 2
    assert replicas["gpu-east", GPU4] == 4
    assert replicas["gpu-east", SMALL] == 109 * 2 + 110 * 2
    assert replicas["gpu-west", GPU8] == 4
    assert replicas["cpu-spot", GPU8] == 0  # no GPU on any node
    for (cluster, shape), answer in replicas.items():
        wanted = request_for(cluster, shape).replica_requirements
        assert answer == max_available_replicas(fleet[cluster], wanted)
    assert set(replicas) == {(c, s) for c in ("cpu-spot", "gpu-east", "gpu-west") for s in SHAPES}
    assert asked.requests == {(c, "ok"): 3 for c in ("cpu-spot", "gpu-east", "gpu-west")}


def test_only_ready_clusters_with_an_estimator_are_asked(fleet, estimators, clients):
    fleet["gpu-west"].set_ready(False, NOW)
    addresses = {c: a for c, a in estimators.addresses.items() if c != "cpu-spot"}
    asked = client_for(clients, addresses, timeout=30).ask(snapshot_of(fleet), SHAPES)
    assert {c for c, _ in asked.estimates.replicas} == {"gpu-east"}
    assert estimators.calls == {"cpu-spot": 0, "gpu-east": 3, "gpu-west": 0}
    assert client_for(clients, addresses).ask(snapshot_of(fleet), ()).requests == {}


def test_a_hanging_estimator_times_out_and_its_cluster_falls_back(fleet, estimators, clients):
    estimators.hang("gpu-west")  # answers nothing until healed or stopped: no clock involved
    addresses = {"gpu-west": estimators.addresses["gpu-west"]}
    asked = client_for(clients, addresses, timeout=0.3).ask(snapshot_of(fleet), SHAPES)
    assert asked.estimates.replicas == {}
    reason = asked.estimates.failed["gpu-west"]
    assert reason.startswith("timeout: no answer from 127.0.0.1:") and reason.endswith("0.3s")
    assert asked.requests == {("gpu-west", "timeout"): 3}
    estimators.heal("gpu-west")
    again = client_for(clients, addresses, timeout=30).ask(snapshot_of(fleet), SHAPES)
    assert again.estimates.failed == {}
    assert again.estimates.replicas["gpu-west", GPU8] == 4


def test_a_refused_connection_is_unavailable(fleet, clients):
    with socket.socket() as bound:  # bound, never listening: connecting is refused
        bound.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{bound.getsockname()[1]}"
        client = client_for(clients, {"gpu-east": address}, timeout=30)
        asked = client.ask(snapshot_of(fleet), SHAPES)
    assert asked.estimates.replicas == {}
    reason = asked.estimates.failed["gpu-east"]
    assert reason.startswith(f"unavailable: {address}: failed to connect"), reason
    assert asked.requests == {("gpu-east", "unavailable"): 3}


def test_an_error_status_fails_the_whole_cluster(fleet, estimators, clients):
    estimators.fail("gpu-east", "estimator cache not synced")
    asked = client_for(clients, estimators.addresses, timeout=30).ask(snapshot_of(fleet), SHAPES)
    assert asked.estimates.failed["gpu-east"].endswith("INTERNAL: estimator cache not synced")
    assert {c for c, _ in asked.estimates.replicas} == {"cpu-spot", "gpu-west"}
    assert asked.requests[("gpu-east", "error")] == 3


def test_a_wrong_address_is_refused_by_the_server(fleet, estimators, clients):
    addresses = {"gpu-west": estimators.addresses["gpu-east"]}
    asked = client_for(clients, addresses, timeout=30).ask(snapshot_of(fleet), SHAPES)
    reason = asked.estimates.failed["gpu-west"]
    assert "cluster name does not match, got: gpu-west, desire: gpu-east" in reason
    assert reason.startswith("error: ")


def test_tls_with_the_ca_file(fleet, clients, tmp_path: Path):
    served = tls.generate()
    other = tls.generate()
    members = {m.name: m for m in fleet}
    with MemberEstimators(members, tls=(served.cert_pem, served.key_pem)) as estimators:
        (tmp_path / "ca.crt").write_bytes(served.ca_pem)
        (tmp_path / "other.crt").write_bytes(other.ca_pem)
        good = client_for(clients, estimators.addresses, timeout=30, ca_file=tmp_path / "ca.crt")
        asked = good.ask(snapshot_of(fleet), (GPU8,))
        assert asked.estimates.failed == {}
        assert asked.estimates.replicas["gpu-east", GPU8] == 4
        wrong = client_for(
            clients, estimators.addresses, timeout=30, ca_file=tmp_path / "other.crt"
        )
        refused = wrong.ask(snapshot_of(fleet), (GPU8,))
        assert refused.estimates.replicas == {}
        assert set(refused.estimates.failed) == {"cpu-spot", "gpu-east", "gpu-west"}
        assert all(r.startswith("unavailable: ") for r in refused.estimates.failed.values())
        plain = client_for(clients, estimators.addresses, timeout=30)  # plain, to TLS
        assert plain.ask(snapshot_of(fleet), (GPU8,)).estimates.replicas == {}


@pytest.mark.parametrize(
    ("resource", "milli", "text"),
    [
        ("cpu", 500, "500m"),
        ("cpu", 4000, "4000m"),
        ("memory", 64 * GIB * 1000, str(64 * GIB)),
        ("memory", 1500, "1500m"),
        ("nvidia.com/gpu", 8000, "8"),
    ],
)
def test_quantities_of_a_request(resource: str, milli: int, text: str):
    assert quantity_text(resource, milli) == text


def test_a_request_leaves_pods_out():
    request = request_for("gpu-east", GPU4)
    assert request.cluster == "gpu-east"
    assert request.replica_requirements is not None
    assert dict(request.replica_requirements.resource_request) == {
        "cpu": "8000m",
        "nvidia.com/gpu": "4",
    }
