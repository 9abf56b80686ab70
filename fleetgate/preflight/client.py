"""The API server as the checks see it: GETs and POSTs of JSON with the user's kubeconfig,
answered with the status and the decoded body, whatever the status. The checks take any object
with these two methods (:class:`Api`), so they can be tried without a server."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple, Protocol

TIMEOUT_S = 30.0  # one request; a webhook call inside a dry run is bounded by its own timeout
Query = Sequence[tuple[str, str]]


class Answer(NamedTuple):
    status: int
    body: dict[str, Any]

    @property
    def ok(self) -> bool:
        return 200 <= self.status <= 299

    @property
    def message(self) -> str:
        """A ``metav1.Status``'s message, else the status code."""
        said = self.body.get("message") if isinstance(self.body, dict) else None
        return str(said) if said else f"HTTP {self.status}"


class Api(Protocol):
    def get(self, path: str, query: Query = ()) -> Answer: ...

    def post(self, path: str, body: Mapping[str, Any], query: Query = ()) -> Answer: ...


class Unreachable(Exception):
    """The API server did not answer (refused, TLS, timed out), or the kubeconfig is unusable."""


class Client:
    """:class:`Api` over the ``kubernetes`` client's connection (its TLS and credentials)."""

    def __init__(self, kubeconfig: str, context: str | None) -> None:
        import kubernetes
        import yaml

        configuration = kubernetes.client.Configuration()
        try:
            kubernetes.config.load_kube_config(
                config_file=kubeconfig, context=context, client_configuration=configuration
            )
        except (kubernetes.config.ConfigException, OSError, ValueError, yaml.YAMLError) as error:
            said = " ".join(str(error).split())
            raise Unreachable(f"cannot read the kubeconfig {kubeconfig}: {said}") from error
        configuration.retries = 0
        self.host = str(configuration.host)
        self.api = kubernetes.client.ApiClient(configuration)

    def get(self, path: str, query: Query = ()) -> Answer:
        return self._call("GET", path, query, None)

    def post(self, path: str, body: Mapping[str, Any], query: Query = ()) -> Answer:
        return self._call("POST", path, query, dict(body))

    def _call(self, method: str, path: str, query: Query, body: Any) -> Answer:
        import urllib3

        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        try:
            request = self.api.param_serialize(
                method,
                path,
                query_params=list(query),
                header_params=headers,
                body=body,
                auth_settings=["BearerToken"],
            )
            response = self.api.call_api(*request, _request_timeout=TIMEOUT_S)
            data = response.read()
        except (urllib3.exceptions.HTTPError, OSError) as error:
            raise Unreachable(f"cannot reach the API server at {self.host}: {error}") from error
        try:
            decoded = json.loads(data or b"{}")
        except ValueError:
            decoded = {"message": data[:200].decode(errors="replace").strip()}
        return Answer(response.status, decoded if isinstance(decoded, dict) else {})

    def close(self) -> None:
        self.api.close()
