"""The visibility API, ``visibility.fleetgate.io/v1alpha1``, served the way a Kubernetes
aggregated API is (Kueue serves its visibility API so).

An ``APIService`` (``deploy/karmada-apiserver/apiservice.yaml``) tells the karmada-apiserver to
proxy ``/apis/visibility.fleetgate.io/v1alpha1/...`` to ``fleetgate serve --visibility-port``.
The API server authenticates the caller and authorizes the request by RBAC, as for any of its
own resources (``list jobs`` in namespace ``research``, group ``visibility.fleetgate.io``),
before it proxies it; it presents its front-proxy client certificate and names the caller in
``X-Remote-User`` / ``X-Remote-Group``. fleetgate trusts those headers only on a connection
whose client certificate the front-proxy CA signed, with a common name the API server allows
(both from the ConfigMap ``kube-system/extension-apiserver-authentication``, as every
aggregated server reads them: :func:`read_request_header`); any other request is 401.

Resources (every one read-only, built from the same pass as ``/api/v1``):

- ``namespaces/NS/jobs`` (list) and ``namespaces/NS/jobs/NAME`` (get): a namespace's jobs,
  as ``/api/v1/jobs`` lists them, with every job of another namespace they name (a victim, the
  job a reservation holds room for, a StrictFIFO head) hidden (:func:`redacted`); ``jobs``
  (list): every namespace's, as they are, for whom RBAC allows it;
- ``queues`` (list) and ``queues/NAME`` (get): aggregate numbers only (usage, guarantee,
  admitted and pending counts), never a job of anyone.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import kubernetes
from flask import Flask, Response, redirect, request

from engine import untrusted
from engine.annotations import format_time
from engine.cycle import QueueReport
from reconciler import dashboard
from reconciler.fleetview import NAME as FLEET
from reconciler.jobsview import PassView
from reconciler.latest import ApiError, LatestPass, reserved_by_queue
from reconciler.listing import field_selector, limit_of, page_of
from reconciler.permissions import AUTHENTICATION_CONFIGMAP

GROUP = "visibility.fleetgate.io"
VERSION = "v1alpha1"
GROUP_VERSION = f"{GROUP}/{VERSION}"
PREFIX = f"/apis/{GROUP}/{VERSION}"

RESOURCES = [
    {"name": "jobs", "singularName": "job", "namespaced": True, "kind": "Job",
     "verbs": ["get", "list"]},
    {"name": "queues", "singularName": "queue", "namespaced": False, "kind": "Queue",
     "verbs": ["get", "list"]},
    {"name": "fleets", "singularName": "fleet", "namespaced": False, "kind": "Fleet",
     "verbs": ["get", "list"]},
]  # fmt: skip


@dataclass(frozen=True, slots=True)
class RequestHeader:
    """How the API server's front proxy names the caller (kube-apiserver's
    ``--requestheader-*`` flags, published in ``extension-apiserver-authentication``)."""

    client_ca: bytes  # PEM: the CA that signs the front proxy's client certificate
    allowed_names: tuple[str, ...] = ()  # its common names; empty: any that CA signed
    username_headers: tuple[str, ...] = ("X-Remote-User",)
    group_headers: tuple[str, ...] = ("X-Remote-Group",)


@dataclass(frozen=True, slots=True)
class Caller:
    user: str
    groups: tuple[str, ...]


def request_header_of(data: Mapping[str, str]) -> RequestHeader | None:
    """The front proxy's settings from the ConfigMap's ``data`` (None when it has none)."""
    ca = data.get("requestheader-client-ca-file", "")
    if not ca.strip():
        return None

    def listed(key: str, default: tuple[str, ...]) -> tuple[str, ...]:
        text = data.get(key)
        if not text:
            return default
        try:
            found = json.loads(text)
        except ValueError:
            return default
        return tuple(str(v) for v in found) if isinstance(found, list) else default

    return RequestHeader(
        ca.encode(),
        listed("requestheader-allowed-names", ()),
        listed("requestheader-username-headers", ("X-Remote-User",)),
        listed("requestheader-group-headers", ("X-Remote-Group",)),
    )


def read_request_header(api: Any) -> RequestHeader | None:
    """``extension-apiserver-authentication`` read with ``api`` (a ``kubernetes`` ApiClient)."""
    found = kubernetes.client.CoreV1Api(api).read_namespaced_config_map(
        AUTHENTICATION_CONFIGMAP[1], AUTHENTICATION_CONFIGMAP[0]
    )
    return request_header_of(found.data or {})


def caller_of(environ: Mapping[str, Any], config: RequestHeader) -> Caller | None:
    """The caller the front proxy names, when this connection is the front proxy's: a client
    certificate the front-proxy CA signed (the TLS layer verified it), with an allowed name."""
    if environ.get("SSL_CLIENT_VERIFY") != "SUCCESS":
        return None
    name = str(environ.get("SSL_CLIENT_S_DN_CN", ""))
    if config.allowed_names and name not in config.allowed_names:
        return None
    headers = request.headers
    user = next((headers[h] for h in config.username_headers if headers.get(h)), "")
    if not user:
        return None
    groups = tuple(g for h in config.group_headers for g in headers.getlist(h) if g)
    return Caller(user, groups)


def create_visibility_app(
    latest: LatestPass,
    config: RequestHeader,
    answer: Callable[[int, str, str], Response],
    json_response: Callable[[dict[str, Any]], Response],
) -> Flask:
    """The aggregated API over ``latest`` (the API's latest pass). ``answer(code, reason,
    message)`` makes a Status, ``json_response`` a JSON body (``reconciler.api``'s)."""
    app = Flask("fleetgate.visibility")
    view = latest.view

    @app.before_request
    def authenticated() -> Response | None:
        if request.path in ("/healthz", "/readyz", "/livez"):
            return None
        if caller_of(request.environ, config) is None:
            return answer(401, "Unauthorized", "Unauthorized")
        return None

    @app.before_request
    def answered_before() -> Response | None:
        """A read this pass already answered is answered again from its bytes (a dashboard
        polls every few seconds; a pass comes far less often on a quiet fleet), and not at
        all when the caller holds them (``If-None-Match``: 304)."""
        if not _cacheable(request.path):
            return None
        view()  # a new pass (or a follower's new preview) forgets what was answered
        found = latest.answered(request.full_path)
        return _conditional(*found) if found is not None else None

    @app.after_request
    def remember(response: Response) -> Response:
        if (
            _cacheable(request.path)
            and response.status_code == 200
            and response.mimetype == "application/json"
            and not response.headers.get("ETag")
        ):
            body = response.get_data()
            return _conditional(body, latest.remember(request.full_path, body))
        return response

    @app.get("/healthz")
    @app.get("/readyz")
    @app.get("/livez")
    def health() -> Response:
        return Response("ok\n", mimetype="text/plain")

    @app.get(f"/apis/{GROUP}")
    def group() -> Response:
        version = {"groupVersion": GROUP_VERSION, "version": VERSION}
        return json_response(
            {"kind": "APIGroup", "apiVersion": "v1", "name": GROUP, "versions": [version],
             "preferredVersion": version}
        )  # fmt: skip

    @app.get(PREFIX)
    def resources() -> Response:
        return json_response(
            {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": GROUP_VERSION,
             "resources": RESOURCES}
        )  # fmt: skip

    @app.get(f"{PREFIX}/jobs")
    def all_jobs() -> Response:
        return _jobs(view(), None, json_response)

    @app.get(f"{PREFIX}/namespaces/<namespace>/jobs")
    def namespace_jobs(namespace: str) -> Response:
        return _jobs(view(), namespace, json_response)

    @app.get(f"{PREFIX}/fleets")
    def fleets() -> Response:
        item = {"kind": "Fleet", "apiVersion": GROUP_VERSION, **latest.fleet()}
        return json_response({"kind": "FleetList", "apiVersion": GROUP_VERSION, "items": [item]})

    @app.get(f"{PREFIX}/fleets/<name>")
    def fleet(name: str) -> Response:
        if name != FLEET:
            said = untrusted.echo(name, 253)
            return answer(404, "NotFound", f'fleets.{GROUP} "{said}" not found')
        return json_response({"kind": "Fleet", "apiVersion": GROUP_VERSION, **latest.fleet()})

    @app.get(f"{PREFIX}/dashboard")
    def dashboard_root() -> Response:
        return redirect(f"{PREFIX}/dashboard/", 308)

    @app.get(f"{PREFIX}/dashboard/config.json")
    def dashboard_config() -> Response:  # the caller's namespace is not known here
        return json_response({"namespace": "", "server": "visibility API"})

    @app.get(f"{PREFIX}/dashboard/")
    @app.get(f"{PREFIX}/dashboard/<name>")
    def dashboard_file(name: str = "") -> Response:
        found = dashboard.response(name)
        return found or answer(404, "NotFound", "no such file in the dashboard")

    @app.get(f"{PREFIX}/namespaces/<namespace>/jobs/<name>")
    def job(namespace: str, name: str) -> Response:
        current = view()
        entry = current.find(namespace, name)
        if entry is None:
            return answer(404, "NotFound", f'jobs.{GROUP} "{name}" not found')
        detail = redacted(current.detail(entry), namespace, namespaces_of(current))
        return json_response({"kind": "Job", "apiVersion": GROUP_VERSION, **detail})

    @app.get(f"{PREFIX}/queues")
    def queues() -> Response:
        """Every queue, in the tree's order (each after its parent), each with its ``depth``;
        with ``limit`` (and ``continue``), a page of them at a time."""
        current = view()
        tree = tree_order(current.result.queues)
        limit, token = request.args.get("limit"), request.args.get("continue")
        meta: dict[str, Any] = {"policyVersion": current.result.policy_version}
        if limit or token:
            start = _queue_after(token, tree)
            page = tree[start : start + limit_of(limit)]
            rest = len(tree) - start - len(page)
            if rest:
                meta.update({"continue": _queue_token(page[-1][0]), "remainingItemCount": rest})
            tree = page
        items = latest.queue_items(current, [name for name, _ in tree])
        for item, (_, depth) in zip(items, tree, strict=True):
            item["depth"] = depth
        return json_response(
            {"kind": "QueueList", "apiVersion": GROUP_VERSION, "metadata": meta, "items": items}
        )

    @app.get(f"{PREFIX}/queues/<name>")
    def queue(name: str) -> Response:
        current = view()
        if current.queue(name) is None:
            said = untrusted.echo(name, 253)
            return answer(404, "NotFound", f'queues.{GROUP} "{said}" not found')
        item = latest.queue_item(current, name, reserved_by_queue(current))
        return json_response({"kind": "Queue", "apiVersion": GROUP_VERSION, **item})

    return app


def tree_order(queues: Sequence[QueueReport]) -> list[tuple[str, int]]:
    """(name, depth) of each queue, depth first, children by name; a queue whose parent is not
    a queue comes at the end, as a root."""
    children: dict[str, list[str]] = {}
    names = {q.name for q in queues}
    for q in sorted(queues, key=lambda q: q.name):
        children.setdefault(q.parent if q.parent in names else "", []).append(q.name)
    found: list[tuple[str, int]] = []
    todo = [(name, 0) for name in reversed(children.get("", []))]
    seen: set[str] = set()
    while todo:
        name, depth = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        found.append((name, depth))
        todo.extend((child, depth + 1) for child in reversed(children.get(name, [])))
    return found + [(q.name, 0) for q in sorted(queues, key=lambda q: q.name) if q.name not in seen]


def _queue_token(name: str) -> str:
    return base64.urlsafe_b64encode(json.dumps({"after": name}).encode()).decode().rstrip("=")


def _queue_after(token: str | None, tree: Sequence[tuple[str, int]]) -> int:
    """Where a continued list of queues starts (0 for the first page)."""
    if not token:
        return 0
    try:
        after = str(json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))["after"])
    except (binascii.Error, ValueError, KeyError, TypeError):
        raise ApiError(400, "BadRequest", "continue is not a token this API issued") from None
    names = [name for name, _ in tree]
    return names.index(after) + 1 if after in names else len(names)


