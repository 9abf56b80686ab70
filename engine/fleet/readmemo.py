"""What ``build_snapshot`` read from each object, kept for the next build of the same objects.

A controller builds a snapshot from its informers' caches every pass, and almost every object
in them is the one it built from last time: parsing 20,000 objects again each pass is most of
the snapshot's cost. ``ReadMemo`` keeps each reader's result (the frozen view, or the
``DemandError`` it raised) per object, and gives it back while the object is the very same
one (identity: the caches share their objects and replace, never mutate, them) with the same
``resourceVersion``. Any other object is read again. Entries not used by a build are dropped
at its end (``end_build``), so objects deleted from the caches leave the memo too.

Pure: no I/O, no clock. A snapshot built with a memo equals one built without.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from engine.workloads.model import DemandError

Reader = Callable[[Mapping[str, Any]], Any]


@dataclass(frozen=True, slots=True)
class _Read:
    obj: Mapping[str, Any]  # held, so its id is not reused while the entry lives
    version: str
    reader: Reader
    value: Any
    error: tuple[str, str] | None  # (path, message) of the DemandError the reader raised


class ReadMemo:
    """Reader results by object, valid while the object (and its resourceVersion) is the same.

    Not thread-safe: one build at a time (the reconciler builds under its pass lock).
    """

    def __init__(self) -> None:
        self._reads: dict[int, _Read] = {}
        self._used: dict[int, _Read] = {}
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._reads)

    def read(self, reader: Reader, obj: Mapping[str, Any]) -> Any:
        """``reader(obj)``, or what it gave for this very object before; a DemandError it
        raised is raised again (a new one with the same path and message)."""
        key = id(obj)
        version = _version(obj)
        kept = self._reads.get(key)
        if kept is None or kept.obj is not obj or kept.version != version or kept.reader != reader:
            self.misses += 1
            try:
                kept = _Read(obj, version, reader, reader(obj), None)
            except DemandError as err:
                kept = _Read(obj, version, reader, None, (err.path, err.message))
        else:
            self.hits += 1
        self._used[key] = kept
        if kept.error is not None:
            raise DemandError(*kept.error)
        return kept.value

    def end_build(self) -> None:
        """Keep only what the build that just ended read."""
        self._reads = self._used
        self._used = {}


def _version(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    return str(meta.get("resourceVersion") or "") if isinstance(meta, Mapping) else ""
