"""affinity_allows, tolerates, free and serves: Karmada's and Kubernetes' rules, as tables."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from engine.fleet.clusters import read_cluster
from engine.fleet.model import Taint, Toleration, affinity_allows, tolerates
from engine.fleet.propagation import read_affinity
from engine.workloads.model import DemandError

from .builders import cluster

EAST = read_cluster(
    cluster(
        "gpu-east",
        gpus=32,
        labels={"gpu.fleetgate.io/model": "h100", "tier": "gold"},
        provider="aws",
        region="us-east-1",
        zones=("us-east-1a", "us-east-1b"),
    )
)
NO_ZONES = read_cluster(cluster("edge", provider="", region="", zones=()))

AFFINITY_CASES: list[tuple[str, dict[str, Any], Any, bool]] = [
    ("an empty affinity allows every cluster", {}, EAST, True),
    ("a listed name is allowed", {"clusterNames": ["gpu-west", "gpu-east"]}, EAST, True),
    ("an unlisted name is refused", {"clusterNames": ["gpu-west"]}, EAST, False),
    (
        "exclude wins over clusterNames",
        {"clusterNames": ["gpu-east"], "exclude": ["gpu-east"]},
        EAST,
        False,
    ),
    ("exclude of another cluster allows", {"exclude": ["gpu-west"]}, EAST, True),
    ("matchLabels equal", {"labelSelector": {"matchLabels": {"tier": "gold"}}}, EAST, True),
    ("matchLabels differ", {"labelSelector": {"matchLabels": {"tier": "silver"}}}, EAST, False),
    ("matchLabels on a missing label", {"labelSelector": {"matchLabels": {"x": "1"}}}, EAST, False),
    ("an empty labelSelector matches all", {"labelSelector": {}}, EAST, True),
    (
        "In with the value",
        {
            "labelSelector": {
                "matchExpressions": [{"key": "tier", "operator": "In", "values": ["gold", "x"]}]
            }
        },
        EAST,
        True,
    ),
    (
        "In on a missing label",
        {"labelSelector": {"matchExpressions": [{"key": "zz", "operator": "In", "values": ["a"]}]}},
        EAST,
        False,
    ),
    (
        "NotIn with the value",
        {
            "labelSelector": {
                "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["gold"]}]
            }
        },
        EAST,
        False,
    ),
    (
        "NotIn on a missing label",
        {
            "labelSelector": {
                "matchExpressions": [{"key": "zz", "operator": "NotIn", "values": ["a"]}]
            }
        },
        EAST,
        True,
    ),
    (
        "Exists",
        {
            "labelSelector": {
                "matchExpressions": [{"key": "gpu.fleetgate.io/model", "operator": "Exists"}]
            }
        },
        EAST,
        True,
    ),
    (
        "Exists on a missing label",
        {"labelSelector": {"matchExpressions": [{"key": "zz", "operator": "Exists"}]}},
        EAST,
        False,
    ),
    (
        "DoesNotExist on a present label",
        {"labelSelector": {"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}},
        EAST,
        False,
    ),
    (
        "DoesNotExist on a missing label",
        {"labelSelector": {"matchExpressions": [{"key": "zz", "operator": "DoesNotExist"}]}},
        EAST,
        True,
    ),
    (
        "labels and names must both match",
        {"clusterNames": ["gpu-east"], "labelSelector": {"matchLabels": {"tier": "silver"}}},
        EAST,
        False,
    ),
    (
        "provider In",
        {
            "fieldSelector": {
                "matchExpressions": [{"key": "provider", "operator": "In", "values": ["aws"]}]
            }
        },
        EAST,
        True,
    ),
    (
        "provider NotIn",
        {
            "fieldSelector": {
                "matchExpressions": [{"key": "provider", "operator": "NotIn", "values": ["aws"]}]
            }
        },
        EAST,
        False,
    ),
    (
        "region In another region",
        {
            "fieldSelector": {
                "matchExpressions": [{"key": "region", "operator": "In", "values": ["eu-west-1"]}]
            }
        },
        EAST,
        False,
    ),
    (
        "region In on a cluster without region",
        {
            "fieldSelector": {
                "matchExpressions": [{"key": "region", "operator": "In", "values": ["us-east-1"]}]
            }
        },
        NO_ZONES,
        False,
    ),
    (
        "region NotIn on a cluster without region",
        {
            "fieldSelector": {
                "matchExpressions": [
                    {"key": "region", "operator": "NotIn", "values": ["us-east-1"]}
                ]
            }
        },
        NO_ZONES,
        True,
    ),
    (
        "zone In needs every zone of the cluster listed",
        {
            "fieldSelector": {
                "matchExpressions": [{"key": "zone", "operator": "In", "values": ["us-east-1a"]}]
            }
        },
        EAST,
        False,
    ),
    (
        "zone In with all zones listed",
        {
            "fieldSelector": {
                "matchExpressions": [
                    {"key": "zone", "operator": "In", "values": ["us-east-1a", "us-east-1b", "x"]}
                ]
            }
        },
        EAST,
        True,
    ),
    (
        "zone In on a cluster without zones",
        {
            "fieldSelector": {
                "matchExpressions": [{"key": "zone", "operator": "In", "values": ["us-east-1a"]}]
            }
        },
        NO_ZONES,
        False,
    ),
    (
        "zone NotIn with one zone listed",
        {
            "fieldSelector": {
                "matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["us-east-1b"]}]
            }
        },
        EAST,
        False,
    ),
    (
        "zone NotIn on a cluster without zones",
        {
            "fieldSelector": {
                "matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["a"]}]
            }
        },
        NO_ZONES,
        True,
    ),
    ("an empty fieldSelector filters nothing", {"fieldSelector": {}}, EAST, True),
    (
        "field expressions are ANDed",
        {
            "fieldSelector": {
                "matchExpressions": [
                    {"key": "provider", "operator": "In", "values": ["aws"]},
                    {"key": "region", "operator": "In", "values": ["x"]},
                ]
            }
        },
        EAST,
        False,
    ),
]


@pytest.mark.parametrize(
    ("raw", "target", "allowed"),
    [pytest.param(raw, target, allowed, id=desc) for desc, raw, target, allowed in AFFINITY_CASES],
)
def test_affinity_allows(raw: dict[str, Any], target: Any, allowed: bool) -> None:
    assert affinity_allows(read_affinity(raw, "a"), target) is allowed


def test_no_affinity_allows_everything() -> None:
    assert affinity_allows(None, EAST)


@pytest.mark.parametrize(
    ("raw", "path"),
    [
        pytest.param(
            {
                "fieldSelector": {
                    "matchExpressions": [{"key": "name", "operator": "In", "values": ["a"]}]
                }
            },
            "a.fieldSelector.matchExpressions[0].key",
            id="a field other than provider region zone",
        ),
        pytest.param(
            {
                "labelSelector": {
                    "matchExpressions": [{"key": "k", "operator": "Like", "values": ["a"]}]
                }
            },
            "a.labelSelector.matchExpressions[0].operator",
            id="an unknown operator",
        ),
        pytest.param(
            {"labelSelector": {"matchExpressions": [{"key": "k", "operator": "In"}]}},
            "a.labelSelector.matchExpressions[0].values",
            id="In without values",
        ),
        pytest.param({"clusterNames": "gpu-east"}, "a.clusterNames", id="clusterNames not a list"),
    ],
)
def test_malformed_affinity_names_the_field(raw: dict[str, Any], path: str) -> None:
    with pytest.raises(DemandError) as info:
        read_affinity(raw, "a")
    assert info.value.path == path


GPU_TAINT = Taint("nvidia.com/gpu", "present", "NoSchedule")
SPOT = Taint("capacity", "spot", "NoExecute")
SOFT = Taint("maintenance", "soon", "PreferNoSchedule")

TOLERATION_CASES = [
    ("no taints need nothing", [], [], True),
    ("an untolerated NoSchedule taint blocks", [], [GPU_TAINT], False),
    ("an untolerated NoExecute taint blocks", [], [SPOT], False),
    ("PreferNoSchedule never blocks", [], [SOFT], True),
    (
        "Equal with key, value and effect",
        [Toleration("nvidia.com/gpu", "Equal", "present", "NoSchedule")],
        [GPU_TAINT],
        True,
    ),
    (
        "an empty operator means Equal",
        [Toleration("nvidia.com/gpu", "", "present")],
        [GPU_TAINT],
        True,
    ),
    (
        "Equal with another value",
        [Toleration("nvidia.com/gpu", "Equal", "absent")],
        [GPU_TAINT],
        False,
    ),
    ("Exists ignores the value", [Toleration("nvidia.com/gpu", "Exists")], [GPU_TAINT], True),
    ("an empty effect matches every effect", [Toleration("capacity", "Exists")], [SPOT], True),
    (
        "another effect does not match",
        [Toleration("capacity", "Exists", effect="NoSchedule")],
        [SPOT],
        False,
    ),
    (
        "an empty key with Exists tolerates everything",
        [Toleration("", "Exists")],
        [GPU_TAINT, SPOT],
        True,
    ),
    (
        "every blocking taint needs a toleration",
        [Toleration("nvidia.com/gpu", "Exists")],
        [GPU_TAINT, SPOT],
        False,
    ),
    ("feature-gated Gt tolerates nothing here", [Toleration("capacity", "Gt", "1")], [SPOT], False),
]


@pytest.mark.parametrize(
    ("tolerations", "taints", "ok"),
    [pytest.param(t, ts, ok, id=desc) for desc, t, ts, ok in TOLERATION_CASES],
)
def test_tolerates(tolerations: list[Toleration], taints: list[Taint], ok: bool) -> None:
    assert tolerates(tolerations, taints) is ok


def test_free_subtracts_allocated_and_allocating_and_floors_at_zero() -> None:
    view = read_cluster(
        cluster(
            "c",
            gpus=32,
            cpu="100",
            memory="1Ti",
            used={"nvidia.com/gpu": "24", "cpu": "90500m", "memory": "2Ti"},
            pending={"cpu": "10", "nvidia.com/gpu": "2", "example.com/fpga": "1"},
        )
    )
    assert view.free.get_amount("nvidia.com/gpu") == 6
    assert view.free.get_amount("cpu") == 0  # 100 − 90.5 − 10 < 0
    assert view.free.get_amount("memory") == 0
    assert view.free.get_amount("pods") == 440
    assert "example.com/fpga" not in view.free  # nothing allocatable, nothing free
    assert view.free.get_amount("cpu") == Fraction(0)


SERVES_CASES = [
    (
        "a listed kind is served",
        {"kubeflow.org/v1": ["PyTorchJob"]},
        "kubeflow.org/v1",
        "PyTorchJob",
        True,
    ),
    (
        "another version of the group is not",
        {"kubeflow.org/v1": ["MPIJob"]},
        "kubeflow.org/v2beta1",
        "MPIJob",
        False,
    ),
    (
        "a missing kind is not served",
        {"kubeflow.org/v1": ["PyTorchJob"]},
        "ray.io/v1",
        "RayJob",
        False,
    ),
    ("core kinds use groupVersion v1", {"v1": ["Pod"]}, "v1", "Pod", True),
    ("no apiEnablements reported serves everything", None, "ray.io/v1", "RayJob", True),
]


@pytest.mark.parametrize(
    ("apis", "api_version", "kind", "served"),
    [pytest.param(a, v, k, s, id=desc) for desc, a, v, k, s in SERVES_CASES],
)
def test_serves(apis: Any, api_version: str, kind: str, served: bool) -> None:
    assert read_cluster(cluster("c", apis=apis)).serves(api_version, kind) is served
