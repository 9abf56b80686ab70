"""A karmada-apiserver for preflight to check: the sandbox with Karmada's CRDs, fleetgate's RBAC
of deploy/karmada-apiserver/, its webhook registered, member clusters joined."""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import kubernetes
import pytest
import yaml

from engine.members.model import MemberCluster
from engine.members.spec import ClusterSpec, NodeGroup
from engine.members.status import cluster_object
from engine.workloads.registry import known_kinds
from fleetgate.kubeconfigcli import make
from sandbox.schema import crd_directory, load_schemas
from sandbox.server import Sandbox
from sandbox.store import Store
from tests.conftest import REPO, missing
from tests.sandbox.test_webhooks import fleetgate_webhook, register

DEPLOY = REPO / "deploy" / "karmada-apiserver"
# the karmada-apiserver's part of the release but the webhook configurations (registered with
# the test's webhook URL where a test wants them): namespace, identities, RBAC, APIService
RBAC = ("reconciler-rbac.yaml", "webhook-rbac.yaml", "visibility.yaml")
RECONCILER = ("fleetgate-system", "fleetgate-reconciler")
NOW = dt.datetime(2026, 5, 1, tzinfo=dt.UTC)
EVERY_KIND = tuple(known_kinds())


@pytest.fixture(scope="module")
def crds() -> Path:
    """The Karmada CRDs (FLEETGATE_KARMADA_CRDS); skips without them, fails under CI."""
    directory = crd_directory()
    if not (directory / "work.karmada.io_resourcebindings.yaml").is_file():
        missing(f"the Karmada CRDs are not at {directory} (FLEETGATE_KARMADA_CRDS)")
    return directory


@contextlib.contextmanager
def karmada(crds: Path) -> Iterator[Sandbox]:
    """The sandbox with the CRDs of ``crds`` and fleetgate's RBAC applied."""
    with Sandbox(Store(schemas=load_schemas(crds))) as sandbox:
        for name in RBAC:
            for document in yaml.safe_load_all((DEPLOY / name).read_text()):
                kind = sandbox.store.resource_for(document["apiVersion"], document["kind"])
                sandbox.store.create(kind, document)
        yield sandbox


def join(sandbox: Sandbox, name: str, kinds: tuple[tuple[str, str], ...] = EVERY_KIND) -> None:
    """A Ready member cluster serving ``kinds`` (and the built-in kinds), as Karmada lists it."""
    spec = ClusterSpec(
        name, kinds=kinds, nodes=(NodeGroup.of(2, {"cpu": 32, "memory": 128 * 2**30}),)
    )
    join_spec(sandbox, spec)


def join_spec(sandbox: Sandbox, spec: ClusterSpec) -> None:
    cluster = cluster_object(MemberCluster(spec, NOW), NOW)
    stored = sandbox.store.create("clusters.cluster.karmada.io", cluster)
    stored["status"] = cluster["status"]
    sandbox.store.update_status("clusters.cluster.karmada.io", stored)


def reconciler_kubeconfig(sandbox: Sandbox, tmp_path: Path) -> Path:
    admin = sandbox.write_kubeconfig(tmp_path / "admin.kubeconfig")
    path = tmp_path / "reconciler.kubeconfig"
    path.write_text(make(str(admin), None, *RECONCILER, sandbox.url, wait=0.0))
    return path


@contextlib.contextmanager
def webhook_registered(sandbox: Sandbox, tmp_path: Path) -> Iterator[None]:
    """fleetgate's webhook on 127.0.0.1, registered with the shipped configurations."""
    admin = sandbox.write_kubeconfig(tmp_path / "register.kubeconfig")
    configuration = kubernetes.client.Configuration()
    kubernetes.config.load_kube_config(str(admin), client_configuration=configuration)
    with fleetgate_webhook(tmp_path / "tls") as (url, ca_bundle):
        with kubernetes.client.ApiClient(configuration) as api:
            register(api, url, ca_bundle)
        yield
