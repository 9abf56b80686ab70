"""Pod requests by the Kubernetes rules: containers, init and sidecars, limits, overhead."""

from __future__ import annotations

from fractions import Fraction

import pytest

from engine.resources import Resources
from engine.workloads.model import DemandError
from engine.workloads.pods import pod_requests

GI = 2**30


def c(name="c", requests=None, limits=None, restart=None):
    container = {"name": name, "resources": {}}
    if requests:
        container["resources"]["requests"] = requests
    if limits:
        container["resources"]["limits"] = limits
    if restart:
        container["restartPolicy"] = restart
    return container


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"containers": [c(requests={"cpu": "1", "memory": "1Gi"})]}, {"cpu": 1, "memory": GI}),
        (
            {"containers": [c(requests={"cpu": "500m"}), c(requests={"cpu": "250m"})]},
            {"cpu": 0.75},
        ),
        ({"containers": [c(limits={"nvidia.com/gpu": 8})]}, {"nvidia.com/gpu": 8}),
        (
            {"containers": [c(requests={"cpu": "1"}, limits={"cpu": "4", "memory": "2Gi"})]},
            {"cpu": 1, "memory": 2 * GI},
        ),
        ({"containers": [c()]}, {}),
        ({"containers": [{"name": "bare"}]}, {}),
        (
            {
                "initContainers": [c(requests={"cpu": "4", "memory": "1Gi"})],
                "containers": [c(requests={"cpu": "1", "memory": "2Gi"})],
            },
            {"cpu": 4, "memory": 2 * GI},
        ),
        (
            {
                "initContainers": [c(requests={"cpu": "500m"}, restart="Always")],
                "containers": [c(requests={"cpu": "1"})],
            },
            {"cpu": 1.5},
        ),
        (
            {
                "initContainers": [
                    c("side", requests={"cpu": "1"}, restart="Always"),
                    c("setup", requests={"cpu": "3"}),
                ],
                "containers": [c(requests={"cpu": "1"})],
            },
            {"cpu": 4},
        ),
        (
            {
                "initContainers": [
                    c("setup", requests={"cpu": "3"}),
                    c("side", requests={"cpu": "1"}, restart="Always"),
                ],
                "containers": [c(requests={"cpu": "1"})],
            },
            {"cpu": 3},
        ),
        (
            {
                "containers": [c(requests={"cpu": "1"})],
                "overhead": {"cpu": "250m", "memory": "120Mi"},
            },
            {"cpu": 1.25, "memory": 120 * 2**20},
        ),
        (
            {"containers": [c(requests={"memory": "128M", "ephemeral-storage": "10Gi"})]},
            {"memory": 128_000_000, "ephemeral-storage": 10 * GI},
        ),
        (
            {"containers": [c(requests={"kubernetes.io/batch-cpu": "2k"})]},
            {"kubernetes.io/batch-cpu": 2000},
        ),
    ],
    ids=[
        "one container",
        "containers add up",
        "a GPU given only as a limit is requested",
        "a limit fills only the resources without a request",
        "no requests at all",
        "no resources field",
        "an init container above the app containers sets the peak",
        "a sidecar runs beside the app containers",
        "an init container after a sidecar runs beside it",
        "an init container before a sidecar runs alone",
        "pod overhead is added",
        "decimal M and binary Gi",
        "batch resources count like any other",
    ],
)
def test_pod_requests(spec, expected):
    assert pod_requests(spec, "spec") == Resources(
        {k: Fraction(str(v)) for k, v in expected.items()}
    )


@pytest.mark.parametrize(
    ("spec", "path"),
    [
        ({"containers": [c(requests={"cpu": "2x"})]}, "spec.containers[0].resources.requests.cpu"),
        (
            {"containers": [c(limits={"nvidia.com/gpu": "eight"})]},
            'spec.containers[0].resources.limits["nvidia.com/gpu"]',
        ),
        ({"containers": {"name": "x"}}, "spec.containers"),
        ({"containers": [c(), "oops"]}, "spec.containers[1]"),
        ({"containers": [c(requests={"cpu": "-1"})]}, "spec.containers[0].resources.requests.cpu"),
        (
            {"containers": [c(limits={"nvidia.com/gpu": -1})]},
            'spec.containers[0].resources.limits["nvidia.com/gpu"]',
        ),
        ({"containers": []}, "spec.containers"),
        ({}, "spec.containers"),
        ("not a pod", "spec"),
    ],
    ids=[
        "a malformed quantity",
        "a malformed extended resource",
        "containers not a list",
        "a container that is not an object",
        "a negative request",
        "a negative extended resource",
        "no containers",
        "no containers field",
        "a spec that is not an object",
    ],
)
def test_errors_name_the_field(spec, path):
    with pytest.raises(DemandError) as info:
        pod_requests(spec, "spec")
    assert info.value.path == path
