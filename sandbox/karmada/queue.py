"""Work queues fed by the store's events, so a pass looks only at what changed.

:class:`WorkQueue` is client-go's ``workqueue`` in outline: a key is queued at most once however
many events name it, keys come out in the order they were first queued, and a key whose
reconcile failed comes back after a per-key exponential backoff (5 ms doubling, at most 10 s).

:class:`EventRouter` is the informers' event handlers: it listens to the store (in process,
without copies) and turns each event into keys (an event only says "look again"):

* a template ADDED/DELETED, or changed in spec, labels or annotations (not a status write) →
  the detector's template key, and the key of the binding the detector makes of it;
* a ResourceBinding/ClusterResourceBinding → its key, for the scheduler, the binding controller
  and the status controller;
* a Work in ``karmada-es-*`` → its key (execution, Work status) and its binding's key, and the
  index binding → Works that the binding and status controllers read;
* a (Cluster)PropagationPolicy or PriorityClass → every template again (a policy may claim or
  release any of them); a Cluster → the unplaced bindings again.

A full resync (:meth:`EventRouter.resync`) queues every key, as an informer's periodic resync
does; the controllers run it at start and every ``Timings.resync`` seconds.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any, Generic, TypeVar

from engine.fleet.detector import binding_name
from sandbox.karmada.names import (
    BINDING_NAME,
    BINDING_NAMESPACE,
    BINDING_PERMANENT_ID,
    CLUSTER_BINDING_NAME,
    CLUSTER_BINDING_PERMANENT_ID,
    EXECUTION_SPACE_PREFIX,
)
from sandbox.store import Store
from sandbox.watch import ADDED, DELETED, WatchEvent

K = TypeVar("K", bound=Hashable)
BASE_DELAY, MAX_DELAY = 0.005, 10.0
RB = "resourcebindings.work.karmada.io"
CRB = "clusterresourcebindings.work.karmada.io"
WORKS = "works.work.karmada.io"
CLUSTERS = "clusters.cluster.karmada.io"
POLICIES = (
    "propagationpolicies.policy.karmada.io",
    "clusterpropagationpolicies.policy.karmada.io",
    "priorityclasses.scheduling.k8s.io",
)
ObjectKey = tuple[str, str, str]  # (resource key, namespace or "", name)
WorkKey = tuple[str, str]  # (namespace, name)


class WorkQueue(Generic[K]):
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._lock = threading.Lock()
        self._keys: dict[K, None] = {}
        self._later: dict[K, float] = {}  # failed keys → when they may come back
        self._failures: dict[K, int] = {}
        self._clock = clock

    def add(self, key: K) -> None:
        with self._lock:
            self._keys[key] = None

    def add_all(self, keys: Iterable[K]) -> None:
        with self._lock:
            self._keys.update(dict.fromkeys(keys))

    def drain(self) -> list[K]:
        """The queued keys, and the failed ones whose backoff has passed; the queue empties."""
        with self._lock:
            now = self._clock()
            due = [k for k, at in self._later.items() if at <= now]
            for key in due:
                del self._later[key]
            keys = list(dict.fromkeys([*self._keys, *due]))
            self._keys.clear()
            return keys

    def retry(self, key: K) -> None:
        """Queue ``key`` again after its backoff (``AddRateLimited``)."""
        with self._lock:
            failures = self._failures.get(key, 0) + 1
            self._failures[key] = failures
            self._later[key] = self._clock() + min(BASE_DELAY * 2 ** (failures - 1), MAX_DELAY)

    def forget(self, key: K) -> None:
        with self._lock:
            self._failures.pop(key, None)

    def __len__(self) -> int:
        with self._lock:
            return len(self._keys) + len(self._later)


def _meta(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return (obj or {}).get("metadata") or {}


def _changed_beyond_status(event: WatchEvent) -> bool:
    if event.type in (ADDED, DELETED) or event.old is None:
        return True
    new, old = _meta(event.object), _meta(event.old)
    return any(new.get(f) != old.get(f) for f in ("generation", "labels", "annotations")) or (
        bool(new.get("deletionTimestamp")) != bool(old.get("deletionTimestamp"))
    )


def work_binding_ids(work: Mapping[str, Any]) -> list[tuple[str, str]]:
    labels = _meta(work).get("labels") or {}
    keys = (BINDING_PERMANENT_ID, CLUSTER_BINDING_PERMANENT_ID)
    return [(key, str(labels[key])) for key in keys if labels.get(key)]


class EventRouter:
    def __init__(self, store: Store, template_types: Sequence[str], wake: Callable[[], None]):
        self.store = store
        self.template_types = frozenset(template_types)
        self.wake = wake
        self.templates: WorkQueue[ObjectKey] = WorkQueue()
        self.bindings: WorkQueue[ObjectKey] = WorkQueue()
        self.works: WorkQueue[WorkKey] = WorkQueue()
        self.policies_changed = threading.Event()
        self.clusters_changed = threading.Event()
        self._index_lock = threading.Lock()
        self._works_by_binding: dict[tuple[str, str], set[WorkKey]] = {}
        store.add_listener(self.on_event)

    def close(self) -> None:
        self.store.remove_listener(self.on_event)

    def works_of(self, binding_id: tuple[str, str]) -> list[WorkKey]:
        with self._index_lock:
            return sorted(self._works_by_binding.get(binding_id, ()))

    def on_event(self, resource: str, event: WatchEvent) -> None:
        """The store's listener: under its lock, so only keys and flags, never a store call."""
        obj = event.object
        m = _meta(obj)
        namespace, name = str(m.get("namespace") or ""), str(m.get("name", ""))
        if resource in self.template_types:
            if not _changed_beyond_status(event):
                return
            self.templates.add((resource, namespace, name))
            binding = binding_name(str(obj.get("kind", "")), name)
            self.bindings.add((RB if namespace else CRB, namespace, binding))
        elif resource in (RB, CRB):
            self.bindings.add((resource, namespace, name))
        elif resource == WORKS:
            if not namespace.startswith(EXECUTION_SPACE_PREFIX):
                return
            self._index(event)
            self.works.add((namespace, name))
            annotations = m.get("annotations") or {}
            if annotations.get(BINDING_NAME):
                key = (RB, str(annotations.get(BINDING_NAMESPACE, "")), annotations[BINDING_NAME])
                self.bindings.add(key)
            elif annotations.get(CLUSTER_BINDING_NAME):
                self.bindings.add((CRB, "", annotations[CLUSTER_BINDING_NAME]))
        elif resource in POLICIES:
            self.policies_changed.set()
        elif resource == CLUSTERS:
            self.clusters_changed.set()
        else:
            return
        self.wake()

    def _index(self, event: WatchEvent) -> None:
        m = _meta(event.object)
        key = (str(m.get("namespace", "")), str(m.get("name", "")))
        with self._index_lock:
            for binding_id in work_binding_ids(event.old or {}):
                self._works_by_binding.get(binding_id, set()).discard(key)
            if event.type != DELETED:
                for binding_id in work_binding_ids(event.object):
                    self._works_by_binding.setdefault(binding_id, set()).add(key)

    def resync(self) -> None:
        """Every key again, and the Work index rebuilt from the store."""
        templates: list[ObjectKey] = []
        for resource in sorted(self.template_types):
            self.store.scan(resource, lambda o, r=resource: templates.append(_key(r, o)))
        bindings: list[ObjectKey] = []
        for resource in (RB, CRB):
            self.store.scan(resource, lambda o, r=resource: bindings.append(_key(r, o)))
        index: dict[tuple[str, str], set[WorkKey]] = {}
        works: list[WorkKey] = []

        def visit(work: Mapping[str, Any]) -> None:
            _, namespace, name = _key(WORKS, work)
            if namespace.startswith(EXECUTION_SPACE_PREFIX):
                works.append((namespace, name))
                for binding_id in work_binding_ids(work):
                    index.setdefault(binding_id, set()).add((namespace, name))

        with self.store._lock:  # the index and the events after it agree
            self.store.scan(WORKS, visit)
            with self._index_lock:
                self._works_by_binding = index
        self.templates.add_all(sorted(templates))
        self.bindings.add_all(sorted(bindings))
        self.works.add_all(sorted(works))
        self.policies_changed.set()
        self.clusters_changed.set()


def _key(resource: str, obj: Mapping[str, Any]) -> ObjectKey:
    m = _meta(obj)
    return resource, str(m.get("namespace") or ""), str(m.get("name", ""))