def _cacheable(path: str) -> bool:
    return path.startswith(PREFIX + "/") and not path.startswith(f"{PREFIX}/dashboard")


def _conditional(body: bytes, etag: str) -> Response:
    response = Response(body, mimetype="application/json", headers={"Cache-Control": "no-cache"})
    response.set_etag(etag)
    return response.make_conditional(request)


def _jobs(
    current: PassView, namespace: str | None, json_response: Callable[[dict[str, Any]], Response]
) -> Response:
    """A list of jobs, every namespace's (RBAC let the caller list them all) or one's, filtered
    by ``fieldSelector`` and paged by ``limit`` and ``continue`` (``reconciler.listing``)."""
    args = request.args
    wanted = field_selector(args.get("fieldSelector"), namespace or "")
    wanted.check(current)
    matching = wanted.select(current)
    limit = args.get("limit")
    page = page_of(matching, wanted, limit_of(limit), args.get("continue"))
    items = [e.item for e in (page.items if limit or args.get("continue") else matching)]
    if namespace is not None:  # no other namespace's job named
        known = namespaces_of(current)
        items = [redacted(i, namespace, known) for i in items]
    meta: dict[str, Any] = {
        "policyVersion": current.result.policy_version,
        "decidedAt": format_time(current.result.now),
    }
    if page.token and (limit or args.get("continue")):
        meta.update({"continue": page.token, "remainingItemCount": page.remaining})
    return json_response(
        {"kind": "JobList", "apiVersion": GROUP_VERSION, "metadata": meta, "items": items}
    )


