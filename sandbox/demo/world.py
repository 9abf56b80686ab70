"""Everything the demo runs, started in one process on 127.0.0.1 and stopped in reverse order.

1. the sandbox API server over HTTPS (its store stamps objects with the demo's scaled clock);
2. fleetgate's admission webhook over HTTPS (its own throw-away certificate), registered as the
   sandbox's webhook with deploy/karmada-apiserver's configurations, pointed at it;
3. the tenants' namespaces, PriorityClasses and PropagationPolicies of the example fleet
   (examples/fleet-snapshot.yaml), created through the kubernetes client as a platform team's
   ``kubectl apply`` would;
4. Karmada's controllers over examples/fleet.yaml on the scaled clock, with the sandbox's faults;
5. the reconciler (informers through the kubernetes client, passes on events) on the same clock;
6. its visibility API, registered with the sandbox as an aggregated API, and ``fleetgate
   dashboard`` reading it with the demo's kubeconfig (``sandbox.demo.dashboard``).
"""

from __future__ import annotations

import base64
import contextlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kubernetes
import yaml

from engine.members import Fleet, load_fleet
from engine.policy.reload import PolicyHolder
from reconciler.loop import Reconciler
from reconciler.settings import ReconcilerSettings
from sandbox import tls
from sandbox.clock import ScaledClock
from sandbox.demo.dashboard import DashboardError, serve_visibility, start_dashboard
from sandbox.faults import Faults
from sandbox.karmada import KarmadaControllers
from sandbox.karmada.controllers import Timings
from sandbox.server import Sandbox
from sandbox.store import Store
from webhook.app import create_app
from webhook.fit import Fleet as WebhookFleet
from webhook.serve import WebhookServer

REPO = Path(__file__).resolve().parents[2]
FLEET_FILE = REPO / "examples" / "fleet.yaml"
SNAPSHOT = REPO / "examples" / "fleet-snapshot.yaml"
POLICIES = REPO / "policies"
DEPLOY = REPO / "deploy" / "karmada-apiserver"
TENANT_NAMESPACES = ("research", "inference", "analytics")
PROPAGATION = ("policy.karmada.io", "v1alpha1")

log = logging.getLogger("fleetgate.demo")


class DemoError(Exception):
    """The demo could not start: a missing file, a port, a component that did not come up."""


@dataclass(slots=True)
class World:
    clock: ScaledClock
    sandbox: Sandbox
    faults: Faults
    api: kubernetes.client.ApiClient
    karmada: KarmadaControllers
    reconciler: Reconciler
    policies: PolicyHolder
    dashboard: str  # the address of `fleetgate dashboard`, reading the fleet as the admin

    @property
    def custom(self) -> kubernetes.client.CustomObjectsApi:
        return kubernetes.client.CustomObjectsApi(self.api)


@contextlib.contextmanager
def started(speed: float, workdir: Path, *, tick: float = 0.1) -> Iterator[World]:
    """Start every component (see the module docstring); stop them all on the way out."""
    for needed in (FLEET_FILE, SNAPSHOT, POLICIES, DEPLOY):
        if not needed.exists():
            raise DemoError(f"{needed} is missing: the demo runs from a fleetgate source tree")
    policies = PolicyHolder.for_paths([POLICIES])
    if not policies.reload():
        raise DemoError(f"the policies in {POLICIES} do not load: {policies.status.errors}")
    clock = ScaledClock(speed)
    sandbox = Sandbox(Store(clock=clock.now, event_log_limit=20_000))
    faults = Faults(seed=0).attach(sandbox)
    with contextlib.ExitStack() as stack:
        sandbox.start(port=0)
        stack.callback(sandbox.stop)
        kubeconfig = sandbox.write_kubeconfig(workdir / "kubeconfig")
        api = client(kubeconfig)  # the demo's own requests: submissions, listings
        stack.callback(api.close)
        watching = client(kubeconfig, pool=32)  # the reconciler's: a watch per kind
        stack.callback(watching.close)
        webhook_url, ca_bundle = _start_webhook(stack, policies, clock, workdir / "webhook-tls")
        register_webhook(api, webhook_url, ca_bundle)
        seed_tenants(api)
        karmada = KarmadaControllers(
            sandbox.store,
            Fleet(load_fleet(FLEET_FILE), clock.now()),
            clock.now,
            Timings(tick=tick),
            faults=faults,
        )
        karmada.run_once()  # the Cluster objects exist before the reconciler lists them
        karmada.start()
        stack.callback(karmada.stop)
        reconciler = Reconciler(
            watching,
            policies,
            ReconcilerSettings(debounce=0.05, resync=5.0),
            clock=clock.now,
        )
        reconciler.start()
        stack.callback(reconciler.stop)
        stack.callback(karmada.stop)  # first: no event is being written when watches close
        if not reconciler.wait_synced(30):
            raise DemoError("the reconciler's informers did not sync within 30 s")
        try:
            serve_visibility(stack, sandbox, api, reconciler, workdir / "visibility-tls")
            dashboard = start_dashboard(stack, kubeconfig)
        except DashboardError as error:
            raise DemoError(str(error)) from error
        yield World(clock, sandbox, faults, api, karmada, reconciler, policies, dashboard)


