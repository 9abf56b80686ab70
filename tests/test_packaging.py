"""``python -m build`` makes an sdist and, from it, a wheel that hold what the CLI needs: every
module of every package, the policy schemas, the dashboard's files, every console script and
``fleetgate.commands`` entry point (each naming a function its module defines), and
matplotlib only behind the ``report`` extra. The wheel, unpacked and put first on a child's
``sys.path`` (site processing off, so the editable install of this checkout is out of reach),
runs: the entry points load from it, ``fleetgate validate`` reads its schemas, the dashboard
finds its page. deploy/Dockerfile copies every package and installs no extra.

Built with ``--no-isolation`` (build and hatchling come with the test extra), so no download.
"""

from __future__ import annotations

import ast
import configparser
import json
import re
import subprocess
import sys
import sysconfig
import tarfile
import textwrap
import tomllib
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

from tests.conftest import REPO

PATIENCE_S = 300.0  # a bound on the build and on the child: it stops a hang
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
NOT_SHIPPED = ("tests", "benchmarks")  # packages of the checkout that no user runs


def packages() -> list[str]:
    """The checkout's top-level packages that ship."""
    return sorted(
        p.parent.name
        for p in REPO.glob("*/__init__.py")
        if p.parent.name not in NOT_SHIPPED and not p.parent.name.startswith(".")
    )


def modules(package: str) -> set[str]:
    return {
        p.relative_to(REPO).as_posix()
        for p in (REPO / package).rglob("*.py")
        if "__pycache__" not in p.parts
    }


def dashboard_files() -> set[str]:
    folder = REPO / "reconciler" / "dashboard"
    return {f"reconciler/dashboard/{p.name}" for p in folder.iterdir() if p.suffix != ".py"}


