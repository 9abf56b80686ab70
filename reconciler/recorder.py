"""Events on the user's own job: the template a binding was made from (the PyTorchJob the user
applied) gets a core/v1 Event at each transition fleetgate writes, so ``kubectl describe`` on it
tells the story; the binding keeps its own Events (``reconciler.events``).

Recorded as client-go's event recorder records them (``tools/record``, its EventCorrelator):

- an Event identical to one recorded before (same object, type, reason and message) is counted
  on it: ``count`` + 1 and ``lastTimestamp``, one PATCH instead of a new Event;
- Events of one reason on one object with different messages are combined once ten came within
  ten minutes: the later ones count on one Event, ``(combined from similar events): <message>``;
- each object may have 25 Events at once and then one more every five minutes (a token bucket
  per object); the rest are dropped, and the drop is logged once per object until it may again.

What was recorded is kept for the last 4,096 keys (least recently used first out), as
client-go's caches are. Thread-safe: the reconciler's writes run on several threads.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import kubernetes
import urllib3
from kubernetes.client.exceptions import ApiException

from engine import annotations as ann
from engine.enforce import EventSpec
from reconciler.events import event_for

log = logging.getLogger("fleetgate.reconciler")

CACHE_ENTRIES = 4096  # client-go's maxLruCacheEntries
SIMILAR_MAX = 10  # client-go's defaultAggregateMaxEvents
SIMILAR_WINDOW = dt.timedelta(minutes=10)  # defaultAggregateIntervalInSeconds
BURST = 25  # defaultSpamBurst
REFILL = dt.timedelta(minutes=5)  # one token per 5 minutes: defaultSpamQPS = 1/300
COMBINED = "(combined from similar events): "

# the transitions a job's owner is told about on the job itself
TEMPLATE_REASONS = frozenset(
    {"Queued", "Pending", "Admitted", "Running", "Preempted", "Requeued", "GaveUp", "Rejected"}
)


@dataclass(slots=True)
class _Recorded:
    name: str
    namespace: str
    count: int


@dataclass(slots=True)
class _Similar:
    messages: set[str]
    since: dt.datetime


@dataclass(slots=True)
class _Bucket:
    tokens: float
    at: dt.datetime
    warned: bool = False


class Recorder:
    """Events about the objects fleetgate tells users about, deduplicated and rate-limited."""

    def __init__(
        self,
        core: kubernetes.client.CoreV1Api | None,
        timeout: Callable[[], float],
        gate: Callable[[], bool] | None = None,
    ) -> None:
        self.core = core
        self.timeout = timeout
        self.gate = gate
        self._lock = threading.Lock()
        self._recorded: OrderedDict[tuple[str, ...], _Recorded] = OrderedDict()
        self._similar: OrderedDict[tuple[str, ...], _Similar] = OrderedDict()
        self._buckets: OrderedDict[str, _Bucket] = OrderedDict()

    def record(self, involved: Mapping[str, Any], spec: EventSpec, now: dt.datetime) -> None:
        """An Event about ``involved`` (an ObjectReference), or one more count on its twin."""
        with self._lock:
            if not self._allowed(_object_key(involved), now):
                return
            spec = self._aggregated(involved, spec, now)
            key = (*_object_key(involved), spec.type, spec.reason, spec.message)
            seen = self._recorded.get(key)
            if seen is not None:
                seen.count += 1
                self._recorded.move_to_end(key)
                count, name, namespace = seen.count, seen.name, seen.namespace
            else:
                count, name, namespace = 1, "", ""
        if count > 1 and self._patch(name, namespace, count, now):
            return
        body = event_for(involved, spec, now, uuid.uuid4().hex[:16])
        if count > 1:  # the Event counted on is gone: a new one, with the count kept
            body["count"] = count
        if self._create(body, spec):
            with self._lock:
                meta = body["metadata"]
                self._keep(key, _Recorded(meta["name"], meta["namespace"], count))

    def _allowed(self, obj: tuple[str, ...], now: dt.datetime) -> bool:
        """The object's token bucket: ``BURST`` at once, one more per ``REFILL``."""
        name = "/".join(obj)
        bucket = self._buckets.get(name)
        if bucket is None:
            bucket = self._buckets[name] = _Bucket(float(BURST), now)
            while len(self._buckets) > CACHE_ENTRIES:
                self._buckets.popitem(last=False)
        self._buckets.move_to_end(name)
        gained = max(0.0, (now - bucket.at) / REFILL)
        bucket.tokens, bucket.at = min(float(BURST), bucket.tokens + gained), now
        if bucket.tokens >= 1:
            bucket.tokens -= 1
            bucket.warned = False
            return True
        if not bucket.warned:
            bucket.warned = True
            log.info("Events about %s dropped: %d at once, then one per 5 minutes", name, BURST)
        return False

    def _aggregated(
        self, involved: Mapping[str, Any], spec: EventSpec, now: dt.datetime
    ) -> EventSpec:
        """``spec``, or from the tenth similar message in the window, the combined Event."""
        key = (*_object_key(involved), spec.type, spec.reason)
        similar = self._similar.get(key)
        if similar is None or now - similar.since > SIMILAR_WINDOW:
            similar = _Similar(set(), now)
            self._similar[key] = similar
            while len(self._similar) > CACHE_ENTRIES:
                self._similar.popitem(last=False)
        self._similar.move_to_end(key)
        similar.messages.add(spec.message)
        if len(similar.messages) < SIMILAR_MAX:
            return spec
        return EventSpec(spec.type, spec.reason, COMBINED + spec.message)

    def _keep(self, key: tuple[str, ...], recorded: _Recorded) -> None:
        self._recorded[key] = recorded
        self._recorded.move_to_end(key)
        while len(self._recorded) > CACHE_ENTRIES:
            self._recorded.popitem(last=False)

    def _patch(self, name: str, namespace: str, count: int, now: dt.datetime) -> bool:
        if self.core is None or (self.gate is not None and not self.gate()):
            return True  # nothing to send to, or not the leader: nothing sent, nothing lost
        body = {"count": count, "lastTimestamp": ann.format_time(now)}
        try:
            answer = self.core.patch_namespaced_event(
                name, namespace, body, _request_timeout=self.timeout(), _preload_content=False
            )
            answer.read()
            answer.release_conn()
        except ApiException as error:
            if error.status == 404:
                return False
            log.warning("Event %s/%s not counted: %s", namespace, name, error.reason)
        except (urllib3.exceptions.HTTPError, OSError) as error:
            log.warning("Event %s/%s not counted: %s", namespace, name, error)
        return True

    def _create(self, body: dict[str, Any], spec: EventSpec) -> bool:
        if self.core is None or (self.gate is not None and not self.gate()):
            return False
        namespace = body["metadata"]["namespace"]
        try:
            answer = self.core.create_namespaced_event(
                namespace, body, _request_timeout=self.timeout(), _preload_content=False
            )
            answer.read()
            answer.release_conn()
        except (ApiException, urllib3.exceptions.HTTPError, OSError) as error:
            what = f"{body['involvedObject'].get('kind')} {body['involvedObject'].get('name')}"
            log.warning("%s: Event %s not recorded: %s", what, spec.reason, error)
            return False
        return True


def _object_key(involved: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(
        str(involved.get(k) or "") for k in ("apiVersion", "kind", "namespace", "name", "uid")
    )


def template_of(binding: Mapping[str, Any]) -> dict[str, Any] | None:
    """The ObjectReference of the template ``binding`` was made from (``spec.resource``)."""
    resource = (binding.get("spec") or {}).get("resource") or {}
    if not resource.get("kind") or not resource.get("name"):
        return None
    found = {k: resource[k] for k in ("apiVersion", "kind", "name", "uid") if resource.get(k)}
    namespace = resource.get("namespace") or (binding.get("metadata") or {}).get("namespace")
    if namespace:
        found["namespace"] = namespace
    return found