def client(kubeconfig: Path, pool: int = 10) -> kubernetes.client.ApiClient:
    configuration = kubernetes.client.Configuration()
    kubernetes.config.load_kube_config(
        config_file=str(kubeconfig), client_configuration=configuration
    )
    configuration.connection_pool_maxsize = pool
    return kubernetes.client.ApiClient(configuration)


def _start_webhook(
    stack: contextlib.ExitStack, policies: PolicyHolder, clock: ScaledClock, directory: Path
) -> tuple[str, str]:
    """Serve the webhook on 127.0.0.1 over HTTPS; (base URL, caBundle)."""
    served = tls.generate()
    directory.mkdir(parents=True, exist_ok=True)
    cert, key = directory / "tls.crt", directory / "tls.key"
    cert.write_bytes(served.cert_pem + served.ca_pem)
    key.write_bytes(served.key_pem)
    fleet, _ = WebhookFleet.from_files([SNAPSHOT])
    app = create_app(policies, fleet=fleet, clock=clock.now)
    server = WebhookServer(app, "127.0.0.1", 0, tls=(cert, key), threads=4)
    server.start()
    stack.callback(server.stop)
    host, port = server.address
    return f"https://{host}:{port}", base64.b64encode(served.ca_pem).decode()


def register_webhook(api: kubernetes.client.ApiClient, base_url: str, ca_bundle: str) -> None:
    admission = kubernetes.client.AdmissionregistrationV1Api(api)
    mutating = _configuration("mutatingwebhookconfiguration.yaml", base_url, ca_bundle)
    validating = _configuration("validatingwebhookconfiguration.yaml", base_url, ca_bundle)
    admission.create_mutating_webhook_configuration(mutating)
    admission.create_validating_webhook_configuration(validating)


def _configuration(file: str, base_url: str, ca_bundle: str) -> dict[str, Any]:
    """A deployed webhook configuration with each ``clientConfig`` pointed at ``base_url``."""
    path = DEPLOY / file
    document = yaml.safe_load(path.read_text())
    for webhook in document.get("webhooks") or []:
        url = str((webhook.get("clientConfig") or {}).get("url") or "")
        if ":443/" not in url:
            raise DemoError(f"{path}: webhook {webhook.get('name')}: clientConfig.url {url!r}")
        webhook["clientConfig"] = {"url": base_url + "/" + url.split(":443/", 1)[1]}
        webhook["clientConfig"]["caBundle"] = ca_bundle
    return document


def seed_tenants(api: kubernetes.client.ApiClient) -> None:
    core = kubernetes.client.CoreV1Api(api)
    scheduling = kubernetes.client.SchedulingV1Api(api)
    custom = kubernetes.client.CustomObjectsApi(api)
    for namespace in TENANT_NAMESPACES:
        core.create_namespace({"metadata": {"name": namespace}})
    for item in snapshot_items():
        meta = item["metadata"]
        clean = {k: v for k, v in meta.items() if k in ("name", "namespace", "labels")}
        if item["kind"] == "PriorityClass" and not meta["name"].startswith("system-"):
            scheduling.create_priority_class({**item, "metadata": clean})
        elif item["kind"] == "PropagationPolicy" and meta.get("namespace") in TENANT_NAMESPACES:
            labels = {
                k: v
                for k, v in (meta.get("labels") or {}).items()
                if not k.startswith("propagationpolicy.karmada.io/")
            }
            body = {"apiVersion": item["apiVersion"], "kind": item["kind"], "spec": item["spec"]}
            body["metadata"] = {"name": meta["name"], "namespace": meta["namespace"]}
            if labels:
                body["metadata"]["labels"] = labels
            custom.create_namespaced_custom_object(
                *PROPAGATION, meta["namespace"], "propagationpolicies", body
            )


def snapshot_items() -> Iterator[dict[str, Any]]:
    """Every object of examples/fleet-snapshot.yaml (its Lists unpacked)."""
    for document in yaml.safe_load_all(SNAPSHOT.read_text()):
        if document:
            yield from document.get("items", [document])
