"""Every `fleetgate simulate` command the simulator's docs show (in their ```sh blocks) runs and
exits 0; one that writes a report writes report.html. A command the docs show that stopped
working (a renamed option, a moved example file) fails here."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from fleetgate.cli import main

REPO = Path(__file__).resolve().parents[2]
DOCS = ("docs/simulator.md", "docs/simulator-report.md")
SH_BLOCK = re.compile(r"^```sh\n(.*?)^```", re.M | re.S)


def shown_commands() -> list[tuple[str, list[str]]]:
    found = []
    for doc in DOCS:
        for block in SH_BLOCK.findall((REPO / doc).read_text()):
            text = block.replace("\\\n", " ")
            for line in text.splitlines():
                if line.startswith("fleetgate simulate "):
                    found.append((doc, shlex.split(line)[1:]))
    return found


COMMANDS = shown_commands()


def test_the_docs_show_commands() -> None:
    assert len(COMMANDS) >= 4


@pytest.mark.parametrize(
    "argv", [argv for _, argv in COMMANDS], ids=[f"{d}:{i}" for i, (d, _) in enumerate(COMMANDS)]
)
def test_a_command_the_docs_show_runs(
    argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.chdir(REPO)
    argv = list(argv)
    report = None
    if "--report" in argv:
        report = tmp_path / "report"
        argv[argv.index("--report") + 1] = str(report)
    assert main([*argv, "--no-progress"]) == 0, capsys.readouterr().err
    if report is not None:
        assert (report / "report.html").is_file()
