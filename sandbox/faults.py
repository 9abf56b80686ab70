"""Faults on demand: API errors, latency, watch disconnects, clusters down, jobs that fail.

One :class:`Faults` per sandbox. API-level faults act on HTTP requests through the server's
request hooks (:meth:`Faults.attach`): a rule matches a request by method and path (regular
expressions, searched), for its first ``count`` matches (None: until cleared), each with
``probability`` drawn from a random generator seeded at creation (so a run repeats). An error
rule answers the Status the real server would (409 Conflict, 429 TooManyRequests with
``Retry-After``, 500 InternalError, …); a latency rule sleeps (real time) before serving.
In-process writes of the controllers are not affected: they are not HTTP requests.

The other faults are state that Karmada's controllers read (``sandbox.karmada``):
:meth:`cluster_state` (``NotReady``: the member reports Ready=False; ``Unreachable``: no status
update arrives at all, Ready turns Unknown) and :meth:`job_failure` (the member's job fails).
Controllers may :meth:`subscribe` to hear of changes at once.

Over HTTP (``POST/GET/DELETE /sandbox/faults``, see :meth:`handle_http`) and the CLI
(``fleetgate sandbox fault …``).
"""

from __future__ import annotations

import itertools
import json
import random
import re
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from sandbox import errors

if TYPE_CHECKING:
    from sandbox.server import Sandbox

ENDPOINT = "/sandbox/faults"
NOT_READY, UNREACHABLE = "NotReady", "Unreachable"
_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    409: "Conflict",
    410: "Expired",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}
Listener = Callable[[str, dict[str, Any]], None]


@dataclass(slots=True)
class Rule:
    """One API fault; ``remaining`` None means until cleared."""

    id: str
    type: str  # "error" | "latency"
    method: str
    path: str
    remaining: int | None
    probability: float
    code: int = 0
    seconds: float = 0.0  # latency, or Retry-After of an error
    message: str = ""
    hits: int = 0

    def matches(self, method: str, path: str) -> bool:
        return bool(re.fullmatch(self.method, method) and re.search(self.path, path))

    def error(self) -> errors.StatusError:
        reason = _REASONS.get(self.code, "InternalError")
        message = self.message or f"injected fault {self.id}: {self.code} {reason}"
        details = {"retryAfterSeconds": round(self.seconds)} if self.seconds else None
        return errors.StatusError(errors.status(self.code, reason, message, details))


