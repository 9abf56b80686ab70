"""The read-only HTTP API of ``fleetgate serve``: queues, jobs and decisions of the latest pass.

``create_app(reconciler, metrics=None)`` returns a Flask app serving

- ``GET /api/v1/queues`` and ``/api/v1/queues/NAME``: each queue's report (``dry-run -o json``'s
  ``queues[]``) with its weight, priority and strategy from the policies;
- ``GET /api/v1/jobs?queue=Q&state=S&limit=N&continue=T``: jobs sorted by binding, a page at a
  time like a Kubernetes list (``metadata.continue``, ``remainingItemCount``);
- ``GET /api/v1/jobs/NS/NAME``: one job (its binding's or its template's namespace/name): the
  fields of ``dry-run -o json``'s decision, ``state``, and ``explanation`` (``--explain``'s text);
- ``GET /metrics`` (``reconciler.metrics``), ``/healthz``, ``/readyz`` (the informers synced
  and one pass ran).

Everything comes from one pass (``reconciler.jobsview.PassView``, built on the first request
after the pass); on a follower, which runs none, from a preview of the cycle over its own warm
caches (``reconciler.preview``), so any replica answers. Errors are Kubernetes ``Status``
objects: 400 for a bad parameter, 404 for an unknown job or queue, 503 before the first pass
(or, on a follower, before its caches listed everything); never a 500 for a user's mistake.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from flask import Flask, Response, request
from werkzeug.exceptions import HTTPException

from engine import untrusted
from engine.annotations import format_time
from reconciler.apiauth import ERRORS as AUTH_ERRORS
from reconciler.apiauth import OPEN_PATHS, Delegated, attributes_of
from reconciler.jobsview import PassView
from reconciler.latest import ApiError, LatestPass
from reconciler.listing import JobFilter, limit_of, page_of
from reconciler.metrics import CONTENT_TYPE, ReconcilerMetrics
from reconciler.visibility import (
    GROUP,
    RequestHeader,
    create_visibility_app,
    namespaces_of,
    redacted,
)

if TYPE_CHECKING:
    from reconciler.loop import Reconciler

API_VERSION = "fleetgate.io/v1alpha1"


def create_app(
    reconciler: Reconciler,
    metrics: ReconcilerMetrics | None = None,
    auth: Delegated | None = None,
) -> Flask:
    """The read-only API over ``reconciler``'s passes; ``metrics`` (default: a new one) is
    attached to it as an observer (once, when it already is). With ``auth``, every request
    but the probes, ``/leader`` and ``/metrics`` needs a bearer token the API server knows, and
    RBAC's leave for what it reads (``reconciler.apiauth``)."""
    metrics = (metrics or ReconcilerMetrics()).attach(reconciler)
    latest = LatestPass(reconciler)
    app = Flask("fleetgate.api")
    app.config["fleetgate.metrics"] = metrics
    app.config["fleetgate.latest"] = latest
    if auth is not None:
        app.before_request(lambda: _authorized(auth))

    @app.get("/api/v1/queues")
    def queues() -> Response:
        view = latest.view()
        items = [view.queue_json(q) for q in view.result.queues]
        return _json(
            {"kind": "QueueList", "apiVersion": API_VERSION, **_meta(view), "items": items}
        )

    @app.get("/api/v1/queues/<name>")
    def queue(name: str) -> Response:
        view = latest.view()
        report = view.queue(name)
        if report is None:
            raise _not_found("queue", name)
        body = {"kind": "Queue", "apiVersion": API_VERSION, **_meta(view)}
        return _json({**body, **view.queue_json(report)})

    @app.get("/api/v1/jobs")
    def jobs() -> Response:
        view = latest.view()
        args = request.args
        namespace = args.get("namespace") or ""
        wanted = JobFilter(
            queue=args.get("queue") or "", state=args.get("state") or "", namespace=namespace
        )
        wanted.check(view)
        page = page_of(
            wanted.select(view), wanted, limit_of(args.get("limit")), args.get("continue")
        )
        meta = _meta(view)
        if page.token:
            meta["metadata"]["continue"] = page.token
            meta["metadata"]["remainingItemCount"] = page.remaining
        items = [e.item for e in page.items]
        if namespace and auth is not None:  # a tenant's view: no other namespace's job named
            items = [redacted(i, namespace, namespaces_of(view)) for i in items]
        return _json({"kind": "JobList", "apiVersion": API_VERSION, **meta, "items": items})

    @app.get("/api/v1/jobs/<namespace>/<name>")
    def job(namespace: str, name: str) -> Response:
        view = latest.view()
        entry = view.find(namespace, name)
        if entry is None:
            raise _not_found("job", f"{namespace}/{name}")
        detail = view.detail(entry)
        if auth is not None:  # a tenant's view: no other namespace's job named
            detail = redacted(detail, namespace, namespaces_of(view))
        return _json({"kind": "Job", "apiVersion": API_VERSION, **_meta(view), **detail})

    @app.get("/metrics")
    def metrics_text() -> Response:
        return Response(metrics.exposition(), mimetype=None, content_type=CONTENT_TYPE)

    @app.get("/healthz")
    def healthz() -> Response:
        return _text("ok", 200)

    @app.get("/readyz")
    def readyz() -> Response:
        status = getattr(reconciler.policies, "status", None)  # a PolicyHolder's
        if status is not None and not status.ready:
            why = f": {status.errors[0]}" if status.errors else ""
            return _text(f"not ready: no valid policy set is loaded{why}", 503)
        if not reconciler.wait_synced(0):
            return _text("not ready: the informers have not listed every resource yet", 503)
        note = ""
        if status is not None and status.fallback is not None:  # reconciler.lastgood
            first = status.errors[0] if status.errors else "?"
            note = (
                f", the last good set from {status.fallback}; the policy files do not load: {first}"
            )
        if latest.ran:
            return _text(f"ready: policy version {latest.policy_version}{note}", 200)
        gate = getattr(reconciler, "gate", None)
        if gate is not None and not gate():
            # a follower runs no pass; were it unready, a rolling update would wait forever
            version = f"; policy version {status.version}{note}" if status is not None else ""
            return _text(f"ok: a follower (no pass runs here until it leads){version}", 200)
        return _text("not ready: no reconciler pass has run yet", 503)

    app.register_error_handler(ApiError, _api_error)
    app.register_error_handler(HTTPException, _http_error)
    return app


