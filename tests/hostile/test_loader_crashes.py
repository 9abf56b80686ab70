"""A loader that crashes is a failed reload: the last good set stays live and every surface says so.

Reloads are driven the way the webhook drives them: ``PolicyHolder.reload`` from the policy
``Poller`` (``webhook.poll``), observed through the holder's status and the Flask test client.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from flask import Flask

from engine.policy.policyset import PolicySet, load_policy_set
from engine.policy.reload import PolicyHolder
from engine.policy.source import policy_files
from tests.conftest import REPO
from webhook.poll import Poller, fingerprint

NESTED = "apiVersion: fleetgate.io/v1alpha1\nkind: Queue\nspec: " + "[" * 5000 + "]" * 5000 + "\n"


def poller_for(directory: Path, holder: PolicyHolder) -> Poller:
    return Poller(lambda: fingerprint(policy_files([directory])[0]), holder.reload, 1.0, "test")


def readyz(app: Flask) -> tuple[int, str]:
    response = app.test_client().get("/readyz")
    return response.status_code, response.get_data(as_text=True)


def metric(app: Flask, name: str) -> float:
    text = app.test_client().get("/metrics").get_data(as_text=True)
    [line] = [line for line in text.splitlines() if line.startswith(f"{name} ")]
    return float(line.split()[1])


def test_deep_nesting_is_a_failed_reload_with_its_place(
    policy_dir: Path, holder: PolicyHolder, make_app: Callable[..., Flask]
) -> None:
    app = make_app()
    live = holder.status.version
    poller = poller_for(policy_dir, holder)
    (policy_dir / "nested.yaml").write_text(NESTED)
    assert poller.check()
    status = holder.status
    assert (status.version, status.healthy, status.failures) == (live, False, 1)
    [issue] = status.errors
    assert (issue.file, issue.line) == (str(policy_dir / "nested.yaml"), 3)
    code, text = readyz(app)
    assert code == 200
    assert "the last reload failed" in text
    assert "nested.yaml:3:" in text and "nested deeper than" in text
    assert metric(app, "fleetgate_policy_healthy") == 0
    assert metric(app, "fleetgate_policy_reload_failures_total") == 1


def test_any_exception_from_the_loader_is_a_failed_reload(make_app: Callable[..., Flask]) -> None:
    good = load_policy_set([REPO / "policies"])
    crash: list[BaseException] = []

    def load() -> PolicySet:
        if crash:
            raise crash[0]
        return good

    holder = PolicyHolder(load)
    assert holder.reload()
    app = make_app(holder)
    for error in (RecursionError("maximum recursion depth exceeded"), MemoryError()):
        crash[:] = [error]
        assert holder.reload() is False
    status = holder.status
    assert (status.version, status.healthy, status.failures) == (good.version, False, 2)
    assert holder.current is good
    _, text = readyz(app)
    assert "policy loader failed: MemoryError" in text
    assert metric(app, "fleetgate_policy_healthy") == 0
    crash.clear()
    assert holder.reload()
    assert holder.status.healthy
    assert "failed" not in readyz(app)[1]


def test_readyz_forgets_the_error_once_a_recreated_directory_loads(
    policy_dir: Path, holder: PolicyHolder, make_app: Callable[..., Flask]
) -> None:
    app = make_app()
    poller = poller_for(policy_dir, holder)
    (policy_dir / "nested.yaml").write_text(NESTED)
    assert poller.check()
    shutil.rmtree(policy_dir)
    assert poller.check()
    assert not holder.status.healthy
    assert "the last reload failed" in readyz(app)[1]
    shutil.copytree(
        REPO / "policies", policy_dir, ignore=shutil.ignore_patterns("kustomization.yaml")
    )
    assert poller.check()
    status = holder.status
    assert status.healthy and status.errors == ()
    code, text = readyz(app)
    assert code == 200
    assert text == f"ready: policy version {status.version}\n"
    assert metric(app, "fleetgate_policy_healthy") == 1
