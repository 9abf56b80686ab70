"""``fleetgate completion bash``: completes the commands and each command's options, made from
the parser (a new option is completed without anyone writing it down)."""

from __future__ import annotations

import subprocess

import pytest

from fleetgate.cli import build_parser
from fleetgate.completion import script
from tests.conftest import require_tool


def complete(*words: str) -> list[str]:
    line = " ".join(f"'{w}'" for w in words)
    program = (
        f"{script(build_parser())}\n"
        f"COMP_WORDS=({line}); COMP_CWORD={len(words) - 1}; _fleetgate; "
        'printf "%s\\n" "${COMPREPLY[@]}"'
    )
    done = subprocess.run(
        [require_tool("bash"), "-c", program], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


@pytest.mark.parametrize(
    ("words", "wanted"),
    [
        (("fleetgate", "jo"), ["jobs"]),
        (("fleetgate", "d"), ["dashboard", "demo", "describe", "diff", "dry-run"]),
        (("fleetgate", "jobs", "--all"), ["--all-namespaces"]),
        (("fleetgate", "dry-run", "--save"), ["--save-snapshot"]),
        (("fleetgate", "describe", "j"), ["job"]),
        (("kubectl-fleetgate", "queues", "--kube"), ["--kubeconfig"]),
    ],
)
def test_commands_options_and_choices_complete(words, wanted):
    assert complete(*words) == wanted


def test_every_command_is_in_the_script():
    text = script(build_parser(), "zsh")
    for command in ("jobs", "queues", "clusters", "describe", "dry-run", "serve", "simulate"):
        assert f"    {command}) words=" in text
    assert "complete -F _fleetgate kubectl-fleetgate" in text