def namespaces_of(current: PassView) -> frozenset[str]:
    """The namespaces of the view's jobs (what :func:`redacted` hides the jobs of)."""
    return current.namespaces


# a job named in a message: [Kind/]namespace/name, not part of a longer path or domain
_REF = re.compile(
    r"(?<![\w.\-/])(?:[A-Z][A-Za-z0-9.]*/)?([a-z0-9](?:[-a-z0-9]*[a-z0-9])?)/"
    r"[a-z0-9](?:[-a-z0-9.]*[a-z0-9])?(?![\w/])"
)
HIDDEN = "(a job of another namespace)"


def redacted(value: Any, namespace: str, known: frozenset[str]) -> Any:
    """``value`` (a job's fields) as a caller who may read only ``namespace`` sees it: every
    job of another of the ``known`` namespaces it names (a victim, the job a reservation holds
    room for, a StrictFIFO head, a dependency) is replaced by ``HIDDEN``."""
    if isinstance(value, str):

        def hide(match: re.Match[str]) -> str:
            other = match.group(1)
            return HIDDEN if other != namespace and other in known else match.group(0)

        return _REF.sub(hide, value)
    if isinstance(value, Mapping):
        return {k: redacted(v, namespace, known) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redacted(v, namespace, known) for v in value]
    return value
