"""``fleetgate simulate`` end to end: JSON summaries with --compare baseline, --report, and
input errors that exit 1 naming their place."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fleetgate.cli import main

REPO = Path(__file__).resolve().parents[2]


def test_compare_baseline_prints_both_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "report"
    code = main([
        "simulate", "--policies", str(REPO / "policies"),
        "--fleet", str(REPO / "examples/fleet.yaml"),
        "--trace", str(REPO / "examples/traces/pipeline.csv"), "--compare", "baseline",
        "--report", str(out), "-o", "json", "--until", "3h", "--interval", "30",
    ])  # fmt: skip
    assert code == 0
    runs = json.loads(capsys.readouterr().out)
    assert [r["label"] for r in runs] == ["head", "baseline"]
    for run in runs:
        assert run["until_s"] == 3 * 3600 and run["jobs"]["total"] == 30
        assert set(run["stages"]) == {"prep", "train", "eval", "report"}
    summary = json.loads((out / "summary.json").read_text())
    assert [r["label"] for r in summary["runs"]] == ["head", "baseline"]
    assert (out / "report.html").is_file() and (out / "jobs.csv").is_file()


def test_table_output_is_one_screen(capsys: pytest.CaptureFixture[str]) -> None:
    code = main([
        "simulate", "--policies", str(REPO / "policies"),
        "--trace", str(REPO / "examples/traces/small.csv"), "--no-progress", "--until", "0.25d",
    ])  # fmt: skip
    assert code == 0
    text = capsys.readouterr().out
    assert "fleetgate simulate" in text and "research-training" in text
    assert len(text.splitlines()) <= 45


def test_bad_inputs_exit_1_with_every_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("name,submit,duration,gpus\na,0,ten,1\n", encoding="utf-8")
    code = main([
        "simulate", "--policies", str(tmp_path / "missing"), "--trace", str(trace),
        "--fleet", str(REPO / "examples/fleet.yaml"),
    ])  # fmt: skip
    assert code == 1
    err = capsys.readouterr().err
    assert f"{trace}:2:3: column 'duration' (duration): 'ten' is not a number" in err
    assert "missing" in err  # the policy directory that is not there


def test_philly_style_example_with_a_column_mapping(capsys: pytest.CaptureFixture[str]) -> None:
    code = main([
        "simulate", "--policies", str(REPO / "examples/traces/philly-policies"),
        "--trace", str(REPO / "examples/traces/philly-style.csv"), "-o", "json",
        "--columns", "name=jobid,queue=vc,tenant=user,submit=submitted_time,start=start_time,"
        "end=end_time,gpus=num_gpu",
        "--skip-bad-rows",
    ])  # fmt: skip
    assert code == 0
    captured = capsys.readouterr()
    (run,) = json.loads(captured.out)
    assert run["jobs"]["total"] == 200 and run["jobs"]["succeeded"] == 200
    assert set(run["queues"]) == {"vc-6214e9", "vc-b436b2", "vc-ee9e8c"}
    assert "philly-style.csv:202:6: column 'start_time' (start)" in captured.err


def test_a_fault_on_an_unknown_cluster_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    faults = tmp_path / "faults.csv"
    faults.write_text("at,action,target\n1h,cluster-down,gpu-north\n", encoding="utf-8")
    code = main([
        "simulate", "--policies", str(REPO / "policies"),
        "--trace", str(REPO / "examples/traces/small.csv"), "--faults", str(faults),
    ])  # fmt: skip
    assert code == 1
    assert f"{faults}: cluster-down gpu-north: no such cluster" in capsys.readouterr().err
