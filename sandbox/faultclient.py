"""A client of a running sandbox's ``/sandbox/faults`` endpoint, configured by its kubeconfig.

Used by ``fleetgate sandbox fault …``; reads the server URL, CA and token of the kubeconfig's
current context, as kubectl would.
"""

from __future__ import annotations

import base64
import http.client
import json
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from sandbox.faults import ENDPOINT


class FaultClientError(Exception):
    """The sandbox could not be reached, or refused the fault (the message says why)."""


@dataclass(frozen=True, slots=True)
class FaultClient:
    server: str
    ca_pem: bytes | None = None
    token: str | None = None
    timeout: float = 10.0

    @classmethod
    def from_kubeconfig(cls, path: str | Path) -> FaultClient:
        try:
            config = yaml.safe_load(Path(path).read_text())
            wanted = config.get("current-context")
            context = next(c for c in config["contexts"] if c["name"] == wanted)["context"]
            cluster = next(c for c in config["clusters"] if c["name"] == context["cluster"])
            user = next(u for u in config["users"] if u["name"] == context["user"])
        except (OSError, yaml.YAMLError, KeyError, StopIteration, TypeError) as error:
            raise FaultClientError(f"cannot read the kubeconfig {path}: {error!r}") from error
        ca = cluster["cluster"].get("certificate-authority-data")
        return cls(
            server=cluster["cluster"]["server"],
            ca_pem=base64.b64decode(ca) if ca else None,
            token=(user.get("user") or {}).get("token"),
        )

    def call(self, method: str, body: Any = None, query: str = "") -> Any:
        """``method`` on the faults endpoint; the decoded JSON answer."""
        url = urlsplit(self.server)
        connection: http.client.HTTPConnection
        if url.scheme == "https":
            context = ssl.create_default_context(
                cadata=self.ca_pem.decode() if self.ca_pem else None
            )
            connection = http.client.HTTPSConnection(
                url.hostname or "", url.port or 443, timeout=self.timeout, context=context
            )
        else:
            connection = http.client.HTTPConnection(
                url.hostname or "", url.port or 80, timeout=self.timeout
            )
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        data = json.dumps(body).encode() if body is not None else None
        try:
            connection.request(method, ENDPOINT + query, body=data, headers=headers)
            reply = connection.getresponse()
            answer = reply.read()
        except (OSError, http.client.HTTPException) as error:
            raise FaultClientError(f"cannot reach the sandbox at {self.server}: {error}") from error
        finally:
            connection.close()
        try:
            decoded = json.loads(answer)
        except ValueError as error:
            raise FaultClientError(
                f"the sandbox answered {reply.status}: {answer[:200]!r}"
            ) from error
        if reply.status >= 400:
            raise FaultClientError(str(decoded.get("message") or decoded))
        return decoded
