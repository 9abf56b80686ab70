"""The runtime without the ``report`` extra (matplotlib, numpy), as the image installs it: every
command but ``simulate --report`` works, and that one says in one line how to get the extra,
exits 2 and writes nothing.

A child process stands for an install without the extra: a ``sitecustomize`` on PYTHONPATH puts
a finder first on ``sys.meta_path`` that refuses matplotlib and numpy (and records who asked),
so nothing needs uninstalling.
"""

from __future__ import annotations

import ast
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.reconciler.serveproc import ServeProcess
from tests.sandbox.conftest import running_sandbox
from tests.webhook.webhookproc import WebhookProcess

PATIENCE_S = 120.0  # a bound on each child process: it stops a hang
EXTRA = ("matplotlib", "numpy")
PACKAGES = ("fleetgate", "engine", "webhook", "reconciler", "simulate", "sandbox")
# the report's modules: the only ones that may need the extra
REPORT_MODULES = ("simulate.plots", "simulate.report")
BLOCKER = textwrap.dedent(
    f'''
    """Stands for an install without fleetgate[report]: {EXTRA} cannot be imported."""
    import sys

    ATTEMPTS = []


    class NoReportExtra:
        def find_spec(self, name, path=None, target=None):
            if name.partition(".")[0] in {EXTRA!r}:
                ATTEMPTS.append(name)
                raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
            return None


    sys.meta_path.insert(0, NoReportExtra())
    '''
)
# in the child: every module of the packages but the report's, then each command (its help,
# and the runs that need nothing running), with the imports the blocker refused
DRIVER = textwrap.dedent(
    """
    import contextlib, importlib, io, json, pkgutil, sys
    import sitecustomize

    packages, skipped, commands = json.loads(sys.argv[1])
    imported = []
    for package in packages:
        root = importlib.import_module(package)
        for info in pkgutil.walk_packages(root.__path__, package + "."):
            if info.name in skipped or info.name.rpartition(".")[2] == "__main__":
                continue
            importlib.import_module(info.name)
            imported.append(info.name)
    from fleetgate.cli import build_parser, main

    subcommands = sorted(build_parser()._subparsers._group_actions[0].choices)
    codes = {}
    for argv in [["--help"], *([name, "--help"] for name in subcommands), *commands]:
        with contextlib.redirect_stdout(io.StringIO()):
            try:
                code = main(argv)
            except SystemExit as stop:
                code = stop.code
        codes[" ".join(argv)] = code
    print(json.dumps({"imported": imported, "codes": codes,
                      "attempts": sitecustomize.ATTEMPTS}))
    """
)


@pytest.fixture
def without_extra(tmp_path: Path) -> dict[str, str]:
    """The environment of a child process that cannot import the extra."""
    blocker = tmp_path / "no-report-extra"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(BLOCKER)
    return {**os.environ, "PYTHONPATH": str(blocker), "PYTHONUNBUFFERED": "1"}


def run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=PATIENCE_S,
    )


def test_the_blocker_stands_for_a_missing_extra(without_extra: dict[str, str]) -> None:
    for module in EXTRA:
        done = run(without_extra, "-c", f"import {module}")
        assert done.returncode == 1
        assert f"ModuleNotFoundError: No module named '{module}'" in done.stderr


def test_every_module_and_command_but_the_report_runs_without_the_extra(
    without_extra: dict[str, str],
) -> None:
    commands = [
        ["validate", "policies"],
        ["dry-run", "--policies", "policies", "--snapshot", "examples/fleet-snapshot.yaml",
         "--now", "2025-03-10T10:00:00Z", "-o", "json"],
        ["simulate", "--policies", "policies", "--trace", "examples/traces/small.csv",
         "--no-progress", "--until", "0.25d"],
    ]  # fmt: skip
    done = run(without_extra, "-c", DRIVER, json.dumps([PACKAGES, REPORT_MODULES, commands]))
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["attempts"] == [], "imported the report extra outside the report"
    assert {"reconciler.serve", "webhook.app", "simulate.cli", "fleetgate.cli"} <= set(
        found["imported"]
    )
    codes = found["codes"]
    assert {"serve --help", "webhook --help", "simulate --help"} <= set(codes)
    assert codes == dict.fromkeys(codes, 0)


def test_simulate_report_without_the_extra_says_how_to_get_it_and_writes_nothing(
    without_extra: dict[str, str], tmp_path: Path
) -> None:
    report = tmp_path / "report"
    done = run(
        without_extra,
        "-m",
        "fleetgate",
        "simulate",
        "--policies",
        "policies",
        "--trace",
        "examples/traces/small.csv",
        "--no-progress",
        "--report",
        str(report),
    )
    assert done.returncode == 2
    assert done.stdout == ""  # said before the run: no summary either
    (line,) = done.stderr.splitlines()
    assert "matplotlib" in line and line.endswith("pip install 'fleetgate[report]'")
    assert not report.exists()


def test_fleetgate_webhook_and_serve_start_without_the_extra(
    without_extra: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both server commands start, get ready (policies loaded; serve: informers synced on the
    sandbox) and stop cleanly, with the report extra out of reach."""
    webhook = WebhookProcess(tmp_path / "tls", without_extra)
    try:
        status, _, body = webhook.get("/readyz")
        assert status == 200, body
    finally:
        assert webhook.stop() == 0, "".join(webhook.lines)

    for name, value in without_extra.items():  # ServeProcess runs in this environment
        monkeypatch.setenv(name, value)
    with running_sandbox() as sandbox:
        kubeconfig = sandbox.write_kubeconfig(tmp_path / "kubeconfig")
        served = ServeProcess(kubeconfig, "slim", tmp_path / "serve.log", "--no-leader-elect")
        try:
            served.wait_ready(PATIENCE_S)
            assert served.get("/metrics")[0] == 200
            served.signal(signal.SIGTERM)
            assert served.wait(PATIENCE_S) == 0, served.stderr()
        finally:
            served.stop()
    for log in ("".join(webhook.lines), served.stderr()):
        assert "matplotlib" not in log and "numpy" not in log


def importers(module: str) -> set[str]:
    """The modules of the packages that import ``module`` (anywhere in them, lazily too)."""
    found = set()
    for package in PACKAGES:
        for path in (REPO / package).rglob("*.py"):
            tree = ast.parse(path.read_text(), filename=str(path))
            for node in ast.walk(tree):
                names: list[str] = []
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
                if module in names:
                    found.add(path.relative_to(REPO).as_posix())
    return found


def test_only_simulate_report_reaches_the_plots() -> None:
    assert importers("simulate.plots") == {"simulate/report.py"}
    assert importers("simulate.report") == {"simulate/cli.py"}
