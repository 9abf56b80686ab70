"""Pausing Python's cyclic garbage collector while a scheduling cycle runs.

A cycle allocates hundreds of thousands of objects and keeps most of them until it ends
(decisions, per-cluster states, its caches), so collections triggered by allocation counts scan
them again and again: about a quarter of a warm 50,000-job cycle. Reference counting frees
them either way; the few reference cycles a cycle makes (the quota tree's parent links) are
collected once the pause ends. ``fleetgate bench`` and ``fleetgate dry-run`` run each cycle
inside ``collector_paused``; so should any loop that runs cycles.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """Disable automatic collection for the block; restore it (if it was on) after."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class FreezeOnce:
    """An observer of reconciler passes (``Reconciler.observers``) that, after the first
    pass, collects once and then moves every object alive out of the collector's view
    (``gc.freeze``), as the webhook does after loading: the warm caches (informers, snapshot,
    JobCache; tens of thousands of objects) are not scanned again by every full collection,
    which otherwise lands as a ~0.5 s stall in one pass of about ten at 20,000 objects.
    Frozen objects that are dropped later are still freed by reference counting; only
    reference cycles among them stay. For a process that runs one reconciler: a test
    process's unrelated objects would be frozen too."""

    def __init__(self) -> None:
        self.done = False

    def __call__(self, *_: object) -> None:
        if not self.done:
            self.done = True
            gc.collect()
            gc.freeze()
