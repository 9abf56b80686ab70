"""Declared layering: the core imports no I/O frameworks and no edge; each third-party edge has
one home; no modules of the project import each other in a circle.

The floors, from the top: the ``fleetgate`` command (``fleetgate/``), which wires the edges to
the core; the edges (``webhook``, ``reconciler``, ``simulate``, ``sandbox``); the core
(``engine``), which imports none of them."""

from __future__ import annotations

import ast
from collections.abc import Mapping
from pathlib import Path

import pytest

from tests.conftest import REPO

CORE_FORBIDDEN = {"kubernetes", "flask", "watchfiles", "grpc"}
# the sandbox (a test API server) is never needed in production: nothing ships imports it
# (`fleetgate sandbox` is registered by the entry point fleetgate.commands in pyproject.toml)
NEVER_IMPORT_SANDBOX = ("fleetgate", "engine", "webhook", "reconciler")
PACKAGES = ("fleetgate", "engine", "webhook", "reconciler", "simulate", "sandbox")
EDGES = ("webhook", "reconciler", "simulate", "sandbox", "fleetgate")  # what engine never imports
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
    return relative != "engine/policy/reload.py"


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


@pytest.mark.parametrize("edge", EDGES)
def test_the_core_never_imports_an_edge(edge: str):
    importers = {
        p.relative_to(REPO).as_posix() for p in engine_modules() if edge in imported_roots(p)
    }
    assert importers == set()


def project_modules() -> dict[str, Path]:
    """Every module of the project's packages by its dotted name (a package by its own)."""
    modules = {}
    for package in PACKAGES:
        for path in (REPO / package).rglob("*.py"):
            parts = path.relative_to(REPO).with_suffix("").parts
            modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def import_graph(modules: Mapping[str, Path]) -> dict[str, set[str]]:
    """Module → the project's modules it imports: every import statement, those inside
    functions and under ``TYPE_CHECKING`` too. ``from pkg import sub`` imports the submodule
    ``pkg.sub`` (its package is initialised first for any import of a submodule, an edge not
    counted); a name defined in ``pkg/__init__.py`` is an import of ``pkg``."""

    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets: list[str] = []
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                targets += [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*parent, base] if base else parent)
                targets += [
                    f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base
                    for a in node.names
                ]
        graph[name] = {m for t in targets if (m := resolve(t)) is not None and m != name}
    return graph


def circles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, without
    recursion), each sorted, in name order."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, targets = work[-1]
            target = next(targets, None)
            if target is not None:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target]))))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def test_no_import_circle():
    """Modules that import each other are one piece in two files: cut by concept (the shared
    thing to the module it belongs to, or a small module both import), never by hiding an
    import inside a function."""
    assert circles(import_graph(project_modules())) == []


def test_a_circle_is_found():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"d"}}
    assert circles(graph) == [["a", "b", "c"]]


def test_the_graph_counts_every_import():
    graph = import_graph(project_modules())
    assert "engine.workloads.volcano" in graph["engine.workloads.registry"]  # from pkg import sub
    assert "engine.cycle" in graph["fleetgate.cli"]  # a name of engine/cycle/__init__.py
    assert "fleetgate.diffcli" in graph["fleetgate.cli"]  # inside a function
    assert "sandbox.connections" in graph["sandbox.http"]  # under TYPE_CHECKING


def test_modules_stay_small():
    large = {
        p.relative_to(REPO).as_posix(): n
        for p in [
            *(REPO / "fleetgate").rglob("*.py"),
            *engine_modules(),
            *(REPO / "webhook").rglob("*.py"),
            *(REPO / "sandbox").rglob("*.py"),
            *(REPO / "reconciler").rglob("*.py"),
        ]
        if (n := len(p.read_text().splitlines())) > 450
    }
    assert large == {}
