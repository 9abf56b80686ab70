"""Node shapes the resource models cannot see whole are said where people look:
``fleetgate validate --fleet``, ``inspect`` of Cluster objects and ``dry-run --explain``; the
dry-run table counts ``NeverFits`` rejections apart from pending jobs."""

from __future__ import annotations

import datetime as dt
import json
import textwrap

import pytest
import yaml

from engine import annotations as ann
from engine import dryrun
from engine.cycle.model import CycleResult, Decision
from engine.cycle.reasons import Action, Reason
from fleetgate.cli import main
from tests.conftest import REPO

EXAMPLE = REPO / "examples" / "node-shape"
WARNING = (
    "cluster gpu-east: an empty node of 8 nvidia.com/gpu, 96 cpu, 768Gi memory is promised only "
    "64 cpu, 512Gi memory by its resource models (grade 7): whole-node pods are at best a "
    "maybe; see docs/node-shape.md"
)


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_validate_fleet_warns_and_stays_valid(capsys):
    code, out, _ = run(capsys, "validate", "--fleet", EXAMPLE / "fleet.yaml")
    assert code == 0
    assert out.splitlines() == [
        f"valid: fleet {EXAMPLE / 'fleet.yaml'}: 2 cluster(s)",
        f"warning: {WARNING}",
    ]


def test_validate_fleet_with_policies_as_json(capsys):
    code, out, _ = run(
        capsys, "validate", REPO / "policies", "--fleet", EXAMPLE / "fleet.yaml", "-o", "json"
    )
    printed = json.loads(out)
    assert code == 0 and printed["valid"] is True
    assert printed["queues"] == 6  # the policy summary as before
    assert printed["fleet"]["clusters"] == ["gpu-east", "gpu-west"]
    assert printed["fleet"]["warnings"] == [WARNING]


def test_validate_fleet_names_file_line_cluster_and_field(capsys, tmp_path):
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(
        textwrap.dedent(
            """\
            clusters:
            - name: gpu-east
              nodes: [{shape: {cpu: 96}}]
              resourceModels: Karmada
            """
        )
    )
    code, out, err = run(capsys, "validate", "--fleet", fleet)
    assert code == 1
    assert out == (
        f"{fleet}:4:19: Cluster/gpu-east: resourceModels: expected a list of grades or "
        "'KarmadaDefaults', got 'Karmada'\n"
    )
    assert err == "1 error(s); nothing was applied\n"


def test_validate_needs_a_path_or_a_fleet(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["validate"])
    assert stop.value.code == 2
    assert "give a PATH, --fleet FILE, or both" in capsys.readouterr().err


def test_inspect_warns_of_a_cluster_that_cannot_see_its_nodes(capsys):
    code, out, _ = run(capsys, "inspect", EXAMPLE / "snapshot.yaml", "-o", "json")
    printed = json.loads(out)
    assert code == 0
    assert printed["warnings"] == [WARNING]
    assert [w["name"] for w in printed["workloads"]] == ["whole-node-pretrain", "two-node-pods"]
    code, out, _ = run(capsys, "inspect", EXAMPLE / "snapshot.yaml")
    assert out.splitlines()[-1] == f"warning: {WARNING}"


def test_inspect_reports_a_cluster_it_cannot_read(capsys, tmp_path):
    items = yaml.safe_load((EXAMPLE / "snapshot.yaml").read_text())["items"]
    cluster = next(i for i in items if i["kind"] == "Cluster")
    cluster["metadata"]["annotations"][ann.NODE_SHAPES] = "[{"
    broken = tmp_path / "cluster.yaml"
    broken.write_text(yaml.safe_dump(cluster))
    code, out, _ = run(capsys, "inspect", broken, "-o", "json")
    assert code == 1
    (error,) = json.loads(out)["errors"]
    assert error["object"] == "Cluster/gpu-east"
    assert error["path"] == f"metadata.annotations[{ann.NODE_SHAPES}]"


def test_the_explanation_ends_with_a_warning_per_cluster(capsys):
    code, out, _ = run(
        capsys,
        "dry-run",
        "--policies",
        EXAMPLE / "conservative",
        "--snapshot",
        EXAMPLE / "snapshot.yaml",
        "--now",
        "2025-03-10T09:00:00Z",
        "--explain",
        "training/whole-node-pretrain",
    )
    assert code == 0
    assert out.splitlines()[0].startswith("PyTorchJob/training/whole-node-pretrain")
    assert out.splitlines()[-1] == f"warning: {WARNING}"


def decision(name: str, action: Action, reason: Reason) -> Decision:
    return Decision(f"ns/{name}-job", f"Job/ns/{name}", "q", "t", 0, action, reason, "why")


def test_the_table_counts_never_fits_apart_from_pending():
    now = dt.datetime(2025, 3, 10, 9, tzinfo=dt.UTC)
    result = CycleResult(
        "v1",
        now,
        (
            decision("a", Action.REJECT, Reason.NEVER_FITS),
            decision("b", Action.REJECT, Reason.NEVER_FITS),
            decision("c", Action.REJECT, Reason.GANG_TOO_LARGE),
            decision("d", Action.PENDING, Reason.NO_CLUSTER_FITS),
        ),
        (),
    )
    lines = dryrun.table(result).splitlines()
    assert (
        "never fits: 2 job(s) rejected (NeverFits: a pod is larger than every node of the "
        "clusters it may use), not counted as pending"
    ) in lines
    without = CycleResult("v1", now, (decision("d", Action.PENDING, Reason.NO_CLUSTER_FITS),), ())
    assert not any(line.startswith("never fits") for line in dryrun.table(without).splitlines())
