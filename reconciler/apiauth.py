"""Who may read the direct HTTP API (``/api/v1``) when it is exposed beyond 127.0.0.1.

The API server decides, as it does for an aggregated API's callers: the bearer token is checked
with a ``TokenReview`` and each request with a ``SubjectAccessReview``, by the same attributes
the visibility API has behind the API server (``reconciler.visibility``): ``list``/``get`` of
``jobs`` (in a namespace, or in all of them) and ``queues``, group ``visibility.fleetgate.io``.
So one RBAC Role lets a tenant read its namespace's jobs through either door. Answers are
cached for ``ttl`` seconds (by the token's hash, and by the caller and the attributes), as
kube-apiserver's delegating authenticator and authorizer cache theirs.

The probes (``/healthz``, ``/readyz``, ``/livez``), ``/leader`` and ``/metrics`` (aggregate
numbers per queue, no job) stay open: the kubelet and Prometheus must reach them.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import kubernetes
import urllib3
from kubernetes.client.exceptions import ApiException

from reconciler.visibility import GROUP, Caller

OPEN_PATHS = frozenset({"/healthz", "/readyz", "/livez", "/leader", "/metrics"})
DEFAULT_TTL = 10.0


@dataclass(frozen=True, slots=True)
class Attributes:
    """What a request asks, as RBAC sees it."""

    verb: str  # get | list
    resource: str  # jobs | queues
    namespace: str = ""  # "" for all namespaces, or a cluster-scoped resource
    name: str = ""

    def said(self) -> str:
        where = f' in the namespace "{self.namespace}"' if self.namespace else ""
        return f'{self.verb} resource "{self.resource}" in API group "{GROUP}"{where}'


def attributes_of(path: str, query: dict[str, str]) -> Attributes | None:
    """The RBAC attributes of a read of ``/api/v1`` (None: not an API resource path)."""
    parts = [p for p in path.split("/") if p]
    if parts[:2] != ["api", "v1"] or len(parts) < 3:
        return None
    resource, rest = parts[2], parts[3:]
    if resource == "queues":
        return Attributes("get", "queues", name=rest[0]) if rest else Attributes("list", "queues")
    if resource == "jobs":
        if len(rest) >= 2:
            return Attributes("get", "jobs", rest[0], rest[1])
        return Attributes("list", "jobs", query.get("namespace", ""))
    return None


class Delegated:
    """TokenReview and SubjectAccessReview through ``api`` (a ``kubernetes`` ApiClient)."""

    def __init__(
        self, api: Any, ttl: float = DEFAULT_TTL, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.authentication = kubernetes.client.AuthenticationV1Api(api)
        self.authorization = kubernetes.client.AuthorizationV1Api(api)
        self.ttl = ttl
        self.clock = clock
        self._lock = threading.Lock()
        self._callers: dict[str, tuple[float, Caller | None]] = {}
        self._answers: dict[tuple[Caller, Attributes], tuple[float, bool]] = {}

    def authenticate(self, token: str) -> Caller | None:
        """The caller the token belongs to (None: not a valid token)."""
        key = hashlib.sha256(token.encode()).hexdigest()
        kept = self._kept(self._callers, key)
        if kept is not None:
            return kept[0]
        review = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                  "spec": {"token": token}}  # fmt: skip
        status = self._call(self.authentication.create_token_review, review)
        caller = None
        if status.get("authenticated"):
            user = status.get("user") or {}
            caller = Caller(str(user.get("username", "")), tuple(user.get("groups") or ()))
        self._keep(self._callers, key, caller)
        return caller

    def allowed(self, caller: Caller, asked: Attributes) -> bool:
        key = (caller, asked)
        kept = self._kept(self._answers, key)
        if kept is not None:
            return bool(kept[0])
        attributes = {"group": GROUP, "resource": asked.resource, "verb": asked.verb}
        if asked.namespace:
            attributes["namespace"] = asked.namespace
        if asked.name:
            attributes["name"] = asked.name
        review = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {"user": caller.user, "groups": list(caller.groups),
                     "resourceAttributes": attributes},
        }  # fmt: skip
        answer = bool(
            self._call(self.authorization.create_subject_access_review, review).get("allowed")
        )
        self._keep(self._answers, key, answer)
        return answer

    def _call(self, create: Callable[..., Any], body: dict[str, Any]) -> dict[str, Any]:
        answer = create(body, _preload_content=False, _request_timeout=10)
        return dict(json.loads(answer.read()).get("status") or {})

    def _kept(self, cache: dict[Any, tuple[float, Any]], key: Any) -> tuple[Any] | None:
        with self._lock:
            found = cache.get(key)
            if found is None or self.clock() - found[0] >= self.ttl:
                return None
            return (found[1],)

    def _keep(self, cache: dict[Any, tuple[float, Any]], key: Any, value: Any) -> None:
        with self._lock:
            if len(cache) > 10_000:  # a flood of distinct tokens cannot grow it without bound
                cache.clear()
            cache[key] = (self.clock(), value)


ERRORS = (ApiException, urllib3.exceptions.HTTPError, OSError, ValueError)
"""What asking the API server may raise: the request is then answered 503 (not allowed)."""
