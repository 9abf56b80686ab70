"""What the dashboard draws over time, kept by ``fleetgate serve`` in bounded memory.

- Each queue's weighted share and GPU usage: samples at least ``every`` of pass time (the
  cycle's ``now``) apart, the newest ``keep`` of them (6 hours at one a minute by default),
  and the latest pass's as the newest sample, so the chart always ends at the current value.
- Each cluster's NotReady spells: from when Karmada said it went NotReady (its Ready
  condition's ``lastTransitionTime``, else the first pass that saw it) to when it came back,
  the newest ``spells`` of them per cluster; a cluster gone from the fleet is forgotten.

Nothing here is persisted: a new leader starts a new history (the dashboard says from when).
"""

from __future__ import annotations

import datetime as dt
import threading
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

from engine.cycle import QueueReport
from engine.fleet.model import ClusterView

GPU = "nvidia.com/gpu"


@dataclass(frozen=True, slots=True)
class QueueSample:
    share: float
    gpus: float  # the subtree's usage, in GPUs


@dataclass(frozen=True, slots=True)
class Sample:
    at: dt.datetime
    queues: dict[str, QueueSample]


@dataclass(frozen=True, slots=True)
class Spell:
    """A time a cluster was not Ready; ``until`` None while it still is not."""

    since: dt.datetime
    until: dt.datetime | None = None


class FleetHistory:
    def __init__(
        self, every: dt.timedelta = dt.timedelta(minutes=1), keep: int = 360, spells: int = 20
    ) -> None:
        if keep < 1 or spells < 1 or every <= dt.timedelta(0):
            raise ValueError("a history keeps at least one sample and one spell, every > 0")
        self.every = every
        self._lock = threading.Lock()
        self._samples: deque[Sample] = deque(maxlen=keep - 1)  # and the current one
        self._current: Sample | None = None
        self._spells: dict[str, deque[Spell]] = {}
        self._keep_spells = spells
        self.started: dt.datetime | None = None  # the first pass seen

    def observe(
        self, now: dt.datetime, queues: Iterable[QueueReport], clusters: Iterable[ClusterView]
    ) -> None:
        """Record one pass: its time, its queues' reports and the clusters it read."""
        sample = Sample(
            now,
            {q.name: QueueSample(round(q.share, 6), q.usage.get(GPU, 0) / 1000) for q in queues},
        )
        with self._lock:
            if self.started is None:
                self.started = now
            current = self._current
            if current is not None and now < current.at:
                return  # an older pass, observed late: the history moves forward only
            if current is not None and (
                not self._samples or current.at - self._samples[-1].at >= self.every
            ):
                self._samples.append(current)  # kept: `every` after the one kept before it
            self._current = sample
            self._clusters(now, list(clusters))

    def _clusters(self, now: dt.datetime, clusters: list[ClusterView]) -> None:
        seen = {c.name for c in clusters}
        for gone in [name for name in self._spells if name not in seen]:
            del self._spells[gone]
        for cluster in clusters:
            spells = self._spells.setdefault(cluster.name, deque(maxlen=self._keep_spells))
            open_spell = spells[-1] if spells and spells[-1].until is None else None
            changed = cluster.ready_changed_at or now
            if not cluster.ready and open_spell is None:
                spells.append(Spell(min(changed, now)))
            elif cluster.ready and open_spell is not None:
                spells[-1] = Spell(open_spell.since, max(min(changed, now), open_spell.since))

    def samples(self) -> list[Sample]:
        """The kept samples, oldest first, then the latest pass's."""
        with self._lock:
            return [*self._samples, *([self._current] if self._current else [])]

    def spells(self, cluster: str) -> list[Spell]:
        with self._lock:
            return list(self._spells.get(cluster, ()))
