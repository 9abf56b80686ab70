"""What a follower's read API serves: the cycle over its own warm caches, with no writes.

A follower runs no pass, so it has no result of its own; before, its API answered 503 and a
Service over every replica failed one request in N. Now a follower answers from a preview: the
same snapshot-and-cycle the leader's pass makes, over the follower's informers (kept warm for
takeover), computed on a request at most once every ``ttl`` seconds and never written anywhere.
It can lag the leader's by the watch's delay, and it does not ask the members' estimators (the
resource models stand in), so a rare job may read differently for a moment; the leader's own
answer is the one its writes follow.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from engine.cycle import CycleResult, JobCache, run_cycle
from engine.fleet.model import Snapshot
from engine.fleet.readmemo import ReadMemo
from engine.fleet.snapshot import build_snapshot
from engine.policy.policyset import PolicySet

if TYPE_CHECKING:
    from reconciler.loop import Reconciler

DEFAULT_TTL = 2.0  # seconds a preview is served before the next request computes a new one

Taken = tuple[CycleResult, Snapshot | None, PolicySet]


class Preview:
    def __init__(
        self,
        reconciler: Reconciler,
        ttl: float = DEFAULT_TTL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.reconciler = reconciler
        self.ttl = ttl
        self.clock = clock
        self._lock = threading.Lock()
        self._cache = JobCache()  # its own: the pass thread's belongs to that thread
        self._reads = ReadMemo()
        self._taken: Taken | None = None
        self._at = float("-inf")
        self.computed = 0  # previews computed (tests, and the cost's measure)

    def take(self) -> Taken:
        """The latest preview, computed now if the last is older than ``ttl``; raises what
        ``policies.current`` raises when no policy set is live."""
        with self._lock:
            if self._taken is not None and self.clock() - self._at < self.ttl:
                return self._taken
            rec = self.reconciler
            policies = rec.policies.current
            snapshot = build_snapshot(rec.informers.snapshot_objects(), self._reads)
            result = run_cycle(snapshot, policies, rec.clock(), self._cache)
            self._taken, self._at = (result, snapshot, policies), self.clock()
            self.computed += 1
            return self._taken
