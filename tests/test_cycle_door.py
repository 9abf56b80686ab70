"""The scheduling cycle has one door: modules outside ``engine/cycle/`` import the names the
package ``engine.cycle`` exports, never its modules; and it exports nothing nobody uses."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import engine.cycle
from tests.conftest import REPO

CYCLE = REPO / "engine" / "cycle"
SUBMODULES = {p.stem for p in CYCLE.glob("*.py") if p.stem != "__init__"} | {
    p.name for p in CYCLE.iterdir() if p.is_dir() and (p / "__init__.py").exists()
}
OUTSIDE = ("engine", "webhook", "reconciler", "simulate", "sandbox", "benchmarks", "fleetgate")


def project_modules() -> Iterator[Path]:
    for top in OUTSIDE:
        folder = REPO / top
        if folder.is_dir():
            yield from (p for p in sorted(folder.rglob("*.py")) if CYCLE not in p.parents)


def cycle_imports(path: Path) -> Iterator[tuple[str, str]]:
    """(module, name) of every import from the cycle package in ``path``."""
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("engine.cycle"):
                    yield alias.name, ""
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("engine.cycle"):
            for alias in node.names:
                yield str(node.module), alias.name


def test_nothing_outside_the_cycle_imports_its_modules():
    found = [
        f"{path.relative_to(REPO)}: {module} {name}".strip()
        for path in project_modules()
        for module, name in cycle_imports(path)
        if module != "engine.cycle" or name in SUBMODULES or not name
    ]
    assert found == []


def test_every_name_the_cycle_exports_is_used_outside_it():
    used = {
        name
        for path in project_modules()
        for module, name in cycle_imports(path)
        if module == "engine.cycle"
    }
    assert set(engine.cycle.__all__) - used == set()
    assert used - set(engine.cycle.__all__) == set()


def test_the_check_sees_a_forbidden_import(tmp_path: Path):
    sample = tmp_path / "sample.py"
    sample.write_text(
        "from engine.cycle.jobs.reading import read_job\nimport engine.cycle.groups.place\n"
        "from engine.cycle import run_cycle, explain, groups\n"
    )
    found = list(cycle_imports(sample))
    assert ("engine.cycle.jobs.reading", "read_job") in found
    assert ("engine.cycle.groups.place", "") in found
    assert {"explain", "groups"} <= SUBMODULES
    assert {("engine.cycle", "explain"), ("engine.cycle", "groups")} <= set(found)
