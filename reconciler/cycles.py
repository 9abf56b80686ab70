"""The cycle a reconciler pass runs: in full, or a rerun of the last one.

A pass that events alone asked for (no resync, no deadline, nothing dirty or adopted) may
decide as of the last cycle's time, as when it runs no cycle at all because nothing it reads
changed (``KeptSnapshot.nothing_new``): what time alone changes is what the resync and
deadline passes are for. Then ``engine.cycle.reuse`` decides only the waiting jobs that
changed, and keeps the last cycle's other decisions, when that gives what the full cycle
would; otherwise, and for every other pass, the full cycle runs at the pass's time.
"""

from __future__ import annotations

import dataclasses
import datetime as dt

from engine.cycle import CycleResult, JobCache, Ran, rerun, run_kept
from engine.fleet.model import Snapshot
from engine.policy.policyset import PolicySet


class Cycles:
    """One per reconciler; used by one pass at a time."""

    def __init__(self, cache: JobCache) -> None:
        self.cache = cache
        self.last: Ran | None = None
        self.reruns = 0  # passes that decided only what changed

    def decide(
        self, snapshot: Snapshot, policies: PolicySet, now: dt.datetime, *, quiet: bool
    ) -> CycleResult:
        """The decisions on ``snapshot``; ``quiet``: the pass may decide as of the last
        cycle's time (the result still says ``now``: the pass that decided)."""
        ran = None
        if quiet and self.last is not None:
            ran = rerun(self.last, snapshot, policies, self.cache)
        if ran is None:
            self.last = run_kept(snapshot, policies, now, self.cache)
            return self.last.result
        self.reruns += 1
        self.last = ran  # a later rerun is at its time again
        # the pass's time, as the readers of a result take it (the time of the latest pass)
        return dataclasses.replace(ran.result, now=now)
