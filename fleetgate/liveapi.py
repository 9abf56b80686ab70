"""The live commands' connection: GETs with the user's own kubeconfig (``fleetgate.livecli``),
and what an API server's refusal means for its user."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import kubernetes
import urllib3
import yaml

PREFIX = "/apis/visibility.fleetgate.io/v1alpha1"
JSON = "application/json"


KEPT_HEADERS = ("ETag", "Cache-Control")  # what a forwarded answer keeps of the server's


class Fetched(NamedTuple):
    status: int
    reason: str
    body: bytes
    headers: dict[str, str]  # those of KEPT_HEADERS it had


class LiveError(Exception):
    """What stops a live command, said for its user."""


class Live:
    """GETs with the user's kubeconfig."""

    def __init__(self, kubeconfig: str | None, context: str | None) -> None:
        configuration = kubernetes.client.Configuration()
        try:
            kubernetes.config.load_kube_config(
                config_file=kubeconfig, context=context, client_configuration=configuration
            )
        except (kubernetes.config.ConfigException, OSError, ValueError, yaml.YAMLError) as error:
            said = " ".join(str(error).split())  # one line, a YAML error's marks too
            raise LiveError(f"cannot read the kubeconfig: {said}") from error
        configuration.retries = 0
        self.api = kubernetes.client.ApiClient(configuration)
        self.namespace = _context_namespace(kubeconfig, context)

    def fetch(
        self,
        path: str,
        query: Sequence[tuple[str, str]] = (),
        headers: Mapping[str, str] | None = None,
    ) -> Fetched:
        """GET ``path`` as the user (with ``headers``, e.g. ``If-None-Match``): the API
        server's answer, whatever its status (``LiveError`` when it cannot be reached)."""
        try:
            request = self.api.param_serialize(
                "GET", path, query_params=list(query),
                header_params={"Accept": JSON, **(headers or {})}, auth_settings=["BearerToken"],
            )  # fmt: skip
            response = self.api.call_api(*request, _request_timeout=30)
            data = response.read()
        except (urllib3.exceptions.HTTPError, OSError) as error:
            raise LiveError(f"cannot reach the API server: {error}") from error
        kept = {k: v for k in KEPT_HEADERS if (v := response.getheader(k)) is not None}
        return Fetched(response.status, str(response.reason), data, kept)

    def get(self, path: str, query: Sequence[tuple[str, str]] = ()) -> dict[str, Any]:
        status, reason, data, _ = self.fetch(path, query)
        if not 200 <= status <= 299:
            raise _refused(status, reason, data, path)
        try:
            return dict(json.loads(data or b"{}"))
        except ValueError as error:
            raise LiveError(f"{path}: the API server's answer is not JSON") from error

    def close(self) -> None:
        self.api.close()


def _context_namespace(kubeconfig: str | None, context: str | None) -> str:
    """The namespace of the context used (``default`` when it names none)."""
    try:
        contexts, active = kubernetes.config.list_kube_config_contexts(config_file=kubeconfig)
    except (kubernetes.config.ConfigException, OSError, ValueError, yaml.YAMLError):
        return "default"
    chosen = next((c for c in contexts if c.get("name") == context), None) if context else active
    return str(((chosen or {}).get("context") or {}).get("namespace") or "default")


def _refused(status: int, reason: str, body: bytes, path: str) -> LiveError:
    said = _message(body) or reason
    if status == 403:
        return Forbidden(said)
    if status == 404 and path.startswith(PREFIX) and not said.endswith("not found"):
        return LiveError(
            "this API server does not serve the visibility API (visibility.fleetgate.io): "
            "register fleetgate serve --visibility-port with its APIService "
            "(deploy/karmada-apiserver/visibility.yaml)"
        )
    return LiveError(f"{status} {reason}: {said}")


class Forbidden(LiveError):
    pass


def _message(body: bytes) -> str:
    try:
        found = json.loads(body or b"{}")
    except ValueError:
        return ""
    return str(found.get("message") or "") if isinstance(found, dict) else ""
