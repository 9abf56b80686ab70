"""The server of ``fleetgate dashboard``: the web dashboard on 127.0.0.1, reading the fleet
as its user.

It serves the dashboard's files (``reconciler.dashboard``) and forwards the page's reads to the
API server with the user's kubeconfig, as ``kubectl proxy`` would, but only what the page
reads: GETs of the visibility API (``/apis/visibility.fleetgate.io/v1alpha1/…``) and of the
Events of one namespace. So the API server authenticates the user and RBAC decides what the
page shows; nothing is written, and no other path is forwarded. Requests naming another host
than the one it listens on are refused (a web page elsewhere cannot read through it by DNS
rebinding), and the page itself only talks to its own origin (its Content-Security-Policy).
"""

from __future__ import annotations

import json
import re

from flask import Flask, Response, redirect, request

from fleetgate.liveapi import PREFIX, Live, LiveError
from reconciler import dashboard

DASHBOARD = f"{PREFIX}/dashboard/"
EVENTS = re.compile(r"/api/v1/namespaces/[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?/events")
LOCAL_HOSTS = ("127.0.0.1", "localhost", "[::1]")


def create_dashboard_app(live: Live) -> Flask:
    """The dashboard's files and the reads it forwards as ``live``'s user."""
    app = Flask("fleetgate.dashboard")
    app.config["fleetgate.port"] = None  # set by DashboardServer once bound

    @app.before_request
    def local_only() -> Response | None:
        host, _, port = request.host.rpartition(":")
        bound = app.config["fleetgate.port"]
        if host not in LOCAL_HOSTS or (bound is not None and port != str(bound)):
            return _status(403, "Forbidden", "this dashboard answers requests to 127.0.0.1 only")
        return None

    @app.get("/")
    def root() -> Response:
        return redirect(DASHBOARD, 302)

    @app.get(f"{PREFIX}/dashboard")
    def bare() -> Response:
        return redirect(DASHBOARD, 308)

    @app.get(f"{DASHBOARD}config.json")
    def config() -> Response:
        body = {"namespace": live.namespace, "server": "fleetgate dashboard"}
        return Response(json.dumps(body), mimetype="application/json", headers=dashboard.HEADERS)

    @app.get(DASHBOARD)
    @app.get(f"{DASHBOARD}<name>")
    def files(name: str = "") -> Response:
        found = dashboard.response(name)
        return found or _status(404, "NotFound", "no such file in the dashboard")

    @app.get(f"{PREFIX}/<path:rest>")
    def visibility(rest: str) -> Response:
        if any(part in ("", ".", "..") for part in rest.split("/")):
            return _status(400, "BadRequest", "a path with empty, . or .. segments")
        return _forward(live, f"{PREFIX}/{rest}")

    @app.get("/api/v1/namespaces/<namespace>/events")
    def events(namespace: str) -> Response:
        path = f"/api/v1/namespaces/{namespace}/events"
        if EVENTS.fullmatch(path) is None:
            return _status(400, "BadRequest", "not a namespace name")
        return _forward(live, path)

    @app.errorhandler(404)
    def not_found(_error: Exception) -> Response:
        return _status(404, "NotFound", "the dashboard forwards only what its page reads")

    @app.errorhandler(405)
    def not_allowed(_error: Exception) -> Response:
        return _status(405, "MethodNotAllowed", "the dashboard only reads")

    return app


def _forward(live: Live, path: str) -> Response:
    query = [(k, v) for k, v in request.args.items(multi=True)]
    held = request.headers.get("If-None-Match")  # the page's copy: a 304 moves no body
    try:
        found = live.fetch(path, query, {"If-None-Match": held} if held else None)
    except LiveError as error:
        return _status(502, "BadGateway", str(error))
    if found.status == 304:
        return Response(status=304, headers=found.headers)
    return Response(found.body, status=found.status, mimetype="application/json",
                    headers=found.headers)  # fmt: skip


def _status(code: int, reason: str, message: str) -> Response:
    body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message,
            "reason": reason, "code": code}  # fmt: skip
    return Response(json.dumps(body), status=code, mimetype="application/json")


class DashboardServer:
    """The dashboard's app on 127.0.0.1 (port 0: a free one). Start, then stop."""

    def __init__(self, live: Live, port: int = 0, host: str = "127.0.0.1") -> None:
        from webhook.serve import WebhookServer  # cheroot, with its guards

        self.app = create_dashboard_app(live)
        self._server = WebhookServer(self.app, host, port, threads=8, request_timeout=10.0)

    @property
    def url(self) -> str:
        host, port = self._server.address
        return f"http://{host}:{port}/"

    def start(self) -> None:
        self._server.start()
        self.app.config["fleetgate.port"] = self._server.address[1]

    def stop(self) -> None:
        self._server.stop(timeout=5)
