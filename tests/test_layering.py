"""Declared layering: the core imports no I/O frameworks; each third-party edge has one home."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import REPO

CORE_FORBIDDEN = {"kubernetes", "flask", "watchfiles", "grpc"}
# the sandbox (a test API server) is never needed in production: nothing ships imports it
# (`fleetgate sandbox` is registered by the entry point fleetgate.commands in pyproject.toml)
NEVER_IMPORT_SANDBOX = ("engine", "webhook", "reconciler")
# module → the only modules allowed to import it
SINGLE_HOME = {
    "celpy": {
        "engine/policy/cel.py",
        "engine/policy/celnumbers.py",
        "engine/policy/celstrings.py",
        "engine/policy/celtranspile.py",
        "engine/policy/celvalues.py",
    },
    "watchfiles": {"engine/policy/reload.py"},
    "matplotlib": {"simulate/plots.py"},
}


def imported_roots(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    roots: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


def engine_modules() -> list[Path]:
    return sorted((REPO / "engine").rglob("*.py"))


def is_core(path: Path) -> bool:
    relative = path.relative_to(REPO).as_posix()
    edges = ("engine/policy/reload.py", "engine/cli.py", "engine/karmada/")
    return not relative.startswith(edges)


@pytest.mark.parametrize(
    "path",
    [p for p in engine_modules() if is_core(p)],
    ids=lambda p: p.relative_to(REPO).as_posix(),
)
def test_core_imports_no_io_framework(path: Path):
    assert imported_roots(path).isdisjoint(CORE_FORBIDDEN)


@pytest.mark.parametrize("module", sorted(SINGLE_HOME))
def test_third_party_edges_have_one_home(module: str):
    importers = {
        p.relative_to(REPO).as_posix()
        for p in [
            *engine_modules(),
            *(REPO / "webhook").rglob("*.py"),
            *(REPO / "simulate").rglob("*.py"),
        ]
        if module in imported_roots(p)
    }
    assert importers <= SINGLE_HOME[module]


@pytest.mark.parametrize("package", NEVER_IMPORT_SANDBOX)
def test_production_code_never_imports_the_sandbox(package: str):
    importers = {
        p.relative_to(REPO).as_posix()
        for p in (REPO / package).rglob("*.py")
        if "sandbox" in imported_roots(p)
    }
    assert not importers


def test_the_core_never_imports_the_reconciler():
    importers = {
        p.relative_to(REPO).as_posix()
        for p in engine_modules()
        if "reconciler" in imported_roots(p)
    }
    assert importers == set()


def test_modules_stay_small():
    large = {
        p.relative_to(REPO).as_posix(): n
        for p in [
            *engine_modules(),
            *(REPO / "webhook").rglob("*.py"),
            *(REPO / "sandbox").rglob("*.py"),
            *(REPO / "reconciler").rglob("*.py"),
        ]
        if (n := len(p.read_text().splitlines())) > 450
    }
    assert large == {}
