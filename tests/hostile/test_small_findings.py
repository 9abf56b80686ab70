"""Small findings of issue 16: a placement score that fails is said, not silently 0; snapshot
documents that are not objects fleetgate can read are warnings, not silently dropped."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from engine import dryrun
from engine.cycle import run_cycle
from engine.fleet.files import read_objects
from engine.fleet.snapshot import build_snapshot
from fleetgate.cli import main
from tests.cycle import builders
from tests.cycle.test_scenarios import decision_for, load_policies
from tests.fleet.builders import as_list, cluster, custom_job, small_fleet

NODE = {"nvidia.com/gpu": 8, "cpu": 64}


def test_a_failing_score_counts_as_zero_and_is_said(tmp_path: Path) -> None:
    """``cost`` fails on east (no ``cost`` label): the job is still admitted, the score counts
    as 0 there, and the decision names the score and the cluster."""
    policies = load_policies(
        [
            {"kind": "Queue", "metadata": {"name": "q"}, "spec": {}},
            {
                "kind": "SchedulingPolicy",
                "metadata": {"name": "default"},
                "spec": {
                    "placement": {
                        "strategy": "BinPack",
                        "scores": [
                            {
                                "name": "cost",
                                "weight": 1,
                                "expression": 'double(cluster.labels["cost"])',
                            }
                        ],
                    }
                },
            },
        ],
        tmp_path,
    )
    scenario = {
        "clusters": [
            {"name": "east", "nodes": 2, "node": NODE},
            {"name": "west", "nodes": 2, "node": NODE, "labels": {"cost": "0.5"}},
        ],
        "jobs": [{"name": "a", "queue": "q", "pods": 1, "pod": {"nvidia.com/gpu": 8}, "at": 1}],
    }
    result = run_cycle(builders.snapshot(scenario), policies, builders.NOW)
    decision = decision_for(result, "a")
    assert decision is not None
    assert (decision.action, decision.reason) == ("Admit", "Admitted")
    assert [c.name for c in decision.clusters] == ["west"]  # 0.5 beats a failed (0) score
    assert "score cost failed on east (counted as 0)" in decision.message
    reasons = dict(decision.cluster_reasons)
    assert set(reasons) == {"east"}
    assert reasons["east"].startswith("score cost failed: ")
    assert "cost" in reasons["east"].removeprefix("score cost failed: ")  # the CEL error
    explained = dryrun.explain(result, decision)
    assert "score cost failed: " in explained


def test_a_failing_score_everywhere_still_admits(tmp_path: Path) -> None:
    policies = load_policies(
        [
            {"kind": "Queue", "metadata": {"name": "q"}, "spec": {}},
            {
                "kind": "SchedulingPolicy",
                "metadata": {"name": "default"},
                "spec": {
                    "placement": {
                        "scores": [
                            {
                                "name": "cost",
                                "weight": 3,
                                "expression": 'double(cluster.labels["cost"])',
                            }
                        ]
                    }
                },
            },
        ],
        tmp_path,
    )
    scenario = {
        "clusters": [{"name": n, "nodes": 1, "node": NODE} for n in ("east", "west")],
        "jobs": [
            {"name": "a", "queue": "q", "pods": 1, "pod": {"nvidia.com/gpu": 8}, "at": 1},
            {"name": "b", "queue": "q", "pods": 1, "pod": {"nvidia.com/gpu": 8}, "at": 2},
        ],
    }
    result = run_cycle(builders.snapshot(scenario), policies, builders.NOW)
    for name in ("a", "b"):
        decision = decision_for(result, name)
        assert decision is not None and decision.action == "Admit", decision
        assert "score cost failed on" in decision.message
        assert all(why.startswith("score cost") for _, why in decision.cluster_reasons)


def test_dry_run_warns_of_a_list_without_items_and_an_object_without_kind(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    snapshot = tmp_path / "fleet.yaml"
    documents = [
        *small_fleet(),
        {"apiVersion": "v1", "kind": "List", "metadata": {"name": "broken"}, "items": {}},
        {"apiVersion": "v1", "metadata": {"name": "nameless-kind"}},
        as_list([{"metadata": {"name": "item-without-kind"}}, cluster("extra")]),
    ]
    snapshot.write_text(yaml.safe_dump_all(documents))
    policies = Path(__file__).parents[2] / "policies"
    code = main(["dry-run", "--policies", str(policies), "--snapshot", str(snapshot)])
    out, err = capsys.readouterr()
    assert code == 0, err
    warnings = [line for line in out.splitlines() if line.startswith("warning: ")]
    assert warnings == [
        f"warning: {snapshot}: <no kind>/nameless-kind: kind: required; left out",
        f"warning: {snapshot}: List/<unnamed>: items[0].kind: "
        "required; <no kind>/item-without-kind left out",
        f"warning: {snapshot}: List/broken: items: expected a list, got an object; "
        "the List is left out",
    ]
    assert "sweep" in out  # the rest of the snapshot is still read and decided
    objects, problems = read_objects([snapshot])
    assert problems == []
    assert "extra" in [c.name for c in build_snapshot(objects).clusters]


def test_with_job_files_the_snapshot_warnings_are_still_printed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    snapshot = tmp_path / "fleet.yaml"
    fleet = [d for d in small_fleet() if d["metadata"]["name"] != "sweep"]
    broken = {"apiVersion": "v1", "kind": "List", "metadata": {"name": "broken"}, "items": 3}
    snapshot.write_text(yaml.safe_dump_all([*fleet, broken]))
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump_all([custom_job("sweep"), {"metadata": {"name": "kindless"}}]))
    policies = Path(__file__).parents[2] / "policies"
    code = main(
        ["dry-run", "--policies", str(policies), "--snapshot", str(snapshot), "--job", str(job)]
    )
    out, err = capsys.readouterr()
    assert code == 1  # a --job template that cannot be decided
    assert f"warning: {snapshot}: List/broken: items: expected a list, got a number" in out
    assert f"error: {job}: <no kind>/kindless: kind: required; left out" in err
