"""Input that cannot be read is reported the same way by every command, and never silently.

One line per problem: ``FILE:LINE:COL: Kind/name: path: message`` where a position is known,
``FILE: message`` where it is not; a part that is not known is left out, never printed as ``-``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.errors import PolicyIssue
from engine.fleet.model import IssueCode, SnapshotIssue
from fleetgate.cli import main
from tests.conftest import REPO

FIXTURES = REPO / "tests" / "fixtures" / "workloads"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_an_issue_leaves_out_what_is_not_known() -> None:
    assert (
        str(PolicyIssue("q.yaml", 3, 5, "", "", "YAML syntax: oops"))
        == "q.yaml:3:5: YAML syntax: oops"
    )
    assert str(PolicyIssue("q.yaml", 0, 0, "", "", "no such file or directory")) == (
        "q.yaml: no such file or directory"
    )
    malformed = SnapshotIssue("fleet.yaml", "Cluster/a", "spec.taints", "expected a list")
    assert str(malformed) == "fleet.yaml: Cluster/a: spec.taints: expected a list"
    orphan = SnapshotIssue("", "ResourceBinding/ns/b", "spec", "demand unknown")
    assert str(orphan) == "ResourceBinding/ns/b: spec: demand unknown"
    placed = SnapshotIssue("f.yaml", "", "", "YAML syntax: x", IssueCode.UNREADABLE, 2, 7)
    assert str(placed) == "f.yaml:2:7: YAML syntax: x"


def unreadable_inputs(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    """Each kind of input that cannot be read: (path, the line every command prints)."""
    empty = tmp_path / "empty"
    empty.mkdir()
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"\xff\xfe\x00kind")
    broken = tmp_path / "broken.yaml"
    broken.write_text("apiVersion: v1\nkind: [Job\n")
    prose = tmp_path / "prose.yaml"
    prose.write_text("this is not a manifest\n")
    missing = tmp_path / "missing.yaml"
    return {
        "missing": (missing, f"{missing}: no such file or directory"),
        "binary": (binary, f"{binary}: cannot read: not UTF-8 text (byte 0xff at offset 0)"),
        "broken": (
            broken,
            f"{broken}:3:1: YAML syntax: expected ',' or ']', but got '<stream end>'",
        ),
        "prose": (prose, f"{prose}:1:1: expected an object with apiVersion and kind, got a string"),
        "empty": (empty, f"{empty}: directory holds no .yaml or .yml file"),
    }


@pytest.mark.parametrize("case", ["missing", "binary", "broken", "prose", "empty"])
def test_validate_names_the_file_in_the_shared_words(case, tmp_path, capsys) -> None:
    path, line = unreadable_inputs(tmp_path)[case]
    code, out, _ = run(capsys, "validate", str(path))
    assert code == 1
    assert out.splitlines() == [line]


@pytest.mark.parametrize("case", ["missing", "binary", "broken", "prose", "empty"])
def test_inspect_names_the_file_in_the_same_words(case, tmp_path, capsys) -> None:
    path, line = unreadable_inputs(tmp_path)[case]
    line = line.replace(".yaml or .yml file", ".yaml, .yml or .json file")  # inspect reads JSON
    code, out, _ = run(capsys, "inspect", str(path))
    assert code == 1
    assert out.splitlines()[1:] == [f"error: {line}"]


def test_inspect_json_errors_carry_the_position(tmp_path, capsys) -> None:
    path, _ = unreadable_inputs(tmp_path)["broken"]
    code, out, _ = run(capsys, "inspect", "-o", "json", str(path))
    assert code == 1
    [error] = json.loads(out)["errors"]
    assert error["file"] == str(path)
    assert (error["line"], error["column"]) == (3, 1)
    assert error["message"].startswith("YAML syntax: ")


def test_inspect_error_without_a_path_has_no_dash(tmp_path, capsys) -> None:
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "fleet.yaml").write_text(
        "apiVersion: fleetgate.io/v1alpha1\nkind: SchedulingPolicy\nmetadata:\n  name: fleet\n"
        'spec:\n  queue: job.labels["team"]\n'
    )
    manifest = FIXTURES / "kueue-job.yaml"
    code, out, _ = run(capsys, "inspect", "--policies", str(policies), str(manifest))
    assert code == 1
    [error] = [line for line in out.splitlines() if line.startswith("error: ")]
    where = f"error: {manifest}: Job.batch/default/sample-job"
    assert error.startswith(f"{where}: cannot map the job to a queue: spec.queue: ")


def test_inspect_reads_a_directory_recursively(tmp_path, capsys) -> None:
    (tmp_path / "team" / "nested").mkdir(parents=True)
    (tmp_path / "team" / "a.yaml").write_text((FIXTURES / "kueue-job.yaml").read_text())
    (tmp_path / "team" / "nested" / "b.yml").write_text((FIXTURES / "pytorch-gpu.yaml").read_text())
    (tmp_path / "team" / "notes.txt").write_text("not read")
    code, out, _ = run(capsys, "inspect", "-o", "json", str(tmp_path / "team"))
    assert code == 0
    printed = json.loads(out)
    assert printed["errors"] == []
    assert [w["name"] for w in printed["workloads"]] == ["sample-job", "llama-ft"]
