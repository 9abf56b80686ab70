"""Karmada's default replica interpreter (engine.fleet.interpreter), as its Go code computes it."""

from __future__ import annotations

from typing import Any

import pytest

from engine.fleet.interpreter import (
    format_binary,
    format_decimal,
    interpret_replicas,
    is_scalar_resource,
)
from engine.workloads.model import DemandError


def container(requests: dict[str, str] | None = None, limits: dict[str, str] | None = None):
    resources: dict[str, Any] = {}
    if requests:
        resources["requests"] = requests
    if limits:
        resources["limits"] = limits
    return {"name": "c", "image": "busybox", "resources": resources}


def pod_spec(*containers: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"containers": list(containers), **extra}


def deployment(spec: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"template": {"spec": spec}, **fields},
    }


def batch_job(**fields: Any) -> dict[str, Any]:
    spec = pod_spec(container({"cpu": "1"}))
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j", "namespace": "default"},
        "spec": {"template": {"spec": spec}, **fields},
    }


def test_limits_default_requests_containers_add_up_init_containers_raise_overhead_adds():
    spec = pod_spec(
        container({"cpu": "500m", "memory": "1Gi"}, {"nvidia.com/gpu": "8"}),
        container({"cpu": "1", "memory": "512Mi"}),
        initContainers=[container({"cpu": "4", "memory": "64Mi"})],
        overhead={"memory": "128Mi"},
    )
    replicas, requirements = interpret_replicas(deployment(spec, replicas=3))
    assert replicas == 3
    assert requirements == {
        "resourceRequest": {"cpu": "4", "memory": "1664Mi", "nvidia.com/gpu": "8"},
    }


def test_absent_replicas_take_the_api_server_default():
    replicas, _ = interpret_replicas(deployment(pod_spec(container({"cpu": "1"}))))
    assert replicas == 1


@pytest.mark.parametrize(
    ("fields", "want"),
    [({}, 1), ({"parallelism": 4}, 4), ({"parallelism": 4, "completions": 2}, 2)],
)
def test_a_job_runs_parallelism_pods_capped_by_completions(fields: dict[str, int], want: int):
    replicas, _ = interpret_replicas(batch_job(**fields))
    assert replicas == want


def test_a_pod_is_one_replica():
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}
    pod["spec"] = pod_spec(container({"cpu": "250m"}))
    assert interpret_replicas(pod) == (1, {"resourceRequest": {"cpu": "250m"}})


def test_node_claim_carries_selector_tolerations_and_required_affinity():
    required = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}]}
    toleration = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    spec = pod_spec(
        container(),
        nodeSelector={"pool": "a100"},
        tolerations=[toleration],
        affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}},
    )
    _, requirements = interpret_replicas(deployment(spec))
    assert requirements == {
        "nodeClaim": {
            "hardNodeAffinity": required,
            "nodeSelector": {"pool": "a100"},
            "tolerations": [toleration],
        }
    }


def test_a_pod_that_asks_for_nothing_has_no_requirements():
    assert interpret_replicas(deployment(pod_spec(container()))) == (1, None)


def test_kinds_without_a_native_interpreter_get_nothing():
    assert interpret_replicas({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob"}) is None
    assert interpret_replicas({"apiVersion": "apps/v1beta1", "kind": "Deployment"}) is None


def test_rounding_and_dropped_names():
    spec = pod_spec(container({"cpu": "100.5m", "memory": "1.5", "storage": "1Gi", "x": "1"}))
    _, requirements = interpret_replicas(deployment(spec))
    assert requirements == {"resourceRequest": {"cpu": "101m", "memory": "2"}}


def test_a_malformed_field_is_named():
    with pytest.raises(DemandError, match=r"spec.template.spec.containers\[0\].resources"):
        interpret_replicas(deployment(pod_spec(container({"cpu": "lots"}))))
    with pytest.raises(DemandError, match=r"spec\.replicas"):
        interpret_replicas(deployment(pod_spec(container()), replicas="3"))


@pytest.mark.parametrize(
    ("name", "scalar"),
    [
        ("nvidia.com/gpu", True),
        ("kubernetes.io/batch-cpu", True),
        ("hugepages-2Mi", True),
        ("attachable-volumes-aws-ebs", True),
        ("requests.nvidia.com/gpu", False),
        ("storage", False),
        ("cpu", False),
    ],
)
def test_scalar_resource_names(name: str, scalar: bool):
    assert is_scalar_resource(name) is scalar


@pytest.mark.parametrize(
    ("value", "exponent", "text"),
    [
        (1500, -3, "1500m"),
        (2000, -3, "2"),
        (48000, -3, "48"),
        (2_000_000, -3, "2k"),
        (8, 0, "8"),
        (1000, 0, "1k"),
        (1500, 0, "1500"),
        (100, -3, "100m"),
    ],
)
def test_decimal_quantities_print_as_go_does(value: int, exponent: int, text: str):
    assert format_decimal(value, exponent) == text


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (640 * 2**30, "640Gi"),
        (1536 * 2**20, "1536Mi"),
        (1_000_000_000, "1000000000"),
        (1000, "1k"),
        (2, "2"),
        (2**60 * 2, "2Ei"),
    ],
)
def test_binary_quantities_print_as_go_does(value: int, text: str):
    assert format_binary(value) == text
