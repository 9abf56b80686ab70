"""The latest pass as the read APIs serve it: its view (``reconciler.jobsview``), the fleet
(``reconciler.fleetview``) and the history the dashboard draws (``reconciler.history``).

On the leader, every pass is taken as it ends; on a follower, which runs none, a preview of
the cycle over its own warm caches (``reconciler.preview``), so any replica answers.
"""

from __future__ import annotations

import hashlib
import threading
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from engine.cycle import CycleResult, Reason
from engine.fleet.model import Snapshot
from engine.gcpause import collector_paused
from engine.policy.policyset import PolicySet
from engine.policy.reload import NoPolicySetError
from reconciler.fleetview import fleet_json, queue_histories, queue_history
from reconciler.history import FleetHistory
from reconciler.jobsview import PassView, build_view
from reconciler.preview import Preview, Taken

if TYPE_CHECKING:
    from reconciler.loop import PassSummary, Reconciler


ANSWERS = 256  # reads answered from memory per view


def reserved_by_queue(view: PassView) -> Counter[str]:
    """How many jobs hold room (``Reserved``) in each queue's subtree."""
    parents = {q.name: q.parent for q in view.result.queues}
    held: Counter[str] = Counter()
    for entry in view.jobs:
        if entry.reason == Reason.RESERVED:
            queue, seen = entry.queue, 0
            while queue and seen <= len(parents):  # up the tree (a cycle cannot loop it)
                held[queue] += 1
                queue, seen = parents.get(queue, ""), seen + 1
    return held


class ApiError(Exception):
    def __init__(self, code: int, reason: str, message: str, **details: Any) -> None:
        super().__init__(message)
        self.code, self.reason, self.message, self.details = code, reason, message, details


class LatestPass:
    """The latest pass's result, snapshot and policies, taken together by an observer, and the
    view of it (built once, on the first request that needs it)."""

    def __init__(self, reconciler: Reconciler, history: FleetHistory | None = None) -> None:
        self._lock = threading.Lock()
        self._pass: tuple[CycleResult, Snapshot | None, PolicySet] | None = None
        self._view: PassView | None = None
        self._preview: tuple[Taken, PassView] | None = None
        self.reconciler = reconciler
        self.history = history or FleetHistory()
        self._answers: dict[str, tuple[bytes, str]] = {}  # of this view: path → (body, ETag)
        self.preview = Preview(reconciler)  # what a follower serves (reconciler.preview)
        if reconciler.last_result is not None:
            self._take(reconciler.last_result)
        reconciler.observers.append(self.observe)

    def observe(self, result: CycleResult, _summary: PassSummary) -> None:
        self._take(result)

    def _take(self, result: CycleResult) -> None:
        snapshot = self.reconciler.last_snapshot
        taken = (result, snapshot, self.reconciler.policies.current)
        with self._lock:
            self._pass, self._view = taken, None
            self._answers = {}
        self._record(taken)

    def _record(self, taken: Taken) -> None:
        result, snapshot, _ = taken
        self.history.observe(result.now, result.queues, snapshot.clusters if snapshot else ())

    @property
    def ran(self) -> bool:
        return self._pass is not None

    @property
    def policy_version(self) -> str:
        taken = self._pass
        return taken[0].policy_version if taken is not None else ""

    def view(self) -> PassView:
        return self._current()[0]

    def fleet(self) -> dict[str, Any]:
        """The Fleet object (``reconciler.fleetview``) of the latest pass."""
        view, snapshot = self._current()
        status = getattr(self.reconciler.policies, "status", None)  # a PolicyHolder's
        clusters = snapshot.clusters if snapshot is not None else ()
        with collector_paused():
            return fleet_json(view, clusters, status, self.history)

    def queue_items(self, view: PassView, names: Sequence[str]) -> list[dict[str, Any]]:
        """The items of ``names``, their reservations and histories read in one go."""
        with collector_paused():
            held = reserved_by_queue(view)
            series = queue_histories(self.history.samples(), names)
            return [self.queue_item(view, name, held, series) for name in names]

    def queue_item(
        self,
        view: PassView,
        name: str,
        held: Mapping[str, int],
        series: Mapping[str, dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """A queue's numbers as the visibility API lists them, with its jobs holding room
        (``held``: :func:`reserved_by_queue`) and the history of its share (aggregates only:
        never a job)."""
        samples = self.history.samples() if series is None else []
        report = view.queue(name)
        if report is None:
            raise ApiError(404, "NotFound", f'queue "{name}" not found')
        return {
            "metadata": {"name": name},
            **view.queue_json(report),
            "reservations": held.get(name, 0),
            "history": series[name] if series is not None else queue_history(samples, name),
        }

    def answered(self, key: str) -> tuple[bytes, str] | None:
        """What the read ``key`` (a path and its query) was answered with since the view last
        changed, and its ETag."""
        with self._lock:
            return self._answers.get(key)

    def remember(self, key: str, body: bytes) -> str:
        """Keep ``body`` as the answer to ``key`` until the view changes; its ETag. At most
        ``ANSWERS`` are kept (then they are all forgotten: a crawler cannot grow it)."""
        etag = hashlib.sha256(body).hexdigest()[:20]
        with self._lock:
            if len(self._answers) >= ANSWERS:
                self._answers = {}
            self._answers[key] = (body, etag)
        return etag

    def _current(self) -> tuple[PassView, Snapshot | None]:
        gate = getattr(self.reconciler, "gate", None)
        if gate is not None and not gate():  # a follower answers from its own caches
            return self._follower_view()
        with self._lock:
            if self._pass is None:
                raise ApiError(
                    503,
                    "ServiceUnavailable",
                    "no reconciler pass has run yet on this replica (a follower runs none: "
                    "the leader's API answers)",
                )
            if self._view is None:
                with collector_paused():  # as a cycle: its many objects, scanned for nothing
                    self._view = build_view(self._pass[0], self._pass[2])
            return self._view, self._pass[1]

    def _follower_view(self) -> tuple[PassView, Snapshot | None]:
        if not self.reconciler.wait_synced(0):
            raise ApiError(
                503, "ServiceUnavailable", "this replica's caches have not listed everything yet"
            )
        try:
            taken = self.preview.take()
        except NoPolicySetError as error:
            raise ApiError(503, "ServiceUnavailable", str(error)) from error
        with self._lock:
            fresh = self._preview is None or self._preview[0] is not taken
            if fresh:
                with collector_paused():
                    self._preview = (taken, build_view(taken[0], taken[2]))
                self._answers = {}
            assert self._preview is not None
            found = self._preview[1], taken[1]
        if fresh:
            self._record(taken)
        return found
