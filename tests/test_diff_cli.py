"""``fleetgate diff``: exit codes as ``git diff --exit-code`` (0 same, 1 different, 2 error), each
output format, policy sets read from git revisions, and the CI example that posts the diff."""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path

import pytest
import yaml

from fleetgate.cli import build_parser, main
from tests.conftest import REPO, require_tool
from tests.test_diff import INFERENCE_OFF_GPU_WEST, STRICT_TO_BEST_EFFORT, TRAINING_WEIGHT, edited

POLICIES = str(REPO / "policies")
SNAPSHOT = str(REPO / "examples" / "fleet-snapshot.yaml")
NOW = "2025-03-10T10:00:00Z"
WORKFLOW = REPO / "examples" / "ci" / "fleetgate-diff.yml"


def diff(capsys, base: str, head: str, *more: str) -> tuple[int, str, str]:
    code = main(
        ["diff", "--base", base, "--head", head, "--snapshot", SNAPSHOT, "--now", NOW, *more]
    )
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("output", ["table", "markdown", "json"])
def test_the_same_policies_exit_0_with_no_decision_changes(capsys, output):
    code, out, err = diff(capsys, POLICIES, POLICIES, "-o", output)
    assert (code, err) == (0, "")
    if output == "json":
        shown = json.loads(out)
        assert (shown["changed"], shown["decisions"], shown["queues"]) == (False, [], [])
        assert shown["base"]["policyVersion"] == shown["head"]["policyVersion"]
    assert "no decision changes (6 decisions compared); no queue changes" in out


@pytest.mark.parametrize(
    ("edit", "shown"),
    [
        (STRICT_TO_BEST_EFFORT, "PyTorchJob/research/resnet-ablation  research-training  Pending"),
        (TRAINING_WEIGHT, "research-training  0.008 → 0.025  1         2        -"),
        (INFERENCE_OFF_GPU_WEST, "after:  no cluster passes placement"),
    ],
    ids=["strategy", "weight", "placement"],
)
def test_a_change_exits_1_and_shows_it(capsys, tmp_path, edit, shown):
    code, out, err = diff(capsys, POLICIES, str(edited(tmp_path, edit)))
    assert (code, err) == (1, "")
    assert shown in out


def test_a_guarantee_change_is_shown_as_a_quota_change(capsys, tmp_path):
    guarantee = (
        "queues.yaml",
        "    nvidia.com/gpu: 16\n    cpu: 128",
        "    nvidia.com/gpu: 20\n    cpu: 128",
    )
    code, out, _ = diff(capsys, POLICIES, str(edited(tmp_path, guarantee)), "-o", "markdown")
    assert code == 1
    assert "| prod-inference | 0.000 | 2 | 0 | guarantee gpu 16 → 20 |" in out.splitlines()


def test_json_names_both_sides_and_now(capsys, tmp_path):
    head = str(edited(tmp_path, STRICT_TO_BEST_EFFORT))
    code, out, _ = diff(capsys, POLICIES, head, "-o", "json")
    shown = json.loads(out)
    assert code == 1
    assert shown["base"]["policies"] == POLICIES and shown["head"]["policies"] == head
    assert shown["now"] == NOW
    [change] = shown["decisions"]
    assert change["workload"] == "PyTorchJob/research/resnet-ablation"
    assert (change["before"]["action"], change["after"]["action"]) == ("Pending", "Admit")


# --- errors: exit 2 -----------------------------------------------------------------------------

BROKEN = ("queues.yaml", "  weight: 3", "  weight: -3")


@pytest.mark.parametrize("sides", [("base",), ("head",), ("base", "head")])
def test_invalid_policies_exit_2_naming_the_side(capsys, tmp_path, sides):
    broken = str(edited(tmp_path, BROKEN))
    code, out, err = diff(
        capsys, *(broken if side in sides else POLICIES for side in ("base", "head"))
    )
    assert (code, out) == (2, "")
    lines = err.splitlines()
    for side in ("base", "head"):
        named = [line for line in lines if line.startswith(f"{side}: {broken}/queues.yaml:")]
        assert bool(named) == (side in sides)
    assert lines[-1] == f"the {' and '.join(sides)} policies cannot be used; no cycle was run"


def test_a_missing_directory_or_snapshot_exits_2(capsys, tmp_path):
    code, _, err = diff(capsys, POLICIES, str(tmp_path / "nowhere"))
    assert code == 2 and f"head: {tmp_path / 'nowhere'}" in err
    (tmp_path / "snap.yaml").write_text("kind: [\n")
    code = main(
        ["diff", "--base", POLICIES, "--head", POLICIES, "--snapshot", str(tmp_path / "snap.yaml")]
    )
    assert code == 2
    assert "the snapshot cannot be read; no cycle was run" in capsys.readouterr().err


