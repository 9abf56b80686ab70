"""The Kubernetes REST API over HTTP: routing, verbs, watch streaming, Table output.

One :class:`ApiHandler` per connection (a thread each, see :mod:`sandbox.connections`). Paths:
``/api/v1/...`` and ``/apis/<group>/<version>/...``, each ``[namespaces/<ns>/]<plural>[/<name>
[/status]]``, plus the legacy ``.../watch/...`` prefix. Everything becomes a call on the
:class:`~sandbox.store.Store`; a :class:`~sandbox.errors.StatusError` becomes its Status.
Every request is first authenticated and authorized, and reviews and aggregated APIs are
answered before the store's routing (:mod:`sandbox.access`).

One module past 400 lines: the verbs, the watch stream and the Table output share one
request's handler state; authentication, authorization and aggregation live in
:mod:`sandbox.access`.
"""

from __future__ import annotations

import json
import logging
import socket
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

from sandbox import admission, discovery, errors
from sandbox.authn import acting_as
from sandbox.deadline import deadline_of, request_deadline
from sandbox.requester import requester
from sandbox.resources import ResourceType
from sandbox.table import to_table
from sandbox.watch import BOOKMARK, ERROR, Subscription

if TYPE_CHECKING:
    from sandbox.connections import ApiHTTPServer

log = logging.getLogger("fleetgate.sandbox.http")
DEFAULT_WATCH_TIMEOUT = 1800.0
OPENAPI_V2_PROTOBUF = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"


@dataclass(frozen=True, slots=True)
class Route:
    rt: ResourceType
    version: str
    namespace: str | None
    name: str | None
    subresource: str
    watch: bool


def _truthy(value: str | None) -> bool:
    return value is not None and value.lower() in ("1", "true", "yes")


class ApiHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body are separate writes: no 40 ms stalls
    server: ApiHTTPServer

    # -- plumbing ----------------------------------------------------------------------------

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s " + format, self.address_string(), *args)

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_PUT(self) -> None:
        self._serve("PUT")

    def do_PATCH(self) -> None:
        self._serve("PATCH")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    def _serve(self, method: str) -> None:
        arrived = time.monotonic()  # the deadline counts from here (sandbox.deadline)
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        body = self._read_body()
        if body is None:  # the client went away mid-request: nothing to do, nobody to answer
            self.close_connection = True
            return
        self._warnings = admission.collect_warnings()
        try:
            watching = _truthy(query.get("watch")) or "/watch/" in url.path
            # a watch is long-running: kube-apiserver gives it no deadline and reads no timeout
            with request_deadline(None if watching else deadline_of(query, arrived)):
                self._serve_within(method, url.path, query, body)
        except errors.StatusError as error:
            self._send_json(error.code, error.status)
        except Exception as error:  # the edge: any bug becomes a 500 Status, logged, not a hang
            log.exception("sandbox API: %s %s failed", method, self.path)
            self._send_json(500, errors.internal(str(error)).status)

    def _serve_within(self, method: str, path: str, query: dict[str, str], body: bytes) -> None:
        access = self.server.access
        user = access.admit(
            self.server.store, self.headers.get("Authorization"), method, path, query
        )
        extra = self.server.routes.get(path)
        if extra is not None:  # the sandbox's own endpoints (faults): no request hooks
            code, answer = extra(method, query, body)
            self._send_json(code, answer)
            return
        for hook in list(self.server.request_hooks):
            hook(method, path, query)
        store = self.server.store
        if access.serve(self, self._send_json, store, user, method, path, query, body):
            return  # a review, an aggregated API, or discovery naming one
        agent = self.headers.get("User-Agent", "")
        with requester(agent, method, path), acting_as(user):
            self._dispatch(method, path, query, body)  # who wrote what, and webhooks

    def _read_body(self) -> bytes | None:
        """The request's body; None when the client went away before all of it arrived (Go's
        server reads ``unexpected EOF``, and kube-apiserver acts on no part of such a request)."""
        length = int(self.headers.get("Content-Length") or 0)
        try:
            data = self.rfile.read(length) if length else b""
        except OSError:  # a reset, or TLS cut off mid-record
            return None
        return data if len(data) == length else None

    def _send_json(self, code: int, body: Any, content_type: str = "application/json") -> None:
        data = json.dumps(body, separators=(",", ":")).encode()
        self.send_response(code)
        for text in getattr(self, "_warnings", ()):
            self.send_header("Warning", _warning_header(text))
        failed = code >= 400 and isinstance(body, dict)
        retry_after = (body.get("details") or {}).get("retryAfterSeconds") if failed else None
        if retry_after:  # as the apiserver's error writer does (429, 503, some 500s)
            self.send_header("Retry-After", str(retry_after))
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-cache, private")
        self.end_headers()
        self.wfile.write(data)

    def _send_bytes(self, data: bytes, content_type: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    # -- routing -----------------------------------------------------------------------------

    def _dispatch(self, method: str, path: str, query: dict[str, str], body: bytes) -> None:
        parts = [p for p in path.split("/") if p]
        store = self.server.store
        registry = store.registry
        static = self._static(parts)
        if static == {}:
            return
        if static is not None:
            if method != "GET":
                raise errors.method_not_allowed(method, path)
            self._send_json(200, static)
            return
        if parts[:2] == ["api", "v1"]:
            group, version, rest = "", "v1", parts[2:]
        elif len(parts) >= 3 and parts[0] == "apis":
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise errors.not_found_path()
        if not rest:
            listing = discovery.api_resource_list(registry, group, version)
            if listing is None:
                raise errors.not_found_path()
            self._send_json(200, listing)
            return
        watch = rest[0] == "watch"
        rest = rest[1:] if watch else rest
        namespace = None
        if len(rest) >= 3 and rest[0] == "namespaces" and registry.lookup(group, version, rest[2]):
            namespace, rest = rest[1], rest[2:]
        rt = registry.lookup(group, version, rest[0]) if rest else None
        if rt is None or len(rest) > 3 or (namespace is not None and not rt.namespaced):
            raise errors.not_found_path()
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else ""
        route = Route(rt, version, namespace, name, sub, watch or _truthy(query.get("watch")))
        self._resource(method, route, query, body)

    def _static(self, parts: list[str]) -> dict[str, Any] | None:
        registry = self.server.store.registry
        match parts:
            case ["version"]:
                return discovery.version()
            case ["api"]:
                return discovery.core_versions(f"{self.server.server_address[0]}")
            case ["apis"]:
                return discovery.api_group_list(registry)
            case ["apis", group]:
                found = discovery.api_group(registry, group)
                if found is None:
                    raise errors.not_found_path()
                return found
            case ["healthz"] | ["livez"] | ["readyz"]:
                return {"status": "ok"}
            case ["openapi", "v2"]:
                self._send_bytes(discovery.openapi_v2_protobuf(), OPENAPI_V2_PROTOBUF)
                return {}
            case ["openapi", *_]:
                raise errors.not_found_path()
        return None

    # -- verbs -------------------------------------------------------------------------------

    def _resource(self, method: str, route: Route, query: dict[str, str], body: bytes) -> None:
        store, rt = self.server.store, route.rt
        dry_run = query.get("dryRun") == "All"
        if method == "GET" and route.watch:
            self._watch(route, query)
        elif method == "GET" and route.name:
            self._check_sub(route)
            self._reply(
                route,
                query,
                store.get(rt, route.name, namespace=route.namespace, version=route.version),
            )
        elif method == "GET":
            listed = store.list(
                rt,
                namespace=route.namespace,
                label_selector=query.get("labelSelector", ""),
                field_selector=query.get("fieldSelector", ""),
                limit=int(query.get("limit") or 0),
                continue_token=query.get("continue", ""),
                version=route.version,
                resource_version=query.get("resourceVersion"),
            )
            self._reply(route, query, listed)
        elif method == "POST" and not route.name:
            if rt.namespaced and route.namespace is None:
                raise errors.method_not_allowed(method, f"{rt.plural} without a namespace")
            obj = _decode_object(body)
            created = store.create(rt, obj, namespace=route.namespace, dry_run=dry_run)
            self._reply(route, query, created, code=201)
        elif method == "PUT" and route.name:
            obj = _decode_object(body)
            name = (obj.get("metadata") or {}).get("name")
            if name != route.name:
                raise errors.bad_request(
                    f"the name of the object ({name}) does not match "
                    f"the name on the URL ({route.name})"
                )
            write = store.update_status if route.subresource == "status" else store.update
            self._check_sub(route)
            self._reply(route, query, write(rt, obj, namespace=route.namespace, dry_run=dry_run))
        elif method == "PATCH" and route.name:
            self._check_sub(route)
            patched = store.patch(
                rt,
                route.name,
                body,
                namespace=route.namespace,
                content_type=self.headers.get("Content-Type", ""),
                subresource=route.subresource,
                dry_run=dry_run,
                version=route.version,
            )
            self._reply(route, query, patched)
        elif method == "DELETE":
            self._delete(route, query, body, dry_run)
        else:
            raise errors.method_not_allowed(method, rt.plural)

    def _check_sub(self, route: Route) -> None:
        if route.subresource not in ("", "status") or (
            route.subresource == "status" and not route.rt.status_subresource
        ):
            raise errors.not_found_path()

    def _delete(self, route: Route, query: dict[str, str], body: bytes, dry_run: bool) -> None:
        store, rt = self.server.store, route.rt
        options = json.loads(body) if body.strip() else {}
        policy = options.get("propagationPolicy") or query.get("propagationPolicy")
        dry_run = dry_run or "All" in (options.get("dryRun") or [])
        if not route.name:
            deleted = store.delete_collection(
                rt,
                namespace=route.namespace,
                label_selector=query.get("labelSelector", ""),
                field_selector=query.get("fieldSelector", ""),
                propagation_policy=policy,
                dry_run=dry_run,
                version=route.version,
            )
            self._send_json(200, deleted)
            return
        result = store.delete(
            rt,
            route.name,
            namespace=route.namespace,
            propagation_policy=policy,
            preconditions=options.get("preconditions") or {},
            dry_run=dry_run,
            version=route.version,
        )
        still_there = bool(result["metadata"].get("deletionTimestamp")) and not dry_run
        if rt.built_in and not still_there:
            details = {"name": route.name, "group": rt.group, "kind": rt.plural}
            details["uid"] = result["metadata"].get("uid")
            self._send_json(200, errors.success_status(details))
        else:
            self._send_json(202 if still_there else 200, result)

    def _wants_table(self) -> bool:
        return "as=Table" in self.headers.get("Accept", "")

    def _reply(
        self, route: Route, query: dict[str, str], body: dict[str, Any], code: int = 200
    ) -> None:
        if self._wants_table() and code == 200:
            include = query.get("includeObject") or "Metadata"
            table = to_table(route.rt, body, datetime.now(UTC), include)
            self._send_json(code, table, "application/json;as=Table;v=v1;g=meta.k8s.io")
            return
        self._send_json(code, body)

    # -- watch -------------------------------------------------------------------------------

    def _watch(self, route: Route, query: dict[str, str]) -> None:
        try:  # a client going away at any write (a reset, ssl.SSLEOFError: OSErrors) ends it
            self._watch_events(route, query)
        except OSError as error:
            log.debug("watch client went away: %s", error)
            self.close_connection = True

    def _watch_events(self, route: Route, query: dict[str, str]) -> None:
        store, rt = self.server.store, route.rt
        try:  # ListOptions.timeoutSeconds: a number (refused before the stream starts)
            timeout = float(query.get("timeoutSeconds") or DEFAULT_WATCH_TIMEOUT)
        except ValueError:
            said = query["timeoutSeconds"]
            raise errors.bad_request(f"invalid timeoutSeconds: {said!r}") from None
        field_selector = query.get("fieldSelector", "")
        if route.name:  # .../watch/<plural>/<name>: one object
            name_selector = f"metadata.name={route.name}"
            field_selector = (
                f"{field_selector},{name_selector}" if field_selector else name_selector
            )
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache, private")
        self.end_headers()
        try:
            subscription = store.watch(
                rt,
                namespace=route.namespace,
                label_selector=query.get("labelSelector", ""),
                field_selector=field_selector,
                resource_version=query.get("resourceVersion") or None,
                version=route.version,
            )
        except errors.StatusError as error:  # e.g. 410 Gone: an ERROR event, as the server sends
            self._chunk({"type": ERROR, "object": error.status})
            self._chunk(None)
            return
        bookmarks = _truthy(query.get("allowWatchBookmarks"))
        self.server.track_watch(subscription, self.path)
        try:
            self._stream(subscription, rt, route.version, time.monotonic() + timeout, bookmarks)
        finally:
            subscription.close()
            aborted = self.server.untrack_watch(subscription)
        if aborted:  # an injected disconnect: the connection drops mid-stream, no final chunk
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        self._chunk(None)

    def _stream(
        self,
        subscription: Subscription,
        rt: ResourceType,
        version: str,
        deadline: float,
        bookmarks: bool,
    ) -> None:
        interval = self.server.bookmark_interval
        last_bookmark = time.monotonic()
        while not self.server.stopping.is_set():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            event = subscription.get(timeout=min(0.25, remaining), shared=True)
            if event is not None:
                if self._wants_table():  # kubectl get -w: each event carries a one-row Table
                    event["object"] = to_table(rt, event["object"], datetime.now(UTC))
                self._chunk(event)
                continue
            if subscription.closed:
                return
            due = bookmarks and time.monotonic() - last_bookmark >= interval
            if due and subscription.bookmark_version is not None:
                marker = {"kind": rt.kind, "apiVersion": rt.api_version(version)}
                marker["metadata"] = {"resourceVersion": str(subscription.bookmark_version)}
                self._chunk({"type": BOOKMARK, "object": marker})
                last_bookmark = time.monotonic()

    def _chunk(self, event: dict[str, Any] | None) -> None:
        """One chunk of the chunked response (one JSON event and a newline); None ends it."""
        if event is None:
            self.wfile.write(b"0\r\n\r\n")
        else:
            data = json.dumps(event, separators=(",", ":")).encode() + b"\n"
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()


def _decode_object(body: bytes) -> dict[str, Any]:
    try:
        obj = json.loads(body)
    except ValueError as error:
        raise errors.bad_request(f"the body of the request is not valid JSON: {error}") from error
    if not isinstance(obj, dict):
        raise errors.bad_request("the body of the request must be a JSON object")
    return obj


def _warning_header(text: str) -> str:
    """RFC 7234 warn-value with code 299 and agent "-", as kube-apiserver writes warnings."""
    cleaned = "".join(c if c.isprintable() and ord(c) < 256 else "?" for c in text)
    return '299 - "' + cleaned.replace("\\", "\\\\").replace('"', '\\"') + '"'
