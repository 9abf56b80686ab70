"""The store's state and what every operation on it builds on: look-ups, lists, watches and
listeners, committing an object (the resourceVersion counter, the event log, the owner index) and
the admission calls. Deletion (:mod:`sandbox.deletion`) and writes (:mod:`sandbox.writes`) build
on it, in that order; :class:`sandbox.store.Store` is the whole.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from typing import Any

from sandbox import errors, meta
from sandbox.admission import Admission, AdmissionRequest
from sandbox.jsoncopy import copy_json
from sandbox.paging import Snapshots
from sandbox.resources import Registry, Resource, ResourceType, default_registry
from sandbox.schema import Schemas, load_schemas
from sandbox.selectors import (
    FieldSelector,
    LabelSelector,
    parse_field_selector,
    parse_label_selector,
)
from sandbox.watch import ADDED, EventLog, Subscription, WatchEvent, WatchFilter

# sees every event as it is stored, under the store's lock: must be quick, never call the store
Listener = Callable[[str, WatchEvent], None]
Key = tuple[str, str]  # (namespace or "", name)
INITIAL_NAMESPACES = ("default", "kube-system", "kube-public")


class StoreCore:
    def __init__(
        self,
        registry: Registry | None = None,
        schemas: Schemas | None = None,
        *,
        event_log_limit: int = 1000,
        watch_queue_limit: int = 10_000,
        rng: random.Random | None = None,
        clock: Callable[[], datetime] | None = None,
        namespaces: tuple[str, ...] = INITIAL_NAMESPACES,
        freshness_timeout: float = 3.0,
    ) -> None:
        self.registry = registry or default_registry()
        self.schemas = schemas if schemas is not None else load_schemas()
        self.admission: Admission | None = None
        self.ca_pem: bytes | None = None  # the server's CA: ca.crt of service-account tokens
        self._rng = rng or random.Random()
        self._clock = clock or (lambda: datetime.now(UTC))
        self._lock = threading.RLock()
        self._fresher = threading.Condition(self._lock)  # notified as the counter moves
        # seconds a list waits for a resourceVersion the store has not reached (blockTimeout)
        self.freshness_timeout = freshness_timeout
        self._rv = 0
        self._objects: dict[str, dict[Key, dict[str, Any]]] = {rt.key: {} for rt in self.registry}
        self._logs = {rt.key: EventLog(event_log_limit) for rt in self.registry}
        self._subscriptions: dict[str, list[Subscription]] = {rt.key: [] for rt in self.registry}
        self._by_uid: dict[str, tuple[ResourceType, Key]] = {}
        self._dependents: dict[str, set[str]] = {}
        self._watch_queue_limit = watch_queue_limit
        self._snapshots = Snapshots()
        self._listeners: list[Listener] = []
        for name in namespaces:
            self.create("namespaces", {"metadata": {"name": name}})

    # -- look-ups ----------------------------------------------------------------------------

    @property
    def resource_version(self) -> int:
        """The newest resourceVersion handed out."""
        return self._rv

    def resource(self, resource: Resource) -> ResourceType:
        return resource if isinstance(resource, ResourceType) else self.registry.by_key(resource)

    def resource_for(self, api_version: str, kind: str) -> ResourceType:
        rt = self.registry.for_kind(api_version, kind)
        if rt is None:
            raise errors.not_found_path()
        return rt

    def get(
        self,
        resource: Resource,
        name: str,
        *,
        namespace: str | None = None,
        version: str | None = None,
    ) -> dict[str, Any]:
        rt = self.resource(resource)
        with self._lock:
            return self._out(rt, self._lookup(rt, self._scope(rt, namespace), name), version)

    def list(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | LabelSelector = "",
        field_selector: str | FieldSelector = "",
        limit: int = 0,
        continue_token: str = "",
        version: str | None = None,
        resource_version: str | int | None = None,
    ) -> dict[str, Any]:
        """A ``<Kind>List``; with ``limit``, pages of one consistent snapshot (``continue``).
        ``resource_version``: the list is not older than it (504 ResourceVersionTooLarge when
        the store does not get there within ``freshness_timeout``)."""
        rt = self.resource(resource)
        if continue_token:
            page = self._snapshots.next_page(continue_token, limit)
        else:
            chosen = self._filter(rt, namespace, label_selector, field_selector)
            with self._lock:
                self._wait_until_fresh(resource_version)
                items = [
                    obj for _, obj in sorted(self._objects[rt.key].items()) if chosen.matches(obj)
                ]
                page = self._snapshots.first_page(items, self._rv, limit)
        list_meta: dict[str, Any] = {"resourceVersion": str(page.resource_version)}
        if page.continue_token:
            list_meta["continue"] = page.continue_token
            list_meta["remainingItemCount"] = page.remaining
        return {
            "apiVersion": rt.api_version(version),
            "kind": rt.list_kind,
            "metadata": list_meta,
            "items": [self._out(rt, obj, version) for obj in page.items],
        }

    def _wait_until_fresh(self, resource_version: str | int | None) -> None:
        """Block (holding the lock on return) until the counter reaches ``resource_version``;
        504 ResourceVersionTooLarge after ``freshness_timeout`` (the caller holds the lock)."""
        if resource_version in (None, "", "0", 0):
            return
        wanted = _parse_rv(resource_version)  # type: ignore[arg-type]
        if not self._fresher.wait_for(lambda: self._rv >= wanted, self.freshness_timeout):
            raise errors.too_large_resource_version(wanted, self._rv)

    def scan(self, resource: Resource, visit: Callable[[Mapping[str, Any]], None]) -> None:
        """``visit`` every stored object of ``resource`` under the lock, without copying them
        (the in-process controllers' cheap resync); ``visit`` must not change them."""
        rt = self.resource(resource)
        with self._lock:
            for obj in self._objects[rt.key].values():
                visit(obj)

    # -- watch -------------------------------------------------------------------------------

    def add_listener(self, listener: Listener) -> None:
        """``listener(resource key, event)`` for every event, under the store's lock and without
        copies: how the in-process controllers feed their work queues (an informer's handler)."""
        with self._lock:
            self._listeners.append(listener)

    def remove_listener(self, listener: Listener) -> None:
        with self._lock:
            if listener in self._listeners:
                self._listeners.remove(listener)

    def watch(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | LabelSelector = "",
        field_selector: str | FieldSelector = "",
        resource_version: str | int | None = None,
        version: str | None = None,
        callback: Callable[[dict[str, Any]], None] | None = None,
    ) -> Subscription:
        """Watch ``resource``. Without ``resource_version`` (or "0") the current objects arrive
        first as ADDED; with one, the events after it are replayed (410 Gone when too old) and
        only events after it are sent, also when the store has not reached it yet.
        With ``callback``, events are delivered to it on a daemon thread."""
        rt = self.resource(resource)
        chosen = self._filter(rt, namespace, label_selector, field_selector)
        initial = resource_version in (None, "", "0", 0)
        start = 0 if initial else _parse_rv(resource_version)  # type: ignore[arg-type]
        with self._lock:
            subscription = Subscription(
                chosen,
                rt.api_version(version),
                self._watch_queue_limit,
                self._rv,
                self._unsubscribe,
                start=start,
            )
            if initial:
                for _, obj in sorted(self._objects[rt.key].items()):
                    rv = int(obj["metadata"]["resourceVersion"])
                    subscription.offer(WatchEvent(ADDED, obj, rv))
            else:
                for event in self._logs[rt.key].since(start):
                    subscription.offer(event)
            self._subscriptions[rt.key].append(subscription)
        if callback is not None:
            subscription.run(callback, name=f"watch-{rt.plural}")
        return subscription

    def set_event_log_limit(self, limit: int, resource: Resource | None = None) -> None:
        """Keep only the last ``limit`` events (of one resource, or all): older resume points
        then get 410 Gone. Tests use it to force a relist."""
        with self._lock:
            keys = [self.resource(resource).key] if resource is not None else list(self._logs)
            for key in keys:
                self._logs[key].resize(limit)

    def close(self) -> None:
        """End every watch."""
        with self._lock:
            subscriptions = [s for subs in self._subscriptions.values() for s in subs]
        for subscription in subscriptions:
            subscription.close()

    def _unsubscribe(self, subscription: Subscription) -> None:
        with self._lock:
            for subs in self._subscriptions.values():
                if subscription in subs:
                    subs.remove(subscription)

    # -- internals (callers hold the lock where it says so) ----------------------------------

    def _scope(self, rt: ResourceType, namespace: str | None) -> str:
        if not rt.namespaced:
            return ""
        if not namespace:
            raise errors.bad_request(f"a namespace is required for {rt.plural}")
        return namespace

    def _filter(
        self, rt: ResourceType, namespace: str | None, labels: Any, fields: Any
    ) -> WatchFilter:
        labels = parse_label_selector(labels) if isinstance(labels, str) else labels
        fields = parse_field_selector(fields) if isinstance(fields, str) else fields
        return WatchFilter(namespace or None if rt.namespaced else None, labels, fields)

    def _lookup(self, rt: ResourceType, scope: str, name: str) -> dict[str, Any]:
        obj = self._objects[rt.key].get((scope, name))
        if obj is None:
            raise errors.not_found(rt.group, rt.plural, name)
        return obj

    @staticmethod
    def _out(rt: ResourceType, obj: Mapping[str, Any], version: str | None) -> dict[str, Any]:
        out = copy_json(obj)
        out["apiVersion"] = rt.api_version(version)
        return out

    def _put(
        self, rt: ResourceType, new: dict[str, Any], event: str, old: Mapping[str, Any] | None
    ) -> None:
        """Store ``new`` (caller holds the lock; ``new`` is never mutated afterwards)."""
        self._rv += 1
        new["metadata"]["resourceVersion"] = str(self._rv)
        metadata = new["metadata"]
        self._objects[rt.key][(metadata.get("namespace", ""), metadata["name"])] = new
        self._index(new, old)
        self._emit(rt, WatchEvent(event, new, self._rv, old))

    def _emit(self, rt: ResourceType, event: WatchEvent) -> None:
        self._logs[rt.key].append(event)
        self._fresher.notify_all()
        for listener in self._listeners:
            listener(rt.key, event)
        for subscription in list(self._subscriptions[rt.key]):
            subscription.offer(event)

    def _index(self, new: Mapping[str, Any] | None, old: Mapping[str, Any] | None) -> None:
        source = new or old
        assert source is not None
        uid = source["metadata"]["uid"]
        for owner in meta.owner_uids(old or {}):
            self._dependents.get(owner, set()).discard(uid)
        if new is None:
            self._by_uid.pop(uid, None)
            return
        rt = self.registry.for_kind(new["apiVersion"], new["kind"])
        assert rt is not None
        self._by_uid[uid] = (rt, (new["metadata"].get("namespace", ""), new["metadata"]["name"]))
        for owner in meta.owner_uids(new):
            self._dependents.setdefault(owner, set()).add(uid)

    def _objects_in(self, namespace: str) -> Iterator[tuple[ResourceType, dict[str, Any]]]:
        for rt in self.registry:
            if rt.namespaced:
                for (scope, _), obj in list(self._objects[rt.key].items()):
                    if scope == namespace:
                        yield rt, obj

    # -- admission (outside the lock) ---------------------------------------------------------

    def _mutate(
        self,
        op: str,
        rt: ResourceType,
        sub: str,
        scope: str,
        obj: dict[str, Any],
        old: Mapping[str, Any] | None,
        dry_run: bool,
    ) -> dict[str, Any]:
        if self.admission is None:
            return obj
        request = self._request(op, rt, sub, scope, obj, old, dry_run)
        mutated = self.admission.mutate(request)
        return copy_json(mutated) if mutated is not None else obj

    def _validate(
        self,
        op: str,
        rt: ResourceType,
        sub: str,
        scope: str,
        obj: dict[str, Any] | None,
        old: Mapping[str, Any] | None,
        dry_run: bool,
    ) -> None:
        if self.admission is not None:
            self.admission.validate(self._request(op, rt, sub, scope, obj, old, dry_run))

    @staticmethod
    def _request(
        op: str,
        rt: ResourceType,
        sub: str,
        scope: str,
        obj: Mapping[str, Any] | None,
        old: Mapping[str, Any] | None,
        dry_run: bool,
    ) -> AdmissionRequest:
        name = str(((obj or old or {}).get("metadata") or {}).get("name", ""))
        return AdmissionRequest(
            op,
            rt,
            sub,
            scope or None,
            name,
            copy_json(obj) if obj else None,
            copy_json(old) if old else None,
            dry_run,
        )


def _parse_rv(value: str | int) -> int:
    try:
        return int(value)
    except ValueError as error:
        raise errors.bad_request(f"invalid resource version: {value!r}") from error
