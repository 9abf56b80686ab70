"""A stand-in aggregated API server for the sandbox's tests: HTTPS on 127.0.0.1, trusting only
the front proxy, configured the way an extension API server configures itself — from
``kube-system/extension-apiserver-authentication`` (the front-proxy CA, the allowed client
names, the header names), read through the API.

It answers every request with what it was asked and by whom (``X-Remote-*``), or streams a few
watch events for ``?watch=1``, and records each request it served.
"""

from __future__ import annotations

import json
import ssl
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote

from sandbox import tls

GROUP, VERSION = "visibility.fleetgate.io", "v1alpha1"


@dataclass(frozen=True)
class Seen:
    method: str
    path: str
    client_name: str
    user: str
    groups: tuple[str, ...]
    extra: dict[str, list[str]]
    authorization: str | None
    body: bytes


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: AggregatedServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._answer()

    def do_POST(self) -> None:
        self._answer()

    def _answer(self) -> None:
        settings = self.server.settings
        peer = self.connection.getpeercert() or {}
        name = next((v for rdn in peer.get("subject", ()) for k, v in rdn if k == "commonName"), "")
        if name not in settings["allowed"]:  # requestheader-allowed-names
            self._json(401, {"kind": "Status", "code": 401, "message": "not the front proxy"})
            return
        user = next((self.headers[h] for h in settings["user"] if self.headers.get(h)), "")
        groups = tuple(g for h in settings["group"] for g in self.headers.get_all(h) or ())
        extra: dict[str, list[str]] = {}
        for header, value in self.headers.items():
            for prefix in settings["extra"]:
                if header.lower().startswith(prefix.lower()):
                    key = unquote(header[len(prefix) :].lower())  # as headerrequest reads it
                    extra.setdefault(key, []).append(value)
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        seen = Seen(
            self.command,
            self.path,
            name,
            user,
            groups,
            extra,
            self.headers.get("Authorization"),
            body,
        )
        self.server.seen.append(seen)
        if "watch=1" in self.path:
            self._stream([{"type": "ADDED", "object": {"n": i}} for i in range(3)])
            return
        self._json(200, {"kind": "Echo", "path": self.path, "user": user, "groups": list(groups)})

    def _json(self, code: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _stream(self, events: list[dict[str, Any]]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for event in events:
            data = json.dumps(event).encode() + b"\n"
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")


class AggregatedServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, authentication: dict[str, str]) -> None:
        """``authentication``: the data of extension-apiserver-authentication."""
        super().__init__(("127.0.0.1", 0), _Handler)
        self.serving = tls.generate()
        self.settings = {
            "allowed": json.loads(authentication["requestheader-allowed-names"]),
            "user": json.loads(authentication["requestheader-username-headers"]),
            "group": json.loads(authentication["requestheader-group-headers"]),
            "extra": json.loads(authentication["requestheader-extra-headers-prefix"]),
        }
        context = self.serving.server_context()
        context.verify_mode = ssl.CERT_REQUIRED  # only clients the front-proxy CA signed
        context.load_verify_locations(cadata=authentication["requestheader-client-ca-file"])
        self.context = context
        self.seen: list[Seen] = []
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)

    def get_request(self) -> tuple[Any, Any]:
        sock, address = super().get_request()
        return self.context.wrap_socket(sock, server_side=True), address

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a refused handshake is part of the tests

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.server_address[1]}"

    def start(self) -> AggregatedServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.shutdown()
        self.server_close()
        self._thread.join(5)


def apiservice(
    ca_pem: bytes | None, port: int = 443, group: str = GROUP, version: str = VERSION
) -> dict[str, Any]:
    import base64

    spec: dict[str, Any] = {
        "group": group,
        "version": version,
        "service": {"namespace": "fleetgate-system", "name": "fleetgate-visibility", "port": port},
        "groupPriorityMinimum": 100,
        "versionPriority": 100,
    }
    if ca_pem is None:
        spec["insecureSkipTLSVerify"] = True
    else:
        spec["caBundle"] = base64.b64encode(ca_pem).decode()
    return {
        "apiVersion": "apiregistration.k8s.io/v1",
        "kind": "APIService",
        "metadata": {"name": f"{version}.{group}"},
        "spec": spec,
    }