def test_usage_errors_exit_2(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["diff", "--base", POLICIES, "--snapshot", SNAPSHOT])
    assert stop.value.code == 2
    assert "--head" in capsys.readouterr().err


# --- git revisions ------------------------------------------------------------------------------


@pytest.fixture
def repo(tmp_path, monkeypatch) -> Path:
    """A git repository with two commits: policies/ as they are, then with StrictFIFO →
    BestEffortFIFO; the current directory."""
    require_tool("git")
    for name in ("AUTHOR", "COMMITTER"):
        monkeypatch.setenv(f"GIT_{name}_NAME", "fleetgate tests")
        monkeypatch.setenv(f"GIT_{name}_EMAIL", "tests@fleetgate.invalid")
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("HOME", str(tmp_path))
    root = tmp_path / "repo"
    root.mkdir()
    monkeypatch.chdir(root)
    git = lambda *argv: subprocess.run(["git", *argv], check=True, capture_output=True)  # noqa: E731
    git("init", "-q")
    edited(root / "before")  # a plain copy
    (root / "before" / "policies").rename(root / "policies")
    (root / "before").rmdir()
    git("add", ".")
    git("commit", "-q", "-m", "policies")
    file, old, new = STRICT_TO_BEST_EFFORT
    (root / "policies" / file).write_text(
        (root / "policies" / file).read_text().replace(old, new, 1)
    )
    git("commit", "-q", "-a", "-m", "research-training: BestEffortFIFO")
    return root


def test_git_revisions_as_inputs(capsys, repo):
    code, out, err = diff(capsys, "HEAD~1:policies", "HEAD:policies")
    assert (code, err) == (1, "")
    lines = out.splitlines()
    short = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD~1"], check=True, capture_output=True, text=True
    ).stdout.strip()
    assert lines[0].startswith("base HEAD~1:policies (policy version ")
    assert lines[0].endswith(f"@{short})")
    assert "PyTorchJob/research/resnet-ablation" in out
    # the working tree is the head commit: a directory and a revision of it are the same
    assert diff(capsys, "HEAD:policies", "policies")[0] == 0
    assert diff(capsys, "HEAD~1:policies", "policies")[0] == 1


def test_a_revision_from_a_subdirectory_is_relative_to_it(capsys, repo, monkeypatch):
    (repo / "sub").mkdir()
    monkeypatch.chdir(repo / "sub")
    assert diff(capsys, "HEAD~1:../policies", "HEAD:../policies")[0] == 1


def test_an_invalid_policy_set_at_a_revision_is_named_as_git_names_it(capsys, repo):
    file, old, new = BROKEN
    (repo / "policies" / file).write_text(
        (repo / "policies" / file).read_text().replace(old, new, 1)
    )
    subprocess.run(["git", "commit", "-q", "-a", "-m", "broken"], check=True)
    code, out, err = diff(capsys, "HEAD~1:policies", "HEAD:policies")
    assert (code, out) == (2, "")
    assert err.startswith("head: HEAD:policies/queues.yaml:")
    assert "fleetgate-diff-" not in err  # not the scratch copy's path


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("no-such-rev:policies", "base: no-such-rev:policies: no commit 'no-such-rev'"),
        ("HEAD:nothing", "base: HEAD:nothing: no file under 'nothing' at HEAD ("),
        ("HEAD:../..", "base: HEAD:../..: the path is outside the git repository"),
    ],
)
def test_a_revision_git_cannot_show_exits_2(capsys, repo, spec, message):
    code, _, err = diff(capsys, spec, "policies")
    assert code == 2
    assert err.startswith(message)


# --- the CI example -----------------------------------------------------------------------------


def test_the_ci_example_posts_the_markdown_diff_on_pull_requests_touching_policies():
    workflow = yaml.safe_load(WORKFLOW.read_text())
    trigger = workflow.get("on", workflow.get(True))  # YAML 1.1 reads a bare `on` as true
    assert trigger["pull_request"]["paths"] == ["policies/**"]
    assert workflow["permissions"]["pull-requests"] == "write"
    steps = [step for job in workflow["jobs"].values() for step in job["steps"]]
    command = next(
        line.split(">", 1)[0]
        for step in steps
        for line in step.get("run", "").splitlines()
        if line.startswith("fleetgate diff")
    )
    assert "--base origin/${{ github.base_ref }}:policies --head policies" in command
    args = build_parser().parse_args(
        shlex.split(command.replace("${{ github.base_ref }}", "main"))[1:]
    )
    assert (args.base, args.head, args.output) == ("origin/main:policies", "policies", "markdown")
    assert args.snapshot == [Path("examples/fleet-snapshot.yaml")]
    assert any("github-script" in step.get("uses", "") for step in steps)


def test_the_ci_example_names_no_registry_host():
    text = WORKFLOW.read_text()
    assert "http" not in text and "pypi" not in text and "index-url" not in text
