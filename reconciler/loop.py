"""The reconciler loop: informers' caches → one scheduling cycle → the Applier, level-triggered.

``Reconciler(api_client, policies)`` owns the informers, a :class:`JobCache` kept between cycles
and an :class:`Applier`. ``run_once(now)`` is one pass: build the snapshot from the caches, run
the cycle (the garbage collector paused), and enforce each decision on the binding object it was
made on (from the ResourceBinding/ClusterResourceBinding cache, so its resourceVersion is the
precondition). Only managed bindings (label ``fleetgate.io/managed``) are written. A CONFLICT or
GONE marks the binding dirty: it is decided again by a later pass, once the watch brought its new
version (or, when the cache still holds the version the 409 answered, once a fresh read shows it
unchanged). Writes never go into the caches: the watch brings them back. A pass run twice writes
nothing the second time (the Applier answers UNCHANGED).

``start()`` runs passes on a thread: after relevant informer events (debounced), every
``resync`` seconds, and soon again while bindings are dirty.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import kubernetes
from kubernetes.client.exceptions import ApiException

from engine import annotations as ann
from engine.cycle.cycle import run_cycle
from engine.cycle.jobcache import JobCache
from engine.cycle.model import CycleResult, Decision
from engine.errors import FleetgateError
from engine.fleet.snapshot import build_snapshot
from engine.gcpause import collector_paused
from engine.policy.policyset import PolicySet
from reconciler.apply import GROUP, VERSION, Applier, Outcome, utc_now
from reconciler.informer import Key
from reconciler.informers import Informers
from reconciler.resources import CLUSTER_RESOURCE_BINDINGS, RESOURCE_BINDINGS

log = logging.getLogger("fleetgate.reconciler")

DIRTY_RETRY = 1.0  # seconds before a pass looks again at dirty bindings no event came for
ERROR_BACKOFF = (0.5, 30.0)  # seconds: first and largest wait after a failed pass


class PolicySource(Protocol):
    @property
    def current(self) -> PolicySet: ...


@dataclass(slots=True)
class PassSummary:
    """What one pass did: counts per outcome, and how long it took."""

    policy_version: str = ""
    decisions: int = 0
    applied: int = 0
    unchanged: int = 0
    conflicts: int = 0
    gone: int = 0
    skipped: int = 0  # no cached binding, not managed, or dirty and still stale
    errors: int = 0
    seconds: float = 0.0

    @property
    def writes(self) -> int:
        return self.applied


class Reconciler:
    def __init__(
        self,
        api_client: kubernetes.client.ApiClient,
        policies: PolicySource,
        mode: str = "bind",
        clock: Callable[[], dt.datetime] = utc_now,
        debounce: float = 0.2,
        resync: float = 30.0,
        *,
        informers: Informers | None = None,
        request_timeout: float = 30.0,
    ) -> None:
        self.policies = policies
        self.clock = clock
        self.debounce = debounce
        self.resync = resync
        self.informers = informers if informers is not None else Informers(api_client)
        self.applier = Applier(api_client, mode, clock, request_timeout)
        self.cache = JobCache()
        self.dirty: dict[str, str] = {}  # binding ref → the resourceVersion a write met 409/404 on
        self.passes = 0
        self.last: PassSummary | None = None
        self.last_result: CycleResult | None = None  # the latest cycle's decisions and queues
        self._custom = kubernetes.client.CustomObjectsApi(api_client)
        self._timeout = request_timeout
        self._pass = threading.Lock()
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self.informers.add_listener(self._on_event)

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self, *, loop: bool = True) -> Reconciler:
        """Start the informers and (``loop``) the pass thread."""
        self.informers.start()
        if loop and self._thread is None:
            self._stopping.clear()
            self._thread = threading.Thread(target=self._loop, name="reconciler", daemon=True)
            self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the thread, then the informers; idempotent."""
        self._stopping.set()
        self._wake.set()
        deadline = time.monotonic() + timeout
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
        self.informers.stop(max(0.0, deadline - time.monotonic()))

    def wait_synced(self, timeout: float) -> bool:
        return self.informers.wait_synced(timeout)

    def _on_event(self, _resource: str, _key: Key, _obj: Mapping[str, Any] | None) -> None:
        self._wake.set()  # every watched kind feeds the snapshot: each event says "look again"

    def _loop(self) -> None:
        failures = 0
        next_resync = time.monotonic()
        while not self._stopping.is_set():
            wait = max(0.0, next_resync - time.monotonic())
            if self.dirty:
                wait = min(wait, DIRTY_RETRY)
            if self._wake.wait(wait) and not self._stopping.is_set():
                self._stopping.wait(self.debounce)  # let a burst of events settle
            self._wake.clear()
            if self._stopping.is_set():
                return
            if time.monotonic() >= next_resync:
                next_resync = time.monotonic() + self.resync
            try:
                self.run_once()
                failures = 0
            except Exception:  # the next pass starts again from the API state (level-triggered)
                failures += 1
                delay = min(ERROR_BACKOFF[0] * 2 ** (failures - 1), ERROR_BACKOFF[1])
                log.exception("reconciler: pass failed; next one in %.1fs", delay)
                self._stopping.wait(delay)

    # -- one pass ----------------------------------------------------------------------------

    def run_once(self, now: dt.datetime | None = None) -> PassSummary:
        """One level-triggered pass at ``now`` (default: the clock)."""
        with self._pass:
            started = time.perf_counter()
            moment = now if now is not None else self.clock()
            policies = self.policies.current
            snapshot = build_snapshot(self.informers.snapshot_objects())
            with collector_paused():
                result = run_cycle(snapshot, policies, moment, self.cache)
            self.last_result = result
            summary = PassSummary(result.policy_version, len(result.decisions))
            for decision in result.decisions:
                self._enforce(decision, result.policy_version, summary)
            summary.seconds = time.perf_counter() - started
            self.passes += 1
            self.last = summary
            log.debug("reconciler pass: %s", summary)
            return summary

    def _enforce(self, decision: Decision, policy_version: str, summary: PassSummary) -> None:
        ref = decision.binding
        binding = self._cached(ref)
        if binding is None or not _managed(binding):
            summary.skipped += 1
            return
        version = _version(binding)
        stale = self.dirty.get(ref)
        if stale is not None:
            if stale == version and not self._unchanged_since(ref, binding):
                summary.skipped += 1  # the watch has not brought the new version yet
                return
            del self.dirty[ref]
        try:
            outcome = self.applier.apply(decision, binding, policy_version=policy_version)
        except (FleetgateError, ApiException, OSError) as error:
            summary.errors += 1
            log.error("%s: %s failed: %s", ref, decision.action, error)
            return
        if outcome == Outcome.APPLIED:
            summary.applied += 1
        elif outcome == Outcome.UNCHANGED:
            summary.unchanged += 1
        else:
            if outcome == Outcome.CONFLICT:
                summary.conflicts += 1
            else:
                summary.gone += 1
            self.dirty[ref] = version
            log.info("%s: %s; deciding again on its next version", ref, outcome)

    def _cached(self, ref: str) -> Mapping[str, Any] | None:
        namespace, _, name = ref.rpartition("/")
        resource = RESOURCE_BINDINGS if namespace else CLUSTER_RESOURCE_BINDINGS
        return self.informers[resource.key].get(namespace, name)

    def _unchanged_since(self, ref: str, binding: Mapping[str, Any]) -> bool:
        """A fresh read of a binding whose write met a 409 while the cache still holds the same
        version: True when the server holds that version too (the conflict came and went), so
        the cached object is current; never written into the cache."""
        namespace, _, name = ref.rpartition("/")
        try:
            if namespace:
                fresh = self._custom.get_namespaced_custom_object(
                    GROUP, VERSION, namespace, RESOURCE_BINDINGS.plural, name,
                    _request_timeout=self._timeout,
                )  # fmt: skip
            else:
                fresh = self._custom.get_cluster_custom_object(
                    GROUP, VERSION, CLUSTER_RESOURCE_BINDINGS.plural, name,
                    _request_timeout=self._timeout,
                )  # fmt: skip
        except (ApiException, OSError) as error:
            log.info("%s: re-read failed (%s); waiting for the watch", ref, error)
            return False
        return _version(fresh) == _version(binding)


def _managed(binding: Mapping[str, Any]) -> bool:
    labels = (binding.get("metadata") or {}).get("labels") or {}
    return labels.get(ann.MANAGED) == "true"


def _version(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")
