"""The demo's dashboard: the reconciler's visibility API registered with the sandbox as an
aggregated API (as deploy/karmada-apiserver/visibility.yaml registers it with a karmada-apiserver),
and ``fleetgate dashboard`` run with the demo's kubeconfig, as a user would run it."""

from __future__ import annotations

import base64
import contextlib
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path

import kubernetes
import yaml

from reconciler.api import create_app, visibility_app
from reconciler.loop import Reconciler
from reconciler.visibility import read_request_header
from sandbox import tls
from sandbox.server import Sandbox
from webhook.serve import WebhookServer

REPO = Path(__file__).resolve().parents[2]
APISERVICE = REPO / "deploy" / "karmada-apiserver" / "visibility.yaml"
STARTUP = 60.0  # real seconds for `fleetgate dashboard` to say its address


class DashboardError(Exception):
    """The dashboard could not be started."""


def serve_visibility(
    stack: contextlib.ExitStack,
    sandbox: Sandbox,
    api: kubernetes.client.ApiClient,
    reconciler: Reconciler,
    directory: Path,
) -> None:
    """Serve the reconciler's visibility API over HTTPS on 127.0.0.1, asking for the sandbox's
    front-proxy certificate, and register it with the sandbox (its APIService, as deployed)."""
    config = read_request_header(api)
    if config is None:
        raise DashboardError("the sandbox publishes no front-proxy CA")
    served = tls.generate()
    directory.mkdir(parents=True, exist_ok=True)
    cert, key = directory / "tls.crt", directory / "tls.key"
    cert.write_bytes(served.cert_pem + served.ca_pem)
    key.write_bytes(served.key_pem)
    app = visibility_app(create_app(reconciler), config)
    server = WebhookServer(app, "127.0.0.1", 0, tls=(cert, key), client_ca=config.client_ca)
    server.start()
    stack.callback(server.stop)
    registration = next(
        d for d in yaml.safe_load_all(APISERVICE.read_text()) if d and d["kind"] == "APIService"
    )
    registration["spec"]["caBundle"] = base64.b64encode(served.ca_pem).decode()
    kubernetes.client.CustomObjectsApi(api).create_cluster_custom_object(
        "apiregistration.k8s.io", "v1", "apiservices", registration
    )
    service = registration["spec"]["service"]
    host, port = server.address
    where = (service["namespace"], service["name"], int(service.get("port", 443)))
    sandbox.service_urls[where] = f"https://{host}:{port}"


def start_dashboard(stack: contextlib.ExitStack, kubeconfig: Path) -> str:
    """``fleetgate dashboard --kubeconfig KUBECONFIG --port 0``: its address; stopped with the
    stack."""
    command = [sys.executable, "-m", "fleetgate", "dashboard", "--kubeconfig", str(kubeconfig),
               "--port", "0"]  # fmt: skip
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env
    )
    stack.callback(stop, process)
    said: queue.Queue[str] = queue.Queue()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            said.put(line)
        said.put("")

    threading.Thread(target=read, name="dashboard-output", daemon=True).start()
    try:
        line = said.get(timeout=STARTUP)
    except queue.Empty:
        raise DashboardError(f"fleetgate dashboard said nothing within {STARTUP:g} s") from None
    if not line.startswith("dashboard: "):
        raise DashboardError(f"fleetgate dashboard did not start: {line.strip() or 'it exited'}")
    return line.removeprefix("dashboard: ").strip()


def stop(process: subprocess.Popen[str]) -> None:
    """Terminate ``process`` and wait for it; kill it when it does not end within 10 s."""
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)
