"""APIService aggregation, as kube-aggregator proxies an aggregated API.

An ``apiregistration.k8s.io/v1`` APIService with ``spec.service`` {namespace, name, port (443)}
claims ``/apis/<spec.group>/<spec.version>`` and everything under it (for a group/version the
sandbox does not serve itself). There is no cluster DNS, so a service is found in
``service_urls`` ({(namespace, name, port): "https://127.0.0.1:8443"}), the mapping admission
webhooks use. A request there has already been authenticated and authorized (RBAC, with the
attributes of its URL, as for a built-in resource); it is then sent on as kube-aggregator's
``handler_proxy.go`` sends it:

- to the same path and query at the service's URL, over TLS verified against ``spec.caBundle``
  (or not verified with ``insecureSkipTLSVerify``);
- presenting the front proxy's client certificate (:mod:`sandbox.frontproxy`);
- with ``X-Remote-User``, ``X-Remote-Uid`` (when the user has one), one ``X-Remote-Group`` per
  group and ``X-Remote-Extra-<key>`` per extra value (key %-escaped) in place of whatever the
  client sent under those names, and without the client's ``Authorization`` header (kube-apiserver
  drops it once it has authenticated the request).

The answer comes back as the service gave it (streamed when it has no Content-Length, so
watches work). A service that cannot be reached, or has no URL here, is ``503`` with a
plain-text body, as kube-aggregator writes it. ``/apis`` lists the aggregated groups after the
sandbox's own (by ``groupPriorityMinimum``, highest first, then name; versions by
``versionPriority``), ``/apis/<group>`` is answered from the APIServices, and
``/apis/<group>/<version>`` (the resource list) is proxied. Not done: the availability
controller (``status.conditions`` are never written, and an APIService is used whatever they
say), APIService validation, protocol upgrades.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import logging
import socket
import ssl
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit

from sandbox.authn import User
from sandbox.dns import Hosts, route
from sandbox.frontproxy import FrontProxy

if TYPE_CHECKING:
    from http.server import BaseHTTPRequestHandler

    from sandbox.store import Store

log = logging.getLogger("fleetgate.sandbox.aggregator")
APISERVICES = "apiservices.apiregistration.k8s.io"
TIMEOUT = 60.0  # kube-apiserver's default --request-timeout
_HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer"}
    | {"transfer-encoding", "upgrade", "host", "content-length", "authorization", "expect"}
)
_NOT_RELAYED = _HOP_BY_HOP | {"date", "server"}  # the sandbox's own are sent
_REMOTE = ("x-remote-user", "x-remote-uid", "x-remote-group", "x-remote-extra-")
_ESCAPE_SAFE = "!#$&'*+-.^_`|~"  # token characters other than letters and digits


def apiservices(store: Store) -> list[Mapping[str, Any]]:
    """The stored APIServices that name a service (not copies: read only)."""
    found: list[Mapping[str, Any]] = []
    try:
        store.scan(APISERVICES, found.append)
    except KeyError:  # a registry without apiregistration.k8s.io
        return []
    return [s for s in found if (s.get("spec") or {}).get("service")]


def claiming(store: Store, group: str, version: str) -> Mapping[str, Any] | None:
    for service in apiservices(store):
        spec = service["spec"]
        if spec.get("group") == group and spec.get("version") == version:
            return service
    return None


def _group_document(group: str, services: list[Mapping[str, Any]]) -> dict[str, Any]:
    ordered = sorted(
        services, key=lambda s: (-int(s["spec"].get("versionPriority") or 0), s["spec"]["version"])
    )
    names = [str(s["spec"]["version"]) for s in ordered]
    versions = [{"groupVersion": f"{group}/{v}", "version": v} for v in names]
    return {
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": group,
        "versions": versions,
        "preferredVersion": versions[0],
    }


def api_groups(store: Store, local: set[str]) -> list[dict[str, Any]]:
    """APIGroup documents of the aggregated groups not served by the sandbox itself."""
    by_group: dict[str, list[Mapping[str, Any]]] = {}
    for service in apiservices(store):
        group = str(service["spec"].get("group") or "")
        if group and group not in local:
            by_group.setdefault(group, []).append(service)

    def priority(group: str) -> tuple[int, str]:
        return -max(int(s["spec"].get("groupPriorityMinimum") or 0) for s in by_group[group]), group

    return [_group_document(g, by_group[g]) for g in sorted(by_group, key=priority)]


def remote_headers(user: User) -> list[tuple[str, str]]:
    """The front proxy's user headers (client-go ``SetAuthProxyHeaders``)."""
    headers = [("X-Remote-User", user.name)]
    if user.uid:
        headers.append(("X-Remote-Uid", user.uid))
    headers += [("X-Remote-Group", group) for group in user.groups]
    for key, values in user.extra.items():
        headers += [(f"X-Remote-Extra-{quote(key, safe=_ESCAPE_SAFE)}", v) for v in values]
    return headers


