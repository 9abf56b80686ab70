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
