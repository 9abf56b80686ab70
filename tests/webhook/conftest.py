from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from flask import Flask

from engine.policy.policyset import load_policy_set
from engine.policy.reload import PolicyHolder
from tests.conftest import REPO
from tests.webhook.helpers import WireClient, fixed_clock
from webhook.app import create_app
from webhook.fit import Fleet
from webhook.serve import WebhookServer


@pytest.fixture
def policy_dir(tmp_path: Path) -> Path:
    """A private copy of the example policy set, free to edit: the files of the policy
    ConfigMap as the webhook's volume holds them (without policies/kustomization.yaml)."""
    live = tmp_path / "live-policies"
    shutil.copytree(REPO / "policies", live, ignore=shutil.ignore_patterns("kustomization.yaml"))
    return live


@pytest.fixture
def holder(policy_dir: Path) -> PolicyHolder:
    holder = PolicyHolder(lambda: load_policy_set([policy_dir]))
    assert holder.reload(), holder.status.errors
    return holder


@pytest.fixture(scope="session")
def fleet() -> Fleet:
    fleet, issues = Fleet.from_files([REPO / "examples" / "fleet-snapshot.yaml"])
    assert fleet.clusters, issues
    return fleet


@pytest.fixture
def make_app(holder: PolicyHolder, fleet: Fleet) -> Callable[..., Flask]:
    def _make(live: PolicyHolder | None = None, **options: object) -> Flask:
        settings: dict = {"fleet": fleet, "clock": fixed_clock, **options}
        return create_app(live or holder, **settings)

    return _make


class Switch:
    """A WSGI app that passes each request to the app of the current test."""

    def __init__(self) -> None:
        self.app: Flask | None = None

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        assert self.app is not None, "no test is using the shared server"
        return self.app(environ, start_response)


@pytest.fixture(scope="session")
def shared_server() -> Iterator[tuple[WebhookServer, Switch]]:
    """One real server for the session (stopping one takes cheroot ~0.5 s)."""
    switch = Switch()
    server = WebhookServer(switch, "127.0.0.1", 0, threads=4)  # type: ignore[arg-type]
    server.start()
    yield server, switch
    server.stop()


@pytest.fixture(params=["test-client", "http"])
def client(
    request: pytest.FixtureRequest,
    make_app: Callable[..., Flask],
    shared_server: tuple[WebhookServer, Switch],
) -> Iterator[Any]:
    """The app over Flask's test client, and over real HTTP on a cheroot server on 127.0.0.1.

    Both see the ``holder`` fixture's live policy set: reload it to change policies.
    """
    app = make_app()
    if request.param == "test-client":
        yield app.test_client()
        return
    server, switch = shared_server
    switch.app = app
    wire = WireClient(*server.address)
    try:
        yield wire
    finally:
        wire.close()
        switch.app = None
