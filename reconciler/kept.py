"""The snapshot a reconciler pass reads, kept up to date with what its informers changed.

Every informer tells :class:`Changes` each object it added, replaced or deleted (a relist: the
differences it found), as its cache changes; ``KeptSnapshot.update`` applies what was heard
since the last pass to an ``engine.fleet.live.LiveSnapshot``, which reads only those objects
again. The first update, and one after an update that failed, reads every cache instead; so
does every update over informers that only list their objects (a test's stand-in). It also
keeps the bindings the Adopter looks at (managed ones placed without fleetgate's admission:
``reconciler.adopt``), so a pass does not walk every binding for them, and what the last pass
read, so that a pass only events asked for runs no cycle when they changed nothing it reads
(``nothing_new``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from engine.fleet.live import LiveSnapshot
from engine.fleet.model import Snapshot
from reconciler.adopt import ref_of, unadmitted_and_placed
from reconciler.informers import Changes, source_of
from reconciler.resources import CLUSTER_RESOURCE_BINDINGS, RESOURCE_BINDINGS

BINDING_SOURCES = frozenset(source_of(r) for r in (RESOURCE_BINDINGS, CLUSTER_RESOURCE_BINDINGS))
Entries = list[tuple[Any, str, Mapping[str, Any]]]  # (entry key, source, object)
Placed = dict[Any, tuple[str, Mapping[str, Any]]]  # entry key → (source, binding)


class Caches(Protocol):
    def snapshot_objects(self) -> list[tuple[str, Mapping[str, Any]]]: ...


class KeptSnapshot:
    """One per reconciler; used by one pass at a time (its informers tell ``changes`` on
    their own threads)."""

    def __init__(self, informers: Caches) -> None:
        self.informers = informers
        self.live = LiveSnapshot()
        self.changes = Changes()
        self._keyed = all(
            callable(getattr(informers, name, None)) for name in ("keyed_objects", "add_recorder")
        )
        if self._keyed:
            informers.add_recorder(self.changes.heard)  # type: ignore[attr-defined]
        self._placed: Placed = {}
        self._ran_on: tuple[Snapshot, Any] | None = None  # what the last clean pass read
        # the refs of the bindings the last update read again; None: it read every cache
        self.touched: set[str] | None = None

    def ran(self, snapshot: Snapshot | None, policies: Any, clean: bool) -> None:
        """A pass read ``snapshot`` under ``policies`` and ended; ``clean``: it left nothing to
        retry (no failed, conflicting or gone write, none held back for want of the lease,
        nothing adopted) and asked no estimator."""
        self._ran_on = (snapshot, policies) if clean and snapshot is not None else None

    def nothing_new(self, snapshot: Snapshot, policies: Any) -> bool:
        """True when a pass now would decide and write what the last one did, given nothing
        is dirty or adopted now (the caller's part): it reads the very snapshot and policy set
        the last, clean, pass read (``LiveSnapshot`` gives the same object while nothing it
        holds changed). The cycle and the plan are pure functions of (snapshot, policies, now,
        their memos): only time differs, and what time alone changes is what the resync and
        ``due`` passes are for, as when no event comes at all. So events that changed nothing
        a pass reads count as no event: no pass, the last decisions stand."""
        ran_on = self._ran_on
        return ran_on is not None and ran_on[0] is snapshot and ran_on[1] is policies

    def update(self) -> None:
        """Apply what the informers changed since the last update."""
        try:
            self._update()
        except Exception:
            self.changes.resync()  # the next update reads every cache again
            raise

    @property
    def keyed(self) -> bool:
        """Whether updates read only what the informers changed (else every cache)."""
        return self._keyed

    def _update(self) -> None:
        self.touched = None
        everything, changed = self.changes.take()
        if everything or not self._keyed:
            entries = self._entries()
            self.live.sync(entries)
            self._placed = {
                k: (s, o)
                for k, s, o in entries
                if s in BINDING_SOURCES and unadmitted_and_placed(o)
            }
            return
        self.touched = {
            f"{key[1]}/{key[2]}" if key[1] else key[2]
            for key in changed
            if key[0] in BINDING_SOURCES
        }
        for key, obj in changed.items():
            source = key[0]
            if obj is None:
                self.live.delete(key)
            else:
                self.live.put(key, source, obj)
            if source not in BINDING_SOURCES:
                continue
            if obj is not None and unadmitted_and_placed(obj):
                self._placed[key] = (source, obj)
            else:
                self._placed.pop(key, None)

    def placed(self) -> list[tuple[Any, tuple[str, Mapping[str, Any]]]]:
        """The bindings placed without fleetgate's admission, by ref: (entry key, (source,
        binding))."""
        return sorted(self._placed.items(), key=lambda item: ref_of(item[1][1]))

    def snapshot(self, written: Placed | None = None) -> Snapshot:
        """The snapshot now; with ``written`` (entry key → (source, binding as this pass wrote
        it)), one that sees those bindings as written, while the kept one goes on holding what
        the caches hold until the watch brings the writes."""
        if not written:
            return self.live.snapshot()
        before = [(key, self.live.entry(key)) for key in written]
        for key, (source, obj) in written.items():
            self.live.put(key, source, obj)
        snapshot = self.live.snapshot()
        for key, was in before:
            if was is None:
                self.live.delete(key)
            else:
                self.live.put(key, *was)
        return snapshot

    def _entries(self) -> Entries:
        """Every cached object with its entry key: the informers' own, or (a stand-in that
        only lists its objects) source, apiVersion, kind, namespace, name and a count."""
        keyed = getattr(self.informers, "keyed_objects", None)
        if callable(keyed):
            return list(keyed())
        seen: dict[tuple[str, ...], int] = {}
        entries: Entries = []
        for source, obj in self.informers.snapshot_objects():
            meta = obj.get("metadata") if isinstance(obj, Mapping) else None
            meta = meta if isinstance(meta, Mapping) else {}
            ident = (
                source,
                str(obj.get("apiVersion")) if isinstance(obj, Mapping) else "",
                str(obj.get("kind")) if isinstance(obj, Mapping) else "",
                str(meta.get("namespace") or ""),
                str(meta.get("name") or ""),
            )
            seen[ident] = seen.get(ident, -1) + 1
            entries.append(((*ident, seen[ident]), source, obj))
        return entries
