"""Fleet files: the example reads; every problem names its file, line, cluster and field."""

from __future__ import annotations

import datetime as dt
import textwrap
from fractions import Fraction
from pathlib import Path

import pytest

from engine.members import FleetFileError, load_fleet, parse_duration
from engine.members.fleetfile import parse_fleet
from engine.workloads.registry import known_kinds
from tests.conftest import REPO


def errors(text: str) -> list[str]:
    with pytest.raises(FleetFileError) as caught:
        parse_fleet(Path("fleet.yaml"), textwrap.dedent(text))
    return [str(issue) for issue in caught.value.issues]


def test_the_example_fleet():
    fleet = load_fleet(REPO / "examples" / "fleet.yaml")
    assert [c.name for c in fleet.clusters] == ["gpu-east", "gpu-west", "cpu-spot"]
    assert (fleet.job_duration, fleet.status_period) == (
        dt.timedelta(minutes=10),
        dt.timedelta(seconds=10),
    )
    east = fleet.clusters[0]
    assert (east.provider, east.region, east.zones) == ("aws", "us-east-1", ("us-east-1a",))
    assert ("ray.io/v1", "RayJob") in east.kinds
    [group] = east.nodes
    assert group.count == 4
    assert group.allocatable["memory"] == 1900 * 2**30
    assert group.allocatable["nvidia.com/gpu"] == 8
    assert group.allocatable["pods"] == 110
    spot = fleet.clusters[2]
    assert spot.nodes[0].allocatable["kubernetes.io/batch-cpu"] == Fraction(40_000)
    assert spot.taints[0].key == "fleetgate.io/capacity-type"


def test_kinds_default_to_every_kind_fleetgate_reads():
    fleet = parse_fleet(
        Path("f.yaml"), "clusters:\n- name: a\n  nodes: [{count: 1, shape: {cpu: 4}}]\n"
    )
    assert list(fleet.clusters[0].kinds) == known_kinds()


def test_every_problem_names_file_line_cluster_and_field():
    found = errors(
        """\
        defaults:
          jobDuration: soon
        clusters:
        - name: gpu-east
          region: 7
          kinds: [PyTorchJob]
          nodes:
          - count: 0
            shape: {cpu: 96, memory: lots}
          colour: blue
        - name: gpu-east
          taints: [{key: k, effect: Sometimes}]
          nodes: [{shape: {cpu: 1}}]
        - region: x
        """
    )
    assert found == [
        "fleet.yaml:2:16: defaults.jobDuration: 'soon' is not a duration (like 90s, 10m, 1h30m)",
        "fleet.yaml:5:11: Cluster/gpu-east: region: expected a string, got a number",
        "fleet.yaml:6:11: Cluster/gpu-east: kinds[0]: 'PyTorchJob' is not apiVersion/Kind "
        "(like batch/v1/Job)",
        "fleet.yaml:8:12: Cluster/gpu-east: nodes[0].count: expected a whole number of nodes "
        "≥ 1, got 0",
        "fleet.yaml:9:30: Cluster/gpu-east: nodes[0].shape.memory: 'lots' is not a quantity: "
        "expected a number with an optional suffix (n u m k M G T P E, Ki Mi Gi Ti Pi Ei, or "
        "an exponent like e3)",
        "fleet.yaml:10:3: Cluster/gpu-east: colour: unknown field; known: name, labels, region, "
        "provider, zones, kinds, taints, nodes, resourceModels, apiEndpoint, kubernetesVersion",
        "fleet.yaml:11:9: Cluster/gpu-east: name: another cluster is named 'gpu-east'",
        "fleet.yaml:12:29: Cluster/gpu-east: taints[0].effect: expected one of NoSchedule, "
        "PreferNoSchedule, NoExecute",
        "fleet.yaml:14:3: clusters[2].name: required",
        "fleet.yaml:14:3: clusters[2].nodes: required",
    ]


def test_yaml_syntax_and_missing_files_are_issues_too():
    assert errors("clusters: [\n")[0].startswith("fleet.yaml:2:1: YAML syntax:")
    with pytest.raises(FleetFileError) as caught:
        load_fleet("/nonexistent/fleet.yaml")
    assert str(caught.value) == "/nonexistent/fleet.yaml: no such file or directory"


def test_resource_models_can_be_given():
    fleet = parse_fleet(
        Path("f.yaml"),
        textwrap.dedent(
            """\
            clusters:
            - name: a
              nodes: [{shape: {cpu: 4}}]
              resourceModels:
              - {grade: 1, ranges: [{name: cpu, min: 2, max: 100}]}
              - {grade: 0, ranges: [{name: cpu, min: 0, max: 2}]}
            """
        ),
    )
    assert [m.grade for m in fleet.clusters[0].resource_models] == [0, 1]


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("10m", 600), ("1h30m", 5400), ("90s", 90), ("500ms", 0.5), (30, 30), ("1.5h", 5400)],
)
def test_durations(text: object, seconds: float):
    assert parse_duration(text) == dt.timedelta(seconds=seconds)


@pytest.mark.parametrize("text", ["", "10", "ten minutes", "-5m", True, -1, "5d"])
def test_not_durations(text: object):
    assert parse_duration(text) is None
