"""``fleetgate kubeconfig``: a kubeconfig for one of fleetgate's ServiceAccounts on the
karmada-apiserver, from its token Secret, for the Secret the Deployment mounts.

The release manifest for the karmada-apiserver (dist/fleetgate-karmada.yaml) creates the
ServiceAccounts ``fleetgate-reconciler`` and ``fleetgate-webhook`` with a
``kubernetes.io/service-account-token`` Secret each; the karmada kube-controller-manager fills in
the token. This command reads it with the caller's (admin) kubeconfig and prints a kubeconfig
with that token, the karmada-apiserver's CA and the address the pods use (``--server``; by
default the address of the caller's kubeconfig). docs/install.md, step 3.
"""

from __future__ import annotations

import argparse
import base64
import sys
import time
from pathlib import Path
from typing import Any

TOKEN_TYPE = "kubernetes.io/service-account-token"
SA_NAME = "kubernetes.io/service-account.name"
WAIT = 30.0  # seconds for the controller to fill in a token


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "kubeconfig",
        help="print a kubeconfig for one of fleetgate's ServiceAccounts (from its token Secret)",
        description="Read the token Secret of the ServiceAccount NAMESPACE/NAME with your "
        "kubeconfig and print a kubeconfig that authenticates as that ServiceAccount, for the "
        "Secret fleetgate's Deployment mounts (docs/install.md).",
    )
    parser.add_argument("--kubeconfig", help="your kubeconfig (KUBECONFIG, ~/.kube/config)")
    parser.add_argument("--context", help="the kubeconfig context (its current one)")
    parser.add_argument(
        "--service-account",
        required=True,
        metavar="NAMESPACE/NAME",
        help="e.g. fleetgate-system/fleetgate-reconciler",
    )
    parser.add_argument(
        "--server",
        metavar="URL",
        help="the karmada-apiserver's address as the pods reach it (default: your kubeconfig's "
        "server), e.g. https://karmada-apiserver.karmada-system.svc:5443",
    )
    parser.set_defaults(handler=run)


class KubeconfigError(Exception):
    """What stops the kubeconfig being made; the message says what to do."""


def run(args: argparse.Namespace) -> int:
    namespace, _, name = str(args.service_account).partition("/")
    if not namespace or not name or "/" in name:
        print("fleetgate kubeconfig: --service-account must be NAMESPACE/NAME", file=sys.stderr)
        return 2
    try:
        text = make(args.kubeconfig, args.context, namespace, name, args.server, WAIT)
    except KubeconfigError as error:
        print(f"fleetgate kubeconfig: {error}", file=sys.stderr)
        return 1
    sys.stdout.write(text)
    return 0


def make(
    kubeconfig: str | None,
    context: str | None,
    namespace: str,
    name: str,
    server: str | None,
    wait: float = 30.0,
) -> str:
    """The kubeconfig's YAML text."""
    import kubernetes
    import yaml
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    configuration = kubernetes.client.Configuration()
    try:
        kubernetes.config.load_kube_config(
            config_file=kubeconfig, context=context, client_configuration=configuration
        )
    except (OSError, ValueError, TypeError, kubernetes.config.ConfigException) as error:
        raise KubeconfigError(f"kubeconfig {kubeconfig or '(default)'}: {error}") from error
    with kubernetes.client.ApiClient(configuration) as api:
        core = kubernetes.client.CoreV1Api(api)
        deadline = time.monotonic() + wait
        while True:
            try:
                token, ca = _token(core, namespace, name)
            except ApiException as error:
                raise KubeconfigError(
                    f"cannot read the Secrets of namespace {namespace}: {error.status} "
                    f"{error.reason}"
                ) from error
            except HTTPError as error:
                raise KubeconfigError(f"cannot reach {configuration.host}: {error}") from error
            if token or time.monotonic() >= deadline:
                break
            time.sleep(1.0)  # the controller fills the token in moments after the create
    if not token:
        raise KubeconfigError(
            f"no filled {TOKEN_TYPE} Secret for the ServiceAccount {namespace}/{name}: apply "
            "dist/fleetgate-karmada.yaml first (it creates the ServiceAccount and its Secret)"
        )
    if ca is None and configuration.ssl_ca_cert:
        ca = Path(configuration.ssl_ca_cert).read_bytes()
    cluster: dict[str, Any] = {"server": server or configuration.host}
    if ca:
        cluster["certificate-authority-data"] = base64.b64encode(ca).decode()
    user = f"{namespace}-{name}"
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "karmada-apiserver", "cluster": cluster}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [
            {
                "name": user,
                "context": {"cluster": "karmada-apiserver", "user": user, "namespace": namespace},
            }
        ],
        "current-context": user,
    }
    return yaml.safe_dump(document, sort_keys=False)


def _token(core: Any, namespace: str, name: str) -> tuple[str, bytes | None]:
    """The ServiceAccount's token and the CA beside it, from the first filled Secret."""
    found = core.list_namespaced_secret(namespace)
    for secret in sorted(found.items, key=lambda s: s.metadata.name):
        notes = secret.metadata.annotations or {}
        data = secret.data or {}
        if secret.type != TOKEN_TYPE or notes.get(SA_NAME) != name or not data.get("token"):
            continue
        ca = base64.b64decode(data["ca.crt"]) if data.get("ca.crt") else None
        return base64.b64decode(data["token"]).decode(), ca
    return "", None
