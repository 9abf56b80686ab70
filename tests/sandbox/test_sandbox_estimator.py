"""The sandbox's karmada-scheduler-estimators (sandbox.karmada.estimator): Karmada's per-node
answer over the member model, its gRPC service on 127.0.0.1 with its faults, and
``fleetgate sandbox --scheduler-estimators``."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import grpc
import pytest

from engine.errors import QuantityError
from engine.fleet.frozen import FrozenDict
from engine.members import Fleet, JobSpec, MemberCluster, PodGroup, load_fleet
from engine.resources import Resources
from reconciler.estimatorwire import (
    MAX_AVAILABLE_REPLICAS,
    MaxAvailableReplicasRequest,
    MaxAvailableReplicasResponse,
    NodeClaim,
    ReplicaRequirements,
    decode_response,
    encode_request,
)
from sandbox.karmada.estimator import MemberEstimators, max_available_replicas
from tests.conftest import REPO
from tests.sandbox.test_sandbox_cli import PATIENCE_S, start
from tests.waiting import eventually

NOW = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
def fleet() -> Fleet:
    return Fleet(load_fleet(REPO / "examples" / "fleet.yaml"), NOW)


def asking(request: dict[str, str], selector: dict[str, str] | None = None) -> ReplicaRequirements:
    claim = NodeClaim(FrozenDict(selector)) if selector is not None else None
    return ReplicaRequirements(FrozenDict(request), claim)


# -- the answer ----------------------------------------------------------------------------------
# gpu-east: 4 nodes of {cpu: 190, memory: 1900Gi, nvidia.com/gpu: 8, pods: 110}


@pytest.mark.parametrize(
    ("request_", "per_node"),
    [
        ({"memory": "100Gi"}, 19),  # floor(1900 / 100)
        ({"memory": "100Gi", "cpu": "12"}, 15),  # the fewest over the resources: floor(190/12)
        ({"nvidia.com/gpu": "3"}, 2),
        ({"cpu": "1m"}, 110),  # capped by the free pod slots
        ({"example.com/fpga": "1"}, 0),  # a resource the nodes do not have
        ({"cpu": "0", "memory": "950Gi"}, 2),  # a zero request does not count
        ({"pods": "50", "memory": "950Gi"}, 2),  # nor does pods: every pod takes one slot
        ({}, 110),
    ],
)
def test_per_node_floor_summed(fleet: Fleet, request_: dict[str, str], per_node: int):
    assert max_available_replicas(fleet["gpu-east"], asking(request_)) == 4 * per_node


def test_what_is_bound_is_not_free(fleet: Fleet):
    member: MemberCluster = fleet["gpu-east"]
    pods = PodGroup("w", 3, Resources({"nvidia.com/gpu": 5, "cpu": 1}))
    member.submit(JobSpec("busy", (pods,), timedelta(hours=1)), NOW)
    member.step(NOW)
    # three nodes have 3 GPUs left, one has 8
    assert max_available_replicas(member, asking({"nvidia.com/gpu": "3"})) == 3 + 2
    assert max_available_replicas(member, asking({"nvidia.com/gpu": "4"})) == 2


def test_the_node_selector_picks_nodes(fleet: Fleet):
    member = fleet["gpu-east"]
    h100 = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    assert max_available_replicas(member, asking({"nvidia.com/gpu": "8"}, h100)) == 4
    a100 = {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}
    assert max_available_replicas(member, asking({"nvidia.com/gpu": "8"}, a100)) == 0
    assert max_available_replicas(fleet["gpu-west"], asking({"nvidia.com/gpu": "8"}, a100)) == 4


def test_no_requirements_count_pod_slots(fleet: Fleet):
    assert max_available_replicas(fleet["gpu-east"], None) == 440


def test_a_request_that_is_not_a_quantity_is_refused(fleet: Fleet):
    with pytest.raises(QuantityError):
        max_available_replicas(fleet["gpu-east"], asking({"cpu": "lots"}))


# -- over gRPC -----------------------------------------------------------------------------------


@pytest.fixture
def estimators(fleet: Fleet) -> Iterator[MemberEstimators]:
    with MemberEstimators({m.name: m for m in fleet}) as served:
        yield served


@pytest.fixture
def call(estimators: MemberEstimators) -> Iterator:
    channels: list[grpc.Channel] = []

    def method(cluster: str):
        channel = grpc.insecure_channel(estimators.addresses[cluster])
        channels.append(channel)
        return channel.unary_unary(
            MAX_AVAILABLE_REPLICAS,
            request_serializer=encode_request,
            response_deserializer=decode_response,
        )

    yield method
    for channel in channels:
        channel.close()


def test_each_member_answers_on_its_own_port(estimators: MemberEstimators, call):
    assert sorted(estimators.addresses) == ["cpu-spot", "gpu-east", "gpu-west"]
    assert all(a.startswith("127.0.0.1:") for a in estimators.addresses.values())
    assert len(set(estimators.addresses.values())) == 3
    request = MaxAvailableReplicasRequest("gpu-west", asking({"nvidia.com/gpu": "4"}))
    assert call("gpu-west")(request, timeout=30) == MaxAvailableReplicasResponse(8)


def test_errors_as_karmada_s_server_gives_them(estimators: MemberEstimators, call):
    with pytest.raises(grpc.RpcError) as wrong:
        call("gpu-west")(MaxAvailableReplicasRequest("gpu-east", asking({})), timeout=30)
    assert wrong.value.code() == grpc.StatusCode.UNKNOWN
    assert "cluster name does not match" in wrong.value.details()
    with pytest.raises(grpc.RpcError) as bad:
        call("gpu-west")(MaxAvailableReplicasRequest("gpu-west", asking({"cpu": "x"})), timeout=30)
    assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_a_failing_estimator_and_its_healing(estimators: MemberEstimators, call):
    request = MaxAvailableReplicasRequest("cpu-spot", asking({"cpu": "1"}))
    estimators.fail("cpu-spot", "cache not ready")
    with pytest.raises(grpc.RpcError) as failed:
        call("cpu-spot")(request, timeout=30)
    assert (failed.value.code(), failed.value.details()) == (
        grpc.StatusCode.INTERNAL,
        "cache not ready",
    )
    estimators.heal("cpu-spot")
    assert call("cpu-spot")(request, timeout=30).max_replicas > 0
    with pytest.raises(KeyError):
        estimators.hang("nowhere")


def test_a_hanging_call_answers_once_healed(estimators: MemberEstimators, call):
    estimators.hang("gpu-east")
    request = MaxAvailableReplicasRequest("gpu-east", asking({"nvidia.com/gpu": "8"}))
    pending = call("gpu-east").future(request)  # no deadline: only heal() ends it
    with pytest.raises(grpc.FutureTimeoutError):
        pending.result(timeout=0.2)  # still waiting (a bound, not an assertion on time)
    estimators.heal("gpu-east")
    assert pending.result(timeout=30) == MaxAvailableReplicasResponse(4)


def test_stopping_releases_hanging_calls(fleet: Fleet):
    served = MemberEstimators({m.name: m for m in fleet})
    served.start()
    served.hang("gpu-east")
    channel = grpc.insecure_channel(served.addresses["gpu-east"])
    try:
        method = channel.unary_unary(
            MAX_AVAILABLE_REPLICAS,
            request_serializer=encode_request,
            response_deserializer=decode_response,
        )
        pending = method.future(MaxAvailableReplicasRequest("gpu-east", asking({})))
        # the call is hanging in the server (counted as the handler starts waiting); a call
        # still on its way when the server stops is another case, left to gRPC's transport
        eventually(lambda: served.calls["gpu-east"] == 1, what="the call reaching the server")
        served.stop()
        pending.exception(timeout=30)  # ended one way or the other, without waiting on a clock
        assert pending.done()
        assert served.addresses == {}
    finally:
        channel.close()


# -- the command ---------------------------------------------------------------------------------


def test_the_sandbox_command_serves_estimators(tmp_path):
    process, lines = start(tmp_path / "kubeconfig", "--scheduler-estimators")
    try:
        line = next(x for x in lines if x.startswith("  estimators: "))
        pairs = dict(p.split("=", 1) for p in line.split(": ", 1)[1].split())
        assert sorted(pairs) == ["cpu-spot", "gpu-east", "gpu-west"]
        hint = lines[lines.index(line) + 1]
        assert f"--scheduler-estimator gpu-east={pairs['gpu-east']}" in hint
        with grpc.insecure_channel(pairs["gpu-east"]) as channel:
            method = channel.unary_unary(
                MAX_AVAILABLE_REPLICAS,
                request_serializer=encode_request,
                response_deserializer=decode_response,
            )
            request = MaxAvailableReplicasRequest("gpu-east", asking({"nvidia.com/gpu": "8"}))
            assert method(request, timeout=PATIENCE_S).max_replicas == 4
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=PATIENCE_S) == 0
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate(timeout=PATIENCE_S)
