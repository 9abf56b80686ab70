"""The member-cluster failure the demo injects, and what became of the jobs it hit.

From ``at`` simulated seconds on, as soon as a GPU cluster runs a job, the GPU cluster running
the most jobs (ties: by name) becomes unreachable (:meth:`sandbox.faults.Faults.cluster_down`
with ``unreachable``: its agent stops reporting, Karmada's cluster monitor turns ``Ready``
``Unknown`` after its grace period, and no status comes back from its jobs). It recovers
``down_for`` simulated seconds later. A job counts as running there when the demo saw it
running and the member runs it still (``KarmadaControllers.running_at``): statuses reach the
API a status period late, so a job seen running may have ended already. The jobs
running there at the failure are the affected ones; each ends up:

- ``rescheduled``: admitted again after the failure (somewhere else, or back on the cluster
  after it recovered);
- ``requeued``: taken off the cluster and waiting in its queue, its reason on its binding;
- ``stranded``: still placed on the failed cluster;
- ``finished``: ended where it was, never moved.

A job the demo saw running whose member reports it ended before the failure (its end reached the
API only afterwards) was not hit: it is listed apart.
"""

from __future__ import annotations

import datetime as dt
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sandbox.demo.observe import FINISHED, Tracker
from sandbox.faults import Faults

GPU = "nvidia.com/gpu"
Runs = Callable[[str], set[tuple[str, str]]]  # a cluster → the templates its member runs now


def rescheduling_available() -> bool:
    """Whether this reconciler requeues the jobs of a failed cluster (by the rules of
    engine/enforce/lifecycle.py)."""
    return importlib.util.find_spec("engine.enforce.lifecycle") is not None


@dataclass(slots=True)
class Failure:
    at: float  # simulated seconds after the start
    down_for: float
    cluster: str = ""
    down_at: dt.datetime | None = None
    up_at: dt.datetime | None = None
    affected: dict[str, tuple[str, ...]] = field(default_factory=dict)  # binding → clusters
    _seen: dict[str, int] = field(default_factory=dict)  # binding → placements before
    _up: float = 0.0  # simulated seconds after the start when it recovers

    def due(self, elapsed: float) -> bool:
        return self.down_at is None and elapsed >= self.at

    def recovery_due(self, elapsed: float) -> bool:
        return self.up_at is None and self.down_at is not None and elapsed >= self._up

    def target(self, tracker: Tracker, runs: Runs) -> str | None:
        """The GPU cluster running the most jobs now (ties: by name); None when none runs any.
        ``runs(cluster)``: the templates (namespace, name) its member runs now."""
        running: dict[str, int] = {}
        members: dict[str, set[tuple[str, str]]] = {}
        for job in tracker.jobs:
            state = tracker.state(job)
            if state.state != "running":
                continue
            for cluster in state.clusters:
                sample = tracker.clusters.get(cluster)
                if sample is None or sample["resource"] != GPU:
                    continue
                if cluster not in members:
                    members[cluster] = runs(cluster)
                if (job.tenant, job.name) in members[cluster]:
                    running[cluster] = running.get(cluster, 0) + 1
        if not running:
            return None
        return min(running, key=lambda name: (-running[name], name))

    def inject(
        self,
        faults: Faults,
        tracker: Tracker,
        cluster: str,
        now: dt.datetime,
        elapsed: float,
        runs: Runs,
    ) -> None:
        """Take ``cluster`` down now; the jobs running there are the affected ones."""
        self.cluster = cluster
        member = runs(cluster)
        for job in tracker.jobs:
            state = tracker.state(job)
            if (
                state.state == "running"
                and cluster in state.clusters
                and (job.tenant, job.name) in member
            ):
                self.affected[job.binding] = state.clusters
                self._seen[job.binding] = len(tracker.placements.get(job.binding, []))
        faults.cluster_down(cluster, unreachable=True)
        self.down_at = now
        self._up = elapsed + self.down_for

    def recover(self, faults: Faults, now: dt.datetime) -> None:
        faults.cluster_up(self.cluster)
        self.up_at = now

    def outcome(self, tracker: Tracker, binding: str) -> dict[str, Any]:
        """What became of one affected job (see the module docstring)."""
        job = tracker.by_binding[binding]
        state = tracker.state(job)
        history = tracker.placements.get(binding, [])[self._seen.get(binding, 0) :]
        later = [placed for placed in history if placed[1]]
        found: dict[str, Any] = {
            "binding": binding,
            "queue": job.queue,
            "was": list(self.affected[binding]),
            "attempts": state.attempts,
            "preempted": binding in tracker.preempted,
            "state": state.state,
        }
        if later:
            found["outcome"] = "rescheduled"
            found["to"] = later[-1][1].split(",")
        elif state.state == "pending":
            found["outcome"] = "requeued"
        elif state.state == "running" and self.cluster in state.clusters:
            found["outcome"] = "stranded"
        elif state.state in FINISHED:
            found["outcome"] = "finished"
            if state.finished_at is not None and self.down_at is not None:
                found["finishedBeforeFailure"] = state.finished_at <= self.down_at
        else:
            found["outcome"] = state.state
        if state.reason:
            found["reason"] = state.reason
            found["message"] = state.message
        return found

    def outcomes(self, tracker: Tracker) -> tuple[list[dict[str, Any]], list[str]]:
        """(what became of each affected job, the jobs that turned out to have ended before the
        failure: the demo saw them running, their end reached it only afterwards)."""
        found = [self.outcome(tracker, binding) for binding in sorted(self.affected)]
        before = [o["binding"] for o in found if o.get("finishedBeforeFailure")]
        return [o for o in found if not o.get("finishedBeforeFailure")], before
