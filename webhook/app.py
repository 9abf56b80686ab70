"""The Flask app: routes, status codes and metrics around the pure translator in ``review``.

Every answer to an admission request carries the header ``X-Fleetgate-Policy-Version`` and the
audit annotation ``policy-version``: the one PolicySet version read once for that request, even
while a reload swaps in another. Input errors are plain-text 4xx responses, never a 500: 400 for
a body that is not a well-formed AdmissionReview, 405 for a wrong method, 413 above 3 MiB (the
Kubernetes API server's own request limit), 503 before any valid policy set has loaded.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import logging
import time
from collections.abc import Callable, Collection
from typing import Any

from flask import Flask, Response, request
from werkzeug.exceptions import HTTPException

from engine.policy.policyset import PolicySet
from engine.policy.reload import NoPolicySetError, PolicyHolder
from webhook import claims, mutate, validate
from webhook.fit import Fleet
from webhook.metrics import CONTENT_TYPE, Metrics
from webhook.probes import PROBES_EXTENSION, VERSION_HEADER, Probes
from webhook.review import AdmissionRequest, Verdict, translate

log = logging.getLogger(__name__)

MAX_BODY = 3 * 1024 * 1024
DRAIN_LIMIT = 4 * MAX_BODY
Clock = Callable[[], dt.datetime]
Decider = Callable[[AdmissionRequest, PolicySet, dt.datetime], Verdict]


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def create_app(
    holder: PolicyHolder,
    *,
    fleet: Fleet | None = None,
    clock: Clock | None = None,
    metrics: Metrics | None = None,
    namespaces: validate.Namespaces | None = None,
    writers: Collection[str] = claims.DEFAULT_WRITERS,
) -> Flask:
    """The webhook app over the live policy set in ``holder``.

    ``fleet``: cluster capacities and PriorityClass values for the built-in fit check (none: the
    check is skipped). ``clock``: the time of each request (tests inject one). ``namespaces``:
    a namespace's labels (None when not known), for the queues' ``namespaceSelector``: a job
    its namespace may not put in its queue is denied (no lookup, or unknown labels: not
    checked here; the cycle rejects it with ``QueueNotAllowed``). ``writers``: the users who
    may change fleetgate's marks on a binding (``webhook.claims``), besides ``system:masters``.
    """
    app = Flask("fleetgate.webhook")
    app.config["MAX_CONTENT_LENGTH"] = MAX_BODY
    stats = metrics or Metrics(holder)
    app.extensions["fleetgate.metrics"] = stats
    now = clock or _utcnow
    probes = Probes(holder)
    app.extensions[PROBES_EXTENSION] = probes  # the server's request gate answers them too

    def admit(endpoint: str, decide: Decider) -> Response:
        started = time.perf_counter()
        try:
            policies = holder.current  # read once: this request sees exactly one version
        except NoPolicySetError:
            stats.requests.labels(endpoint, "unavailable").inc()
            return _plain(503, "no valid policy set is loaded yet; see /readyz")
        body = request.get_data(cache=False)  # over MAX_BODY: RequestEntityTooLarge → 413
        answer = translate(body, lambda r: decide(r, policies, now()), policies.version)
        headers = {VERSION_HEADER: policies.version}
        if answer.verdict is None:
            stats.requests.labels(endpoint, "bad_request").inc()
            log.info("%s: %d %s", endpoint, answer.status, answer.error)
            reply = _plain(answer.status, answer.error, headers)
        else:
            stats.record(endpoint, answer.verdict)
            payload = json.dumps(answer.body, separators=(",", ":"))
            reply = Response(payload, answer.status, headers, mimetype="application/json")
        stats.latency.labels(endpoint).observe(time.perf_counter() - started)
        return reply

    @app.post(mutate.ENDPOINT)
    def mutate_resourcebindings() -> Response:
        return admit(mutate.ENDPOINT, functools.partial(mutate.mutate_binding, writers=writers))

    @app.post(validate.ENDPOINT)
    def validate_workloads() -> Response:
        return admit(
            validate.ENDPOINT,
            lambda r, p, t: validate.validate_workload(r, p, fleet, t, namespaces),
        )

    @app.get("/healthz")
    @app.get("/readyz")
    def probe() -> Response:
        answer = probes.answer(request.path)
        return Response(answer.text, answer.status, list(answer.headers), mimetype="text/plain")

    @app.get("/metrics")
    def metrics_endpoint() -> Response:
        return Response(stats.exposition(), 200, content_type=CONTENT_TYPE)

    @app.errorhandler(HTTPException)
    def http_error(error: HTTPException) -> Response:
        code = error.code or 500
        if code == 413:
            _drain(request.environ, request.content_length)
            message = f"request body larger than {MAX_BODY // (1024 * 1024)} MiB"
            result = "too_large"
        else:
            message = f"{error.name}: {error.description}"
            result = "bad_request"
        if request.path in (mutate.ENDPOINT, validate.ENDPOINT):
            stats.requests.labels(request.path, result).inc()
        return _plain(code, message)

    @app.errorhandler(Exception)
    def internal_error(error: Exception) -> Response:  # a bug, never the user's input
        log.exception("internal error on %s", request.path)
        if request.path in (mutate.ENDPOINT, validate.ENDPOINT):
            stats.requests.labels(request.path, "error").inc()
        return _plain(500, f"internal error ({type(error).__name__}); see the webhook's log")

    return app


def _drain(environ: dict[str, Any], length: int | None) -> None:
    """Read and drop a refused body so the client, still sending, gets the 413 and not a reset.

    Only bodies of a stated length up to ``DRAIN_LIMIT``; anything else is cut off.
    """
    stream = environ.get("wsgi.input")
    if stream is None or length is None or length > DRAIN_LIMIT:
        return
    left = length
    while left > 0:
        chunk = stream.read(min(left, 256 * 1024))
        if not chunk:
            return
        left -= len(chunk)


def _plain(status: int, text: str, headers: dict[str, Any] | None = None) -> Response:
    return Response(text + "\n", status, headers or {}, mimetype="text/plain")
