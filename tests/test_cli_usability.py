"""Small things a first-time user of the ``fleetgate`` command meets: ``--version``, defaults in
``--help``, readable ``bench -o text``, a "did you mean" for a mistyped kind, and ``validate``
answering the same for an empty file and an empty directory."""

from __future__ import annotations

import json
import re
from importlib.metadata import version

import pytest

from fleetgate.cli import main
from tests.conftest import queue_doc


def test_version_prints_the_package_version(capsys):
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out == f"fleetgate {version('fleetgate')}\n"


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("bench", ["--jobs JOBS", "(default: 15000)", "(default: 5)", "(default: json)"]),
        ("validate", ["(default: text)"]),
        ("inspect", ["(default: table)", "(default: the built-in mapping)"]),
        ("dry-run", ["(default: table)", "(default: the current time)"]),
        ("webhook", ["(8443; 0: any free port)", "and above (INFO)"]),
    ],
)
def test_help_shows_the_defaults_once(command, expected, capsys):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = " ".join(capsys.readouterr().out.split())  # argparse wraps lines anywhere
    for part in expected:
        assert part in text
    for said_already in ("None", "False", "[]", "8443", "INFO"):
        assert f"(default: {said_already})" not in text


BENCH = ["bench", "--jobs", "40", "--clusters", "2", "--queues", "3"]


def test_bench_text_is_aligned_lines_not_python_dicts(capsys):
    assert main([*BENCH, "--repeats", "2", "-o", "text"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert not any(c in line for line in lines for c in "{}[]'")
    assert "cycle_seconds:" in lines
    nested = [line for line in lines if line.startswith("  ")]
    assert any(re.fullmatch(r"  p50: +\d+(\.\d+)? ms", line) for line in nested), nested
    top = [line for line in lines if line and not line.startswith(" ")]
    columns = {len(m[1]) for line in top if (m := re.fullmatch(r"(\S+: +)\S.*", line))}
    assert len(columns) == 1, f"top-level values do not start in one column: {top}"
    assert "jobs:" in top[0] and top[0].endswith(" 40")
    assert not any("cold cycle" in line for line in lines)


def test_bench_with_one_repeat_says_the_p50_is_the_cold_cycle(capsys):
    assert main([*BENCH, "--repeats", "1", "-o", "text"]) == 0
    text = capsys.readouterr().out
    assert "the p50 is the cold cycle" in text
    assert main([*BENCH, "--repeats", "1", "-o", "json"]) == 0
    numbers = json.loads(capsys.readouterr().out)
    assert numbers["cycle_seconds"]["p50_of"] == "cold"


def test_a_mistyped_kind_gets_a_suggestion(write, capsys):
    path = write("q.yaml", "apiVersion: fleetgate.io/v1alpha1\nkind: Quue\nmetadata:\n  name: a\n")
    assert main(["validate", str(path)]) == 1
    out = capsys.readouterr().out
    assert "unknown kind 'Quue' (did you mean 'Queue'?)" in out


def test_a_kind_far_from_every_kind_gets_no_suggestion(write, capsys):
    path = write("q.yaml", "apiVersion: fleetgate.io/v1alpha1\nkind: Pod\nmetadata:\n  name: a\n")
    assert main(["validate", str(path)]) == 1
    assert "did you mean" not in capsys.readouterr().out


@pytest.mark.parametrize("content", ["", "# only a comment\n", "---\n...\n"])
def test_an_empty_file_and_an_empty_directory_are_both_refused(tmp_path, capsys, content):
    empty_file = tmp_path / "policies.yaml"
    empty_file.write_text(content)
    empty_dir = tmp_path / "policies"
    empty_dir.mkdir()
    assert main(["validate", str(empty_file)]) == main(["validate", str(empty_dir)]) == 1
    file_error, dir_error = capsys.readouterr().out.splitlines()
    assert file_error.startswith(str(empty_file))
    assert file_error.endswith("holds no policy document")
    assert dir_error.startswith(str(empty_dir))
    assert dir_error.endswith("directory holds no .yaml or .yml file")


def test_a_directory_of_empty_files_is_refused_but_one_empty_file_among_others_is_fine(
    write, tmp_path, capsys
):
    write("blank.yaml", "# nothing yet\n")
    assert main(["validate", str(tmp_path / "policies")]) == 1
    assert "holds no policy document" in capsys.readouterr().out
    write("q.yaml", queue_doc("a"))
    assert main(["validate", str(tmp_path / "policies")]) == 0
