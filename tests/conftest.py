from __future__ import annotations

import os
import shutil
import tempfile
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NoReturn

import pytest

from engine.errors import PolicyIssue, PolicyLoadError
from engine.policy.policyset import PolicySet, load_policy_set

REPO = Path(__file__).resolve().parent.parent


def missing(reason: str) -> NoReturn:
    """Skip for want of something outside Python; under ``CI=true`` fail instead: CI installs
    what the suite needs (``make test`` runs scripts/test-tools.sh), so a skip there would hide
    a test that never ran."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (CI=true: scripts/test-tools.sh must provide it)", pytrace=False)
    pytest.skip(reason)


def require_tool(name: str) -> str:
    """The path of command ``name``; skips without it, or fails under ``CI=true``."""
    path = shutil.which(name)
    if path is None:
        missing(f"{name} is not installed")
    return path


# The longest runs (about 10 s to 90 s each on two idle cores), started first: in a parallel run
# (make test, pytest-xdist) a worker that began one of them near the end would leave the other
# cores idle until it finishes. The rest keep pytest's order; a name no longer here costs nothing.
LONG_RUNS = (
    "tests/reconciler/test_kill.py",
    "tests/reconciler/test_chaos.py",
    "tests/bench/test_cycle_instructions.py",
    "tests/test_demo.py",
    "tests/reconciler/test_lastgood.py",
    "tests/hostile/test_soak.py",
    "tests/simulate/test_sim_docs.py",
    "tests/bench/test_e2e_load.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        path = item.nodeid.partition("::")[0]
        return LONG_RUNS.index(path) if path in LONG_RUNS else len(LONG_RUNS)

    items.sort(key=rank)  # stable: the same order in every worker


@pytest.fixture(scope="session", autouse=True)
def _temporary_files(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """What the tests, and the processes they start, write through ``tempfile`` goes under
    pytest's base temporary directory (which pytest prunes), not into /tmp: the kubernetes
    client copies a kubeconfig's certificates into temporary files that only a clean exit
    removes, and several tests SIGKILL the processes they start."""
    folder = str(tmp_path_factory.mktemp("tmp"))
    before = os.environ.get("TMPDIR"), tempfile.tempdir
    os.environ["TMPDIR"], tempfile.tempdir = folder, folder
    yield
    if before[0] is None:
        os.environ.pop("TMPDIR", None)
    else:
        os.environ["TMPDIR"] = before[0]
    tempfile.tempdir = before[1]


DOCUMENT = """\
apiVersion: fleetgate.io/v1alpha1
kind: {kind}
metadata:
  name: {name}
spec:
{spec}
"""


def policy_doc(kind: str, name: str, spec: str) -> str:
    """A policy document whose spec body (YAML, dedented here) starts on line 6."""
    body = textwrap.indent(textwrap.dedent(spec).strip("\n"), "  ")
    return DOCUMENT.format(kind=kind, name=name, spec=body)


def queue_doc(name: str, spec: str = "weight: 1") -> str:
    return policy_doc("Queue", name, spec)


def configmap_volume(root: Path, files: dict[str, str], stamp: str) -> Path:
    """Lay ``files`` out as the kubelet's AtomicWriter mounts a ConfigMap; update if it exists.

    ``..<stamp>/`` holds the real files, ``..data`` points at it and each visible name is a
    symlink through ``..data``. An update writes a new ``..<stamp>/``, swaps ``..data`` with one
    rename and removes the old directory.
    """
    root.mkdir(exist_ok=True)
    old = (root / "..data").readlink() if (root / "..data").is_symlink() else None
    version = root / f"..{stamp}"
    version.mkdir()
    for name, text in files.items():
        (version / name).write_text(text)
    (root / "..data_tmp").symlink_to(version.name)
    (root / "..data_tmp").replace(root / "..data")  # rename(2): the atomic swap
    for name in files:
        if not (root / name).is_symlink():
            (root / name).symlink_to(Path("..data") / name)
    if old is not None:
        shutil.rmtree(root / old)
    return root


@pytest.fixture
def write(tmp_path: Path) -> Callable[[str, str], Path]:
    """Write a policy file (dedented) under a fresh directory and return its path."""

    def _write(name: str, text: str) -> Path:
        path = tmp_path / "policies" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
        return path

    return _write


@pytest.fixture
def load_issues(tmp_path: Path) -> Callable[[], list[PolicyIssue]]:
    def _issues() -> list[PolicyIssue]:
        with pytest.raises(PolicyLoadError) as info:
            load_policy_set([tmp_path / "policies"])
        return list(info.value.issues)

    return _issues


@pytest.fixture
def load_ok(tmp_path: Path) -> Callable[[], PolicySet]:
    def _load() -> PolicySet:
        return load_policy_set([tmp_path / "policies"])

    return _load


@pytest.fixture(scope="session")
def karmada_crds() -> Path:
    """The real Karmada CRDs; tests that need them skip with a reason when absent."""
    path = Path(
        os.environ.get("FLEETGATE_KARMADA_CRDS", REPO.parent / "shared" / "crds" / "karmada")
    )
    if not path.is_dir():
        missing(f"Karmada CRDs not found at {path}; set FLEETGATE_KARMADA_CRDS")
    return path
