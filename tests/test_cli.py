"""``fleetgate validate``: exit codes 0/1/2, the text and JSON outputs, the installed script."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from engine.policy.policyset import load_policy_set
from engine.policy.source import policy_files
from fleetgate.cli import main
from tests.conftest import REPO, missing, queue_doc

POLICIES = REPO / "policies"
VERSION = r"[0-9a-f]{12}"
SUMMARY = re.compile(
    r"  (?P<files>\d+) file\(s\): (?P<queues>\d+) queue\(s\), scheduling policy '(?P<name>.+)', "
    r"(?P<admission>\d+) admission polic\(ies\), (?P<cel>\d+) CEL expression\(s\) compiled"
)


def count_kind(directory: Path, kind: str) -> int:
    """Documents of ``kind`` under ``directory``, counted with plain YAML, not the loader."""
    files = [*directory.rglob("*.yaml"), *directory.rglob("*.yml")]
    return sum(
        1
        for file in files
        for doc in yaml.safe_load_all(file.read_text())
        if isinstance(doc, dict) and doc.get("kind") == kind
    )


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# --- valid ----------------------------------------------------------------------------------


def test_valid_policies_print_version_and_counts(capsys):
    code, out, _ = run(capsys, "validate", str(POLICIES))
    assert code == 0
    headline, summary, *warnings = out.splitlines()
    assert all(w.startswith("warning: ") and "open to every namespace" in w for w in warnings)
    version = re.fullmatch(f"valid: policy version ({VERSION})", headline)
    assert version, headline
    assert version[1] == load_policy_set([POLICIES]).version
    counts = SUMMARY.fullmatch(summary)
    assert counts, summary
    assert int(counts["files"]) == len(policy_files([POLICIES])[0])
    assert int(counts["queues"]) == count_kind(POLICIES, "Queue")
    assert int(counts["admission"]) == count_kind(POLICIES, "AdmissionPolicy")
    assert counts["name"] == "fleet"
    assert int(counts["cel"]) > 0


def test_revision_is_appended_to_the_version(capsys):
    code, out, _ = run(capsys, "validate", "--revision", "abc123", str(POLICIES))
    assert code == 0
    assert re.fullmatch(f"valid: policy version {VERSION}@abc123", out.splitlines()[0])


def test_valid_policies_as_json(capsys):
    code, out, _ = run(capsys, "validate", "-o", "json", str(POLICIES))
    assert code == 0
    report = json.loads(out)
    assert report["valid"] is True
    assert re.fullmatch(VERSION, report["version"])
    assert report["revision"] is None
    assert report["queues"] == count_kind(POLICIES, "Queue")
    assert report["admissionPolicies"] == count_kind(POLICIES, "AdmissionPolicy")


def test_installed_console_script():
    script = Path(sys.executable).parent / "fleetgate"
    if not script.exists():
        missing(f"the fleetgate console script is not installed next to {sys.executable}")
    result = subprocess.run(
        [str(script), "validate", "policies/"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert re.fullmatch(f"valid: policy version {VERSION}", result.stdout.splitlines()[0])


# --- invalid --------------------------------------------------------------------------------


@pytest.fixture
def two_broken_files(write, tmp_path):
    """Three errors in two files, written in the opposite of file order."""
    b = write("b.yaml", queue_doc("b", "wieght: 2"))
    a = write("a.yaml", queue_doc("a", "strategy: Fifo\nweight: 0"))
    expected = [  # file, line, column, object, path, part of the message
        (str(a), 6, 13, "Queue/a", "spec.strategy", "'Fifo' is not one of"),
        (str(a), 7, 11, "Queue/a", "spec.weight", "less than or equal to the minimum"),
        (str(b), 6, 3, "Queue/b", "spec.wieght", "unknown field 'wieght'"),
    ]
    return tmp_path / "policies", expected


def test_invalid_policies_print_every_error_in_file_order(two_broken_files, capsys):
    directory, expected = two_broken_files
    code, out, err = run(capsys, "validate", str(directory))
    assert code == 1
    lines = out.splitlines()
    assert len(lines) == len(expected), out
    for line, (file, row, column, obj, path, message) in zip(lines, expected, strict=True):
        assert line.startswith(f"{file}:{row}:{column}: {obj}: {path}: "), line
        assert message in line
    assert f"{len(expected)} error(s); nothing was applied" in err


def test_invalid_policies_as_json(two_broken_files, capsys):
    directory, expected = two_broken_files
    code, out, _ = run(capsys, "validate", "-o", "json", str(directory))
    assert code == 1
    report = json.loads(out)
    assert report["valid"] is False
    errors = report["errors"]
    places = [(e["file"], e["line"], e["column"], e["object"], e["path"]) for e in errors]
    assert places == [place[:5] for place in expected]
    for error, (*_, message) in zip(errors, expected, strict=True):
        assert message in error["message"]


def test_missing_path_is_invalid_not_a_crash(tmp_path, capsys):
    missing = tmp_path / "nowhere"
    code, out, _ = run(capsys, "validate", str(missing))
    assert code == 1
    assert out == f"{missing}: no such file or directory\n"  # no position: the file itself


# --- usage ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param([], id="no arguments"),
        pytest.param(["validate"], id="no path"),
        pytest.param(["validate", "--strict", "policies"], id="unknown option"),
        pytest.param(["validate", "-o", "yaml", "policies"], id="unknown output format"),
        pytest.param(["lint", "policies"], id="unknown command"),
    ],
)
def test_usage_errors_exit_2(argv, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    assert "usage: fleetgate" in capsys.readouterr().err


def test_a_leaf_queue_open_to_every_namespace_is_a_warning(capsys, tmp_path):
    """Valid, but any namespace may label its jobs into such a queue: validate says which
    (a selector on an ancestor guards the leaves below it)."""
    (tmp_path / "queues.yaml").write_text(
        "apiVersion: fleetgate.io/v1alpha1\nkind: Queue\nmetadata: {name: prod}\n"
        "spec: {namespaceSelector: {matchLabels: {env: prod}}}\n---\n"
        "apiVersion: fleetgate.io/v1alpha1\nkind: Queue\nmetadata: {name: serving}\n"
        "spec: {parent: prod}\n---\n"
        "apiVersion: fleetgate.io/v1alpha1\nkind: Queue\nmetadata: {name: scratch}\nspec: {}\n"
    )
    code, out, _ = run(capsys, "validate", str(tmp_path))
    assert code == 0
    warnings = [line for line in out.splitlines() if line.startswith("warning: ")]
    assert warnings == [
        f"warning: {tmp_path / 'queues.yaml'}:11: Queue/scratch: open to every namespace (no "
        "spec.namespaceSelector on it or an ancestor): any namespace may label its jobs into it"
    ]
    code, out, _ = run(capsys, "validate", "-o", "json", str(tmp_path))
    assert code == 0 and len(json.loads(out)["warnings"]) == 1


def test_a_selector_operator_without_values_is_an_error(capsys, tmp_path):
    (tmp_path / "q.yaml").write_text(
        "apiVersion: fleetgate.io/v1alpha1\nkind: Queue\nmetadata: {name: q}\nspec:\n"
        "  namespaceSelector:\n    matchExpressions: [{key: team, operator: In}]\n"
    )
    code, out, _ = run(capsys, "validate", str(tmp_path))
    assert code == 1
    assert (
        "Queue/q: spec.namespaceSelector.matchExpressions[0].values: operator In needs values"
        in out
    )