class Aggregator:
    """Proxies requests for aggregated group/versions to their services."""

    def __init__(
        self,
        front_proxy: FrontProxy,
        service_urls: Callable[[], Mapping[tuple[str, str, int], str]],
        hosts: Hosts | None = None,
    ) -> None:
        self.front_proxy = front_proxy
        self._service_urls = service_urls
        self.hosts = hosts if hosts is not None else {}  # in place of cluster DNS (sandbox.dns)
        self._contexts: dict[tuple[str, bool], ssl.SSLContext] = {}
        self._lock = threading.Lock()
        self._open: set[http.client.HTTPConnection] = set()  # being relayed

    def proxy(
        self,
        handler: BaseHTTPRequestHandler,
        service: Mapping[str, Any],
        user: User,
        method: str,
        body: bytes,
        watch: bool,
    ) -> None:
        spec = service["spec"]
        reference = spec["service"]
        key = (str(reference.get("namespace")), str(reference.get("name")))
        port = int(reference.get("port") or 443)
        base = self._service_urls().get((*key, port))
        dns = f"{key[1]}.{key[0]}.svc"  # what kube-aggregator dials and verifies
        if base is None and (dns, port) in self.hosts:
            base = f"https://{dns}:{port}"
        if base is None:
            name = service["metadata"]["name"]
            log.warning("APIService %s: service %s/%s has no URL here", name, *key)
            _plain_error(handler, 503, "service unavailable")
            return
        target = urlsplit(base)
        headers = [(k, v) for k, v in handler.headers.items() if not _dropped(k)]
        headers += remote_headers(user)
        if body or method in ("POST", "PUT", "PATCH"):
            headers.append(("Content-Length", str(len(body))))
        path = target.path.rstrip("/") + handler.path
        try:
            connection = self._connect(target, spec, None if watch else TIMEOUT)
            connection.putrequest(method, path, skip_accept_encoding=True)
            for name, value in headers:
                connection.putheader(name, value)
            connection.endheaders(body or None)
            answer = connection.getresponse()
        except (OSError, http.client.HTTPException, ValueError) as error:
            _plain_error(handler, 503, f"error trying to reach service: {error}")
            return
        with self._lock:
            self._open.add(connection)
        try:
            _relay(handler, answer)
        finally:
            with self._lock:
                self._open.discard(connection)
            connection.close()

    def close(self) -> None:
        """End every answer being relayed (the sandbox stops): their streams end."""
        with self._lock:
            sockets = [c.sock for c in self._open if c.sock is not None]
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def _connect(
        self, target: Any, spec: Mapping[str, Any], timeout: float | None
    ) -> http.client.HTTPConnection:
        host, port = target.hostname or "127.0.0.1", target.port
        if target.scheme == "http":
            return http.client.HTTPConnection(host, port or 80, timeout=timeout)
        ca_bundle = str(spec.get("caBundle") or "")
        verify = not spec.get("insecureSkipTLSVerify")
        context = self._contexts.get((ca_bundle, verify))
        if context is None:
            pem = base64.b64decode(ca_bundle) if ca_bundle else None
            context = self.front_proxy.client_context(pem, verify)
            self._contexts[(ca_bundle, verify)] = context
        connection = http.client.HTTPSConnection(
            host, port or 443, timeout=timeout, context=context
        )
        route(connection, self.hosts)
        return connection


def _dropped(name: str) -> bool:
    lower = name.lower()
    return lower in _HOP_BY_HOP or lower.startswith(_REMOTE)


def _relay(handler: BaseHTTPRequestHandler, answer: http.client.HTTPResponse) -> None:
    """Send the service's answer on: whole when its length is known, else chunk by chunk."""
    length = answer.getheader("Content-Length")
    handler.send_response(answer.status, answer.reason)
    for name, value in answer.getheaders():
        if name.lower() not in _NOT_RELAYED:
            handler.send_header(name, value)
    if length is not None or answer.status in (204, 304) or handler.command == "HEAD":
        data = answer.read()
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)
        return
    handler.send_header("Transfer-Encoding", "chunked")
    handler.end_headers()
    try:
        while data := answer.read1(65536):
            handler.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            handler.wfile.flush()
        handler.wfile.write(b"0\r\n\r\n")
    except (OSError, http.client.HTTPException) as error:  # either side went away
        log.debug("aggregated stream ended: %s", error)
        handler.close_connection = True


def _plain_error(handler: BaseHTTPRequestHandler, code: int, message: str) -> None:
    """Go's ``http.Error``, as kube-aggregator answers a proxy failure."""
    data = (message + "\n").encode()
    handler.send_response(code)
    handler.send_header("Content-Type", "text/plain; charset=utf-8")
    handler.send_header("X-Content-Type-Options", "nosniff")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)
