"""Fixtures: a sandbox API server on 127.0.0.1:0 per test, and clients built from its kubeconfig."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import kubernetes
import pytest

from sandbox.server import Sandbox
from sandbox.store import Store

IN_CI = os.environ.get("CI", "").lower() == "true"


@contextlib.contextmanager
def running_sandbox() -> Iterator[Sandbox]:
    """A sandbox API server on 127.0.0.1:0, stopped on the way out."""
    server = Sandbox(Store(event_log_limit=1000), bookmark_interval=0.5)
    server.start(port=0)
    try:
        yield server
    finally:
        server.stop(timeout=5)


@pytest.fixture
def sandbox() -> Iterator[Sandbox]:
    with running_sandbox() as server:
        yield server


@pytest.fixture
def kubeconfig(sandbox: Sandbox, tmp_path: Path) -> Path:
    return sandbox.write_kubeconfig(tmp_path / "kubeconfig")


@pytest.fixture
def api_client(kubeconfig: Path) -> Iterator[kubernetes.client.ApiClient]:
    configuration = kubernetes.client.Configuration()
    kubernetes.config.load_kube_config(
        config_file=str(kubeconfig), client_configuration=configuration
    )
    client = kubernetes.client.ApiClient(configuration)
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def core(api_client: kubernetes.client.ApiClient) -> kubernetes.client.CoreV1Api:
    return kubernetes.client.CoreV1Api(api_client)


@pytest.fixture
def custom(api_client: kubernetes.client.ApiClient) -> kubernetes.client.CustomObjectsApi:
    return kubernetes.client.CustomObjectsApi(api_client)


@pytest.fixture
def coordination(api_client: kubernetes.client.ApiClient) -> kubernetes.client.CoordinationV1Api:
    return kubernetes.client.CoordinationV1Api(api_client)
