"""One log line per distinct problem, not one per retry (``fleetgate serve`` against an API
server that is down, refuses its credentials, or lacks a namespace).

Every informer and the lease elector retry on their own backoffs; what they meet is reported
here. A problem is said once, in words that say what to do (:func:`describe`), then again only
after a minute, two, four … (at most every ten minutes) with how often it recurred, and once when
it is over. Ten informers that cannot reach the API server make one line, not ten a second.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import urllib3
from kubernetes.client.exceptions import ApiException

FIRST_REPEAT = 60.0  # seconds before a problem still there is said again
LONGEST = 600.0  # the longest silence about a problem that lasts


@dataclass(slots=True)
class _Seen:
    said_at: float
    quiet: float
    again: int = 0  # times it recurred since it was last said


class Problems:
    """Problems said once, then with backoff; thread-safe."""

    def __init__(self, log: logging.Logger, clock: Callable[[], float] = time.monotonic) -> None:
        self.log = log
        self.clock = clock
        self._seen: dict[str, _Seen] = {}
        self._lock = threading.Lock()

    def report(self, key: str, message: str) -> bool:
        """``message`` about problem ``key``; True when it was logged now."""
        now = self.clock()
        with self._lock:
            seen = self._seen.get(key)
            if seen is None:
                self._seen[key] = _Seen(now, FIRST_REPEAT)
                said = message
            elif now - seen.said_at >= seen.quiet:
                said = f"{message} (still; {seen.again + 1} more times since it was last said)"
                seen.said_at, seen.quiet, seen.again = now, min(seen.quiet * 2, LONGEST), 0
            else:
                seen.again += 1
                return False
        self.log.warning("%s", said)
        return True

    def over(self, key: str, message: str) -> None:
        """Problem ``key`` is over: said once, when it had been reported."""
        with self._lock:
            if self._seen.pop(key, None) is None:
                return
        self.log.info("%s", message)


PROBLEMS = Problems(logging.getLogger("fleetgate.reconciler"))
"""The process's: every informer's and the lease elector's problems, each said once."""


def describe(error: BaseException, what: str, server: str = "") -> tuple[str, str]:
    """(the problem's key, a line saying it) for an error met doing ``what`` (``list
    resourcebindings.work.karmada.io``, ``update lease fleetgate-system/fleetgate``)."""
    where = f" at {server}" if server else ""
    if isinstance(error, ApiException):
        status = int(error.status or 0)
        said = _message(error)
        if status == 401:
            return "401", (
                f"the API server{where} refuses fleetgate's credentials (401 Unauthorized) to "
                f"{what}: check the kubeconfig, or the service account's token"
            )
        if status == 403:
            return f"403 {what}", (
                f"RBAC forbids fleetgate to {what} (403): {said}; the ClusterRole in "
                "deploy/karmada-apiserver/ grants what fleetgate needs"
            )
        if status == 404 and "namespaces" in said and "not found" in said:
            namespace = said.split('"')[1] if '"' in said else "?"
            return f"404 namespace {namespace}", (
                f"cannot {what}: namespace {namespace} does not exist; create it with "
                f"kubectl create namespace {namespace}, or name another (--lease-namespace)"
            )
        return f"{status} {what}", f"cannot {what}: HTTP {status} {error.reason}: {said}"
    if isinstance(error, urllib3.exceptions.HTTPError | OSError):
        return "unreachable", (
            f"the API server{where} is unreachable ({type(error).__name__}); fleetgate retries "
            "with backoff and goes on once it answers"
        )
    return f"{type(error).__name__} {what}", f"cannot {what}: {type(error).__name__}: {error}"


def _message(error: ApiException) -> str:
    try:
        found = json.loads(error.body or "{}")
    except ValueError:
        return str(error.reason)
    return str(found.get("message") or error.reason) if isinstance(found, dict) else ""
