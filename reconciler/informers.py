"""The informers the reconciler needs, and the snapshot builder's input from their caches."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterable, Mapping
from typing import Any

from kubernetes.client import ApiClient

from engine.fleet.model import NAME_LABEL
from engine.fleet.namespaces import read_namespace
from engine.workloads.model import DemandError
from reconciler.informer import Informer, Key, Listener
from reconciler.resources import Resource, default_resources

SOURCE_PREFIX = "watch:"
# An object's place in the informers' caches: (its source, namespace or "", name)
EntryKey = tuple[str, str, str]


def namespace_labels(namespaces: Informer, name: str) -> Mapping[str, str] | None:
    """A Namespace's labels from the watch of Namespaces (``kubernetes.io/metadata.name``
    included); None while it has not seen ``name``."""
    found = namespaces.get("", name)
    if found is None:
        return None
    try:
        return read_namespace(found).labels
    except DemandError:  # labels the API server would not have stored: the name alone
        return {NAME_LABEL: name}


def source_of(resource: Resource) -> str:
    """The source an object of ``resource`` carries in the snapshot (named in its issues)."""
    return SOURCE_PREFIX + resource.key


class Changes:
    """What the informers changed since the last ``take``: each object's newest state, or None
    when it was deleted (a relist is heard as the differences it found). Until the first take,
    and after ``resync``, the taker must read every cache instead. Thread-safe: the informers
    tell it (``heard``, an informer's recorder: as their caches change, so a take after a
    cache holds an object includes it) on their threads, a pass takes it on its own."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: dict[EntryKey, Mapping[str, Any] | None] = {}
        self._everything = True

    def heard(self, resource: str, key: Key, obj: Mapping[str, Any] | None) -> None:
        """An informer's listener: ``obj`` (None: deleted) in the cache of ``resource``."""
        with self._lock:
            self._pending[(SOURCE_PREFIX + resource, *key)] = obj

    def resync(self) -> None:
        """The next taker reads every cache (e.g. applying the last changes failed)."""
        with self._lock:
            self._everything = True

    def take(self) -> tuple[bool, dict[EntryKey, Mapping[str, Any] | None]]:
        """(read every cache, the changes heard since the last take)."""
        with self._lock:
            taken = self._everything, self._pending
            self._everything, self._pending = False, {}
            return taken


class Informers:
    """One :class:`Informer` per resource (default: Karmada's bindings, clusters and policies,
    PriorityClasses and every job-template kind fleetgate reads), started and stopped together.
    Each gets its own random generator seeded from ``seed``, so backoffs repeat per run."""

    def __init__(
        self,
        api_client: ApiClient,
        resources: Iterable[Resource] | None = None,
        *,
        seed: int | None = None,
        **options: Any,
    ) -> None:
        seeds = random.Random(seed)
        chosen = tuple(resources) if resources is not None else default_resources()
        self.informers: dict[str, Informer] = {
            r.key: Informer(api_client, r, rng=random.Random(seeds.random()), **options)
            for r in chosen
        }

    def __getitem__(self, key: str) -> Informer:
        return self.informers[key]

    def for_object(self, obj: Mapping[str, Any]) -> Informer | None:
        """The informer whose resource holds ``obj`` (by its apiVersion's group and kind)."""
        group = str(obj.get("apiVersion", "")).rpartition("/")[0]
        for informer in self.informers.values():
            if (informer.resource.group, informer.resource.kind) == (group, obj.get("kind")):
                return informer
        return None

    def add_listener(self, listener: Listener) -> None:
        for informer in self.informers.values():
            informer.add_listener(listener)

    def add_recorder(self, recorder: Listener) -> None:
        """``Informer.add_recorder`` on each: told of every change as the cache changes."""
        for informer in self.informers.values():
            informer.add_recorder(recorder)

    def start(self) -> Informers:
        for informer in self.informers.values():
            informer.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Stop them all at once, then wait for each (together within ``timeout``)."""
        for informer in self.informers.values():
            informer._stopping.set()
        deadline = time.monotonic() + timeout
        for informer in self.informers.values():
            informer.stop(max(0.0, deadline - time.monotonic()))

    def wait_synced(self, timeout: float) -> bool:
        """True once every informer listed once (a resource not served counts, empty)."""
        deadline = time.monotonic() + timeout
        return all(
            informer.synced.wait(max(0.0, deadline - time.monotonic()))
            for informer in self.informers.values()
        )

    def snapshot_objects(self) -> list[tuple[str, Mapping[str, Any]]]:
        """``(source, object)`` pairs of every cache, for ``engine.fleet.snapshot.build_snapshot``
        (as ``engine.fleet.files.read_objects`` gives them from files)."""
        return [
            (source_of(informer.resource), obj)
            for informer in self.informers.values()
            for _, obj in sorted(informer.snapshot_items().items())
        ]

    def keyed_objects(self) -> list[tuple[EntryKey, str, Mapping[str, Any]]]:
        """``(entry key, source, object)`` of every cache: what ``Changes`` names by key."""
        found = []
        for informer in self.informers.values():
            source = source_of(informer.resource)
            found += [
                ((source, *key), source, obj) for key, obj in informer.snapshot_items().items()
            ]
        return found