def _authorized(auth: Delegated) -> Response | None:
    """None when the request may go on; else the Status that refuses it (401, 403, or 503
    when the API server cannot be asked)."""
    if request.path in OPEN_PATHS:
        return None
    header = request.headers.get("Authorization", "")
    if not header.startswith("Bearer ") or not header[7:].strip():
        return _answer(401, "Unauthorized", "Unauthorized")
    asked = attributes_of(request.path, dict(request.args))
    try:
        caller = auth.authenticate(header[7:].strip())
        if caller is None:
            return _answer(401, "Unauthorized", "Unauthorized")
        if asked is None or auth.allowed(caller, asked):
            return None  # an unknown path is Flask's 404
    except AUTH_ERRORS as error:
        return _answer(503, "ServiceUnavailable", f"cannot ask the API server: {error}")
    who = untrusted.echo(caller.user)
    return _answer(
        403,
        "Forbidden",
        f'{asked.resource}.{GROUP} is forbidden: User "{who}" cannot {asked.said()}',
    )


def _api_error(error: ApiError) -> Response:
    return _status(error.code, error.reason, error.message, error.details)


def _http_error(error: HTTPException) -> Response:
    code = error.code or 500
    reason = {404: "NotFound", 405: "MethodNotAllowed"}.get(code, "BadRequest")
    return _status(code, reason, error.description or error.name, {})


def _meta(view: PassView) -> dict[str, Any]:
    result = view.result
    return {
        "metadata": {"policyVersion": result.policy_version, "decidedAt": format_time(result.now)}
    }


def _not_found(kind: str, name: str) -> ApiError:
    return ApiError(404, "NotFound", f'{kind} "{name}" not found', name=name, kind=kind)


def _status(code: int, reason: str, message: str, details: dict[str, Any]) -> Response:
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details:
        body["details"] = details
    return _json(body, code)


def _json(body: dict[str, Any], code: int = 200) -> Response:
    return Response(json.dumps(body), status=code, mimetype="application/json")


def _text(body: str, code: int) -> Response:
    return Response(body + "\n", status=code, mimetype="text/plain")


def visibility_app(app: Flask, config: RequestHeader) -> Flask:
    """The aggregated visibility API (``reconciler.visibility``) over the same latest pass as
    ``app`` (an app of :func:`create_app`): one view, two doors."""
    latest: LatestPass = app.config["fleetgate.latest"]
    served = create_visibility_app(latest, config, _answer, _json)
    served.register_error_handler(ApiError, _api_error)
    served.register_error_handler(HTTPException, _http_error)
    return served


def _answer(code: int, reason: str, message: str) -> Response:
    return _status(code, reason, message, {})
