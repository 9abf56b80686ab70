"""A kubeconfig for the sandbox, read by ``kubernetes.config.load_kube_config`` and kubectl."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import yaml

CONTEXT = "fleetgate-sandbox"


def kubeconfig(
    server: str, ca_pem: bytes | None = None, token: str | None = None
) -> dict[str, Any]:
    """One cluster, user and context named ``fleetgate-sandbox``; CA data inline (HTTPS)."""
    cluster: dict[str, Any] = {"server": server}
    if ca_pem:
        cluster["certificate-authority-data"] = base64.b64encode(ca_pem).decode()
    user: dict[str, Any] = {"token": token} if token else {}
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": CONTEXT, "cluster": cluster}],
        "users": [{"name": CONTEXT, "user": user}],
        "contexts": [
            {
                "name": CONTEXT,
                "context": {"cluster": CONTEXT, "user": CONTEXT, "namespace": "default"},
            }
        ],
        "current-context": CONTEXT,
        "preferences": {},
    }


def write_kubeconfig(
    path: str | Path, server: str, ca_pem: bytes | None = None, token: str | None = None
) -> Path:
    """Write the kubeconfig (mode 0600: it may hold a token) and return its path."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(yaml.safe_dump(kubeconfig(server, ca_pem, token), sort_keys=False))
    target.chmod(0o600)
    return target