class Faults:
    def __init__(self, seed: int = 0, sleep: Callable[[float], None] = time.sleep) -> None:
        self._random = random.Random(seed)
        self._sleep = sleep
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._rules: dict[str, Rule] = {}
        self._clusters: dict[str, str] = {}
        self._jobs: dict[tuple[str, str], str] = {}
        self._listeners: list[Listener] = []
        self._sandbox: Sandbox | None = None

    def attach(self, sandbox: Sandbox) -> Faults:
        """Hook into ``sandbox``'s requests and serve ``/sandbox/faults`` on it."""
        sandbox.request_hooks.append(self.on_request)
        sandbox.routes[ENDPOINT] = self.handle_http
        self._sandbox = sandbox
        return self

    # -- API faults --------------------------------------------------------------------------

    def fail_requests(
        self,
        code: int,
        *,
        method: str = ".*",
        path: str = "",
        count: int | None = None,
        probability: float = 1.0,
        retry_after: float = 0.0,
        message: str = "",
    ) -> str:
        """Answer matching requests with ``code`` (409, 429, 500, …); returns the rule id."""
        if not 400 <= code <= 599:
            raise ValueError(f"an injected error needs a 4xx or 5xx code, got {code}")
        return self._add("error", method, path, count, probability, code, retry_after, message)

    def delay_requests(
        self,
        seconds: float,
        *,
        method: str = ".*",
        path: str = "",
        count: int | None = None,
        probability: float = 1.0,
    ) -> str:
        """Sleep ``seconds`` before serving matching requests; returns the rule id."""
        if seconds < 0:
            raise ValueError("latency must be 0 seconds or more")
        return self._add("latency", method, path, count, probability, 0, seconds, "")

    def _add(self, kind: str, method: str, path: str, count: int | None, *rest: Any) -> str:
        probability = float(rest[0])
        if not 0 <= probability <= 1:
            raise ValueError(f"probability must be within 0…1, got {probability}")
        if count is not None and count < 1:
            raise ValueError(f"count must be at least 1, got {count}")
        for pattern in (method, path):
            try:
                re.compile(pattern)  # refused now, not on a request
            except re.error as error:
                raise ValueError(f"invalid regular expression {pattern!r}: {error}") from error
        with self._lock:
            rule = Rule(f"{kind}-{next(self._ids)}", kind, method, path, count, *rest)
            self._rules[rule.id] = rule
        self._notify("rule", asdict(rule))
        return rule.id

    def clear(self, rule_id: str | None = None) -> int:
        """Remove one rule, or every rule and every cluster and job fault; how many went."""
        with self._lock:
            if rule_id is not None:
                return 1 if self._rules.pop(rule_id, None) else 0
            removed = len(self._rules) + len(self._clusters) + len(self._jobs)
            self._rules.clear()
            clusters, self._clusters = list(self._clusters), {}
            self._jobs.clear()
        for name in clusters:
            self._notify("cluster", {"cluster": name, "state": None})
        return removed

    def on_request(self, method: str, path: str, query: dict[str, str]) -> None:
        """The request hook: sleep for latency rules, raise for the first error rule."""
        delay, failure = 0.0, None
        with self._lock:
            for rule in list(self._rules.values()):
                if failure is not None and rule.type == "error":
                    continue
                if not rule.matches(method, path) or self._random.random() >= rule.probability:
                    continue
                rule.hits += 1
                if rule.remaining is not None:
                    rule.remaining -= 1
                    if rule.remaining == 0:
                        del self._rules[rule.id]
                if rule.type == "latency":
                    delay += rule.seconds
                else:
                    failure = rule.error()
        if delay:
            self._sleep(delay)
        if failure is not None:
            raise failure

    def drop_watches(self, path: str = "", abrupt: bool = False) -> int:
        """End the open HTTP watches whose path matches (all by default); ``abrupt`` closes
        the connection mid-stream instead of ending the response. How many were dropped."""
        if self._sandbox is None:
            raise RuntimeError("attach the faults to a sandbox first")
        return self._sandbox.drop_watches(path, abrupt)

    # -- faults the Karmada controllers read -------------------------------------------------

    def cluster_down(self, name: str, *, unreachable: bool = False) -> None:
        state = UNREACHABLE if unreachable else NOT_READY
        with self._lock:
            self._clusters[name] = state
        self._notify("cluster", {"cluster": name, "state": state})

    def cluster_up(self, name: str) -> None:
        with self._lock:
            self._clusters.pop(name, None)
        self._notify("cluster", {"cluster": name, "state": None})

    def cluster_state(self, name: str) -> str | None:
        """``NotReady``, ``Unreachable`` or None (healthy)."""
        with self._lock:
            return self._clusters.get(name)

    def fail_job(self, namespace: str, name: str, message: str = "injected job failure") -> None:
        """The job template ``namespace/name`` fails on whichever member runs it."""
        with self._lock:
            self._jobs[(namespace, name)] = message
        self._notify("job", {"namespace": namespace, "name": name, "message": message})

    def job_failure(self, namespace: str, name: str) -> str | None:
        """The failure message injected for the job, or None."""
        with self._lock:
            return self._jobs.get((namespace, name))

    def failing_jobs(self) -> dict[tuple[str, str], str]:
        """Every injected job failure: (namespace, name) → message."""
        with self._lock:
            return dict(self._jobs)

    def clear_job(self, namespace: str, name: str) -> None:
        with self._lock:
            self._jobs.pop((namespace, name), None)

    def subscribe(self, listener: Listener) -> None:
        """``listener(kind, detail)`` after each change; kind: rule, cluster or job."""
        self._listeners.append(listener)

    def _notify(self, kind: str, detail: dict[str, Any]) -> None:
        for listener in list(self._listeners):
            listener(kind, detail)

    def describe(self) -> dict[str, Any]:
        with self._lock:
            return {
                "rules": [asdict(rule) for rule in self._rules.values()],
                "clusters": dict(self._clusters),
                "jobs": [
                    {"namespace": ns, "name": name, "message": message}
                    for (ns, name), message in sorted(self._jobs.items())
                ],
            }

    # -- over HTTP ---------------------------------------------------------------------------

    def handle_http(self, method: str, query: dict[str, str], body: bytes) -> tuple[int, Any]:
        """``GET`` lists, ``DELETE [?id=ID]`` clears, ``POST`` adds one fault (JSON, ``type``:
        error, latency, dropWatches, clusterDown, clusterUp, failJob; see docs/sandbox.md)."""
        if method == "GET":
            return 200, self.describe()
        if method == "DELETE":
            return 200, {"cleared": self.clear(query.get("id") or None)}
        if method != "POST":
            raise errors.method_not_allowed(method, ENDPOINT)
        try:
            fault = json.loads(body or b"{}")
            if not isinstance(fault, dict):
                raise TypeError("the body must be a JSON object")
            return self._apply(fault)
        except (ValueError, TypeError, KeyError) as error:
            raise errors.bad_request(f"{ENDPOINT}: {error!s}") from error

    def _apply(self, fault: dict[str, Any]) -> tuple[int, Any]:
        kind = fault.get("type")
        matching = {
            "method": str(fault.get("method") or ".*"),
            "path": str(fault.get("path") or ""),
            "count": int(fault["count"]) if fault.get("count") is not None else None,
            "probability": float(fault.get("probability", 1.0)),
        }
        if kind == "error":
            rule = self.fail_requests(
                int(fault["code"]),
                retry_after=float(fault.get("retryAfter") or 0),
                message=str(fault.get("message") or ""),
                **matching,
            )
            return 201, {"id": rule}
        if kind == "latency":
            return 201, {"id": self.delay_requests(float(fault["seconds"]), **matching)}
        if kind == "dropWatches":
            dropped = self.drop_watches(matching["path"], bool(fault.get("abrupt")))
            return 200, {"dropped": dropped}
        if kind == "clusterDown":
            self.cluster_down(str(fault["cluster"]), unreachable=bool(fault.get("unreachable")))
            return 200, {"cluster": fault["cluster"], "state": self.cluster_state(fault["cluster"])}
        if kind == "clusterUp":
            self.cluster_up(str(fault["cluster"]))
            return 200, {"cluster": fault["cluster"], "state": None}
        if kind == "failJob":
            message = str(fault.get("message") or "injected job failure")
            self.fail_job(str(fault["namespace"]), str(fault["name"]), message)
            return 200, {"namespace": fault["namespace"], "name": fault["name"]}
        raise ValueError(
            f"unknown fault type {kind!r}: error, latency, dropWatches, clusterDown, clusterUp "
            "or failJob"
        )
