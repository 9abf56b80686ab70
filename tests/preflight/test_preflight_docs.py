"""docs/preflight.md's example is what preflight prints for the control plane it describes:
the sandbox with Karmada's CRDs, dist/fleetgate-karmada.yaml's RBAC, fleetgate's webhook and the
three members of examples/fleet.yaml."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from engine.members.fleetfile import load_fleet
from fleetgate.cli import main
from tests.conftest import REPO
from tests.preflight.controlplane import crds, join_spec, karmada, webhook_registered

__all__ = ["crds"]  # the fixture, used by name

PAGE = REPO / "docs" / "preflight.md"
COMMAND = (
    "fleetgate preflight --kubeconfig sandbox.kubeconfig --policies policies/ --service-account\n"
    "fleetgate-system/fleetgate-reconciler"
)


def shown() -> str:
    """The page's example: the ``text`` block of its section "An example"."""
    section = PAGE.read_text().split("## An example", 1)[1].split("\n## ", 1)[0]
    [block] = re.findall(r"```text\n(.*?)```", section, flags=re.S)
    return block


def test_the_example_is_what_preflight_prints(
    crds: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch
) -> None:
    assert f"`{COMMAND}`" in PAGE.read_text() and "it exits 1" in PAGE.read_text()
    monkeypatch.chdir(REPO)
    with karmada(crds) as sandbox, webhook_registered(sandbox, tmp_path):
        for spec in load_fleet(REPO / "examples" / "fleet.yaml").clusters:
            join_spec(sandbox, spec)
        kubeconfig = sandbox.write_kubeconfig(tmp_path / "sandbox.kubeconfig")
        args = COMMAND.replace("sandbox.kubeconfig", str(kubeconfig)).split()[1:]
        code = main(args)
    assert capsys.readouterr().out == shown()
    assert code == 1
