"""The commands shown in README.md and docs/*.md are real: each example block is replayed.

An example is a fenced block whose first line is ``$ fleetgate validate|inspect|dry-run|diff
…``; the rest of the block is what the command prints (stdout, then stderr). The command must
exit 0, unless its line ends with ``# exit N``::

    $ fleetgate validate examples/broken/cel-errors.yaml  # exit 1

A line that is only ``…`` stands for any number of lines of output. Any other ``$ fleetgate``
line in a fenced block is an error, so no command shown with a prompt goes unchecked.
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from dataclasses import dataclass

import pytest

from fleetgate.cli import main
from tests.conftest import REPO

REPLAYED = ("validate", "inspect", "dry-run", "diff")
TOURED = ("validate", "inspect", "dry-run")  # the README's tour; diff has docs/what-if.md
PROMPT = "$ fleetgate "
EXIT_MARKER = re.compile(r"\s+# exit (\d+)$")
ELISION = "…"


@dataclass(frozen=True, slots=True)
class Example:
    file: str  # relative to the repository
    line: int  # of the command, 1-based
    command: str  # the words after `fleetgate`
    exit_code: int
    expected: str

    @property
    def id(self) -> str:
        return f"{self.file}:{self.line}: {self.command}"


def pages() -> list[str]:
    """README.md, the docs, and the READMEs of the placement cookbook's recipes."""
    found = [*REPO.glob("docs/*.md"), *REPO.glob("examples/policies/*/README.md")]
    return ["README.md", *sorted(p.relative_to(REPO).as_posix() for p in found)]


def fenced_blocks(text: str) -> list[tuple[int, list[str]]]:
    """(line number of the block's first line, its lines) for every fenced block."""
    blocks: list[tuple[int, list[str]]] = []
    current: list[str] | None = None
    start = 0
    for number, line in enumerate(text.splitlines(), start=1):
        if line.lstrip().startswith("```"):
            if current is None:
                current, start = [], number + 1
            else:
                blocks.append((start, current))
                current = None
        elif current is not None:
            current.append(line)
    return blocks


def parse(page: str, text: str) -> tuple[list[Example], list[str]]:
    """The examples of one page, and every `$ fleetgate` line that is not a replayable example."""
    examples: list[Example] = []
    stray: list[str] = []
    for start, lines in fenced_blocks(text):
        for offset, line in enumerate(lines):
            if not line.startswith(PROMPT):
                continue
            command = line[len(PROMPT) :]
            replayable = offset == 0 and command.split(" ", 1)[0] in REPLAYED
            if not replayable:
                stray.append(f"{page}:{start + offset}: {line}")
                continue
            marker = EXIT_MARKER.search(command)
            exit_code = int(marker.group(1)) if marker else 0
            command = command[: marker.start()] if marker else command
            if "#" in command:
                stray.append(f"{page}:{start + offset}: unknown comment (write '# exit N'): {line}")
                continue
            expected = "".join(out + "\n" for out in lines[1:])
            examples.append(Example(page, start + offset, command, exit_code, expected))
    return examples, stray


def examples() -> list[Example]:
    return [ex for page in pages() for ex in parse(page, (REPO / page).read_text())[0]]


def run(command: str) -> tuple[int, str]:
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        try:
            code = main(shlex.split(command))
        except SystemExit as stop:  # argparse ends usage errors this way
            code = stop.code if isinstance(stop.code, int) else 1
    return code, stdout.getvalue() + stderr.getvalue()


def output_pattern(expected: str) -> re.Pattern[str]:
    """The expected output as a regex: each line literal, each `…` line any number of lines."""
    parts = [
        r"(?:.*\n)*?" if line.strip() == ELISION else re.escape(line) + r"\n"
        for line in expected.splitlines()
    ]
    return re.compile("".join(parts))


def replay(example: Example) -> None:
    code, output = run(example.command)
    if any(line.strip() == ELISION for line in example.expected.splitlines()):
        shown = f"--- shown\n{example.expected}--- printed\n{output}"
        assert output_pattern(example.expected).fullmatch(output), f"{example.id}: differs\n{shown}"
    else:
        assert output == example.expected
    assert code == example.exit_code, f"{example.id}: exit {code}, page says {example.exit_code}"


@pytest.mark.parametrize("example", examples(), ids=lambda ex: ex.id)
def test_shown_output_and_exit_code_are_what_the_command_gives(example, monkeypatch):
    monkeypatch.chdir(REPO)
    replay(example)


def test_every_prompted_fleetgate_command_is_replayed():
    stray = [s for page in pages() for s in parse(page, (REPO / page).read_text())[1]]
    assert stray == []


def test_readme_tours_each_command_and_the_docs_keep_their_examples():
    every = examples()
    in_readme = {ex.command.split()[0] for ex in every if ex.file == "README.md"}
    assert set(TOURED) <= in_readme <= set(REPLAYED)
    assert len(every) >= 10
    assert any(ex.exit_code != 0 for ex in every), "no example shows a failing command"
    assert any(ELISION in ex.expected for ex in every), "no example elides output"


def test_a_wrong_exit_code_or_output_fails_the_replay(monkeypatch):
    monkeypatch.chdir(REPO)
    page = (
        "```\n$ fleetgate validate examples/broken/admission.yaml\n…\n```\n"
        "```\n$ fleetgate validate policies/  # exit 1\n…\n```\n"
        "```\n$ fleetgate validate policies/\nvalid\n…\n```\n"
        "```\n$ fleetgate validate examples/broken/admission.yaml  # exit 1\n…\n```\n"
    )
    found, stray = parse("page.md", page)
    assert stray == []
    assert [(ex.line, ex.exit_code) for ex in found] == [(2, 0), (6, 1), (10, 0), (15, 1)]
    for wrong in found[:3]:
        with pytest.raises(AssertionError):
            replay(wrong)
    replay(found[3])


def test_unreplayable_prompts_and_unknown_comments_are_reported():
    page = (
        "```sh\n$ fleetgate bench --jobs 10\n```\n"
        "```\nvalid\n$ fleetgate validate policies/\n```\n"
        "```\n$ fleetgate validate policies/  # exits 1\n```\n"
    )
    found, stray = parse("page.md", page)
    assert found == []
    assert [s.split(": ", 1)[0] for s in stray] == ["page.md:2", "page.md:6", "page.md:9"]
