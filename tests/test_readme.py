"""The README's example outputs are real: each `$ fleetgate validate …` block is replayed."""

from __future__ import annotations

import contextlib
import io
import re
import shlex

import pytest

from engine.cli import main
from tests.conftest import REPO

BLOCK = re.compile(r"```\n\$ fleetgate ((?:validate|inspect|dry-run) [^\n]*)\n(.*?)```", re.S)


def examples() -> list[tuple[str, str]]:
    text = (REPO / "README.md").read_text()
    return [(cmd, out) for cmd, out in BLOCK.findall(text) if "…" not in out]


@pytest.mark.parametrize(("command", "expected"), examples(), ids=[c for c, _ in examples()])
def test_readme_output_is_what_the_command_prints(command, expected, monkeypatch):
    monkeypatch.chdir(REPO)
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        main(shlex.split(command))
    assert stdout.getvalue() + stderr.getvalue() == expected


def test_readme_has_examples():
    assert len(examples()) >= 5
