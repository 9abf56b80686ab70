"""YAML bombs: nested aliases ("billion laughs") and deep nesting are refused, quickly and small.

Each CLI run is a subprocess with a 60 s timeout and a 1 GiB address-space limit, so code that
expands the bomb fails the test instead of eating the machine.
"""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

from engine.fleet.files import read_objects
from engine.fleet.model import IssueCode
from engine.policy.source import read_documents
from engine.yamlguard import MAX_DEPTH
from tests.conftest import REPO

LIMIT_AS = 1 << 30
TIMEOUT_S = 60


def laughs(key: str = "laughs") -> str:
    """Nine levels of nine aliases each: 9**9 ≈ 387 million strings when expanded."""
    lines = ['l0: &l0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for level in range(1, 9):
        lines.append(f"l{level}: &l{level} [" + ",".join([f"*l{level - 1}"] * 9) + "]")
    lines.append(f"{key}: *l8")
    return "\n".join(lines) + "\n"


def deep(levels: int) -> str:
    return "spec: " + "[" * levels + "]" * levels + "\n"


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT_AS, LIMIT_AS))


def fleetgate(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fleetgate", *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        preexec_fn=_limit_memory,
        cwd=REPO,
        check=False,
    )


def test_validate_refuses_billion_laughs_with_its_position(tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("apiVersion: fleetgate.io/v1alpha1\nkind: Queue\n" + laughs())
    result = fleetgate("validate", str(bomb))
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert f"{bomb}:7:10: YAML document refused" in result.stdout  # the alias over the limit
    assert "aliases expand to more than" in result.stdout


def test_validate_refuses_deep_nesting_without_a_traceback(tmp_path: Path) -> None:
    nested = tmp_path / "nested.yaml"
    nested.write_text(deep(5000))
    result = fleetgate("validate", str(nested))
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert f"{nested}:1:{6 + MAX_DEPTH}: YAML document refused: nested deeper than" in result.stdout


def test_dry_run_warns_for_a_bomb_in_the_snapshot_and_decides_the_rest(tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(laughs())
    result = fleetgate(
        "dry-run",
        "--policies",
        str(REPO / "policies"),
        "--snapshot",
        str(REPO / "examples" / "fleet-snapshot.yaml"),
        str(bomb),
        "--now",
        "2025-03-10T10:00:00Z",
        "-o",
        "json",
    )
    assert result.returncode == 0, result.stderr
    assert f"warning: {bomb}:" in result.stderr
    assert "aliases expand to more than" in result.stderr
    assert '"decisions"' in result.stdout


def test_documents_before_a_refused_one_are_read(tmp_path: Path) -> None:
    snapshot = tmp_path / "snap.yaml"
    snapshot.write_text("apiVersion: v1\nkind: Namespace\n---\n" + deep(1000))
    objects, issues = read_objects([snapshot])
    assert [o["kind"] for _, o in objects] == ["Namespace"]
    [issue] = issues
    assert issue.code is IssueCode.REFUSED
    assert (issue.line, issue.column) == (4, 6 + MAX_DEPTH)


def test_aliases_within_the_limits_still_load(tmp_path: Path) -> None:
    policy = tmp_path / "p.yaml"
    policy.write_text("base: &b {cpu: 1, gpu: 2}\na: *b\nb: {<<: *b, gpu: 4}\n")
    [doc], issues = read_documents(policy)
    assert issues == []
    assert doc.data == {
        "base": {"cpu": 1, "gpu": 2},
        "a": {"cpu": 1, "gpu": 2},
        "b": {"cpu": 1, "gpu": 4},
    }


def test_a_recursive_alias_is_refused(tmp_path: Path) -> None:
    policy = tmp_path / "p.yaml"
    policy.write_text("a: &a [1, *a]\n")
    docs, [issue] = read_documents(policy)
    assert docs == []
    assert "alias used inside the node it names" in issue.message
    assert (issue.line, issue.column) == (1, 11)