def declared_entry_points() -> dict[str, dict[str, str]]:
    project = PYPROJECT["project"]
    return {
        "console_scripts": dict(project["scripts"]),
        "fleetgate.commands": dict(project["entry-points"]["fleetgate.commands"]),
    }


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(sdist, wheel): the wheel is built from the sdist, as ``python -m build`` does."""
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(REPO)],
        capture_output=True,
        text=True,
        timeout=PATIENCE_S,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (sdist,) = out.glob("fleetgate-*.tar.gz")
    (wheel,) = out.glob("fleetgate-*.whl")
    return sdist, wheel


def wheel_names(wheel: Path) -> set[str]:
    with zipfile.ZipFile(wheel) as archive:
        return set(archive.namelist())


def dist_info(wheel: Path, name: str) -> str:
    with zipfile.ZipFile(wheel) as archive:
        (path,) = [n for n in archive.namelist() if n.endswith(f".dist-info/{name}")]
        return archive.read(path).decode()


def test_the_wheel_holds_every_module_the_schemas_and_the_dashboard(built) -> None:
    _, wheel = built
    names = wheel_names(wheel)
    shipped = packages()
    assert {"engine", "fleetgate", "reconciler", "simulate", "webhook", "sandbox"} <= set(shipped)
    expected = set().union(*(modules(p) for p in shipped))
    assert {n for n in names if n.endswith(".py")} == expected
    schemas = {f"engine/schemas/{p.name}" for p in (REPO / "schemas").glob("*.json")}
    assert schemas and schemas <= names
    assert {"reconciler/dashboard/index.html", "reconciler/dashboard/app.js"} <= names
    assert dashboard_files() <= names


def test_the_sdist_holds_what_the_wheel_is_built_from(built) -> None:
    sdist, _ = built
    with tarfile.open(sdist) as archive:
        names = {n.partition("/")[2] for n in archive.getnames()}
    assert {"pyproject.toml", "README.md"} <= names
    assert {f"schemas/{p.name}" for p in (REPO / "schemas").glob("*.json")} <= names
    assert set().union(*(modules(p) for p in packages())) <= names
    assert dashboard_files() <= names


def test_every_entry_point_names_a_function_of_a_module_in_the_wheel(built) -> None:
    _, wheel = built
    parser = configparser.ConfigParser(delimiters=("=",))
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # names keep their case
    parser.read_string(dist_info(wheel, "entry_points.txt"))
    found = {group: dict(parser[group]) for group in parser.sections()}
    assert found == declared_entry_points()
    names = wheel_names(wheel)
    with zipfile.ZipFile(wheel) as archive:
        for group in found.values():
            for target in group.values():
                module, _, function = target.partition(":")
                path = module.replace(".", "/")
                (source,) = {f"{path}.py", f"{path}/__init__.py"} & names
                tree = ast.parse(archive.read(source))
                defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
                assert function in defined, target


def test_matplotlib_is_only_in_the_report_extra(built) -> None:
    _, wheel = built
    metadata = Parser().parsestr(dist_info(wheel, "METADATA"))
    assert "report" in metadata.get_all("Provides-Extra", [])
    requires = metadata.get_all("Requires-Dist", [])
    runtime = [r for r in requires if "extra ==" not in r]
    assert not [r for r in runtime if re.match(r"(matplotlib|numpy)\b", r)], runtime
    assert any(
        r.startswith("matplotlib") and re.search(r"extra == ['\"]report['\"]", r) for r in requires
    ), requires


CHILD = textwrap.dedent(
    """
    import contextlib, io, json, sys
    from importlib.metadata import entry_points

    root, policies = sys.argv[1:]
    loaded = {}
    for group in ("console_scripts", "fleetgate.commands"):
        for point in entry_points(group=group):
            if point.dist is not None and point.dist.name == "fleetgate":
                function = point.load()
                loaded[f"{group}:{point.name}"] = sys.modules[function.__module__].__file__
    from fleetgate.cli import main
    from reconciler.dashboard import asset

    with contextlib.redirect_stdout(io.StringIO()):
        validated = main(["validate", policies])
    from engine.policy.schema import schema_dir

    page = asset("")
    print(json.dumps({
        "loaded": loaded,
        "validate": validated,
        "schemas": str(schema_dir()),
        "page": page is not None and page[0].lstrip().lower().startswith(b"<!doctype html"),
        "packages": {m: sys.modules[m].__file__ for m in
                     ("engine", "fleetgate", "reconciler", "simulate", "webhook", "sandbox")
                     if m in sys.modules},
    }))
    """
)


def test_the_unpacked_wheel_runs_the_cli(built, tmp_path: Path) -> None:
    _, wheel = built
    root = tmp_path / "site"
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(root)
    dependencies = sysconfig.get_paths()["purelib"]  # the third-party packages, not this tree
    done = subprocess.run(
        [sys.executable, "-S", "-c", CHILD, str(root), str(REPO / "policies")],
        cwd=tmp_path,
        env={"PYTHONPATH": f"{root}:{dependencies}", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=PATIENCE_S,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout)
    expected = {
        f"{group}:{name}" for group, points in declared_entry_points().items() for name in points
    }
    assert set(found["loaded"]) == expected
    for where in (*found["loaded"].values(), *found["packages"].values()):
        assert Path(where).is_relative_to(root), where
    assert found["validate"] == 0
    assert Path(found["schemas"]) == root / "engine" / "schemas"
    assert found["page"]


def test_the_image_copies_every_package_and_installs_no_extra() -> None:
    dockerfile = (REPO / "deploy" / "Dockerfile").read_text()
    copied = set(re.findall(r"^COPY (\S+) \1$", dockerfile, flags=re.MULTILINE))
    wheel = PYPROJECT["tool"]["hatch"]["build"]["targets"]["wheel"]
    assert set(wheel["packages"]) | set(wheel["force-include"]) <= copied
    assert set(packages()) <= set(wheel["packages"])
    commands = "\n".join(line for line in dockerfile.splitlines() if not line.startswith("#"))
    installs = re.findall(r"pip install [^\n]*", commands)
    assert installs and all("[" not in line for line in installs), installs
    (user,) = re.findall(r"^USER (\S+)$", dockerfile, flags=re.MULTILINE)
    assert user.split(":")[0] not in ("0", "root")
