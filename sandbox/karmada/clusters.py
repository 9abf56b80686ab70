"""Karmada's cluster status controller, and its cluster monitor, over the member models.

Creates each member's Cluster object when missing (never overwritten afterwards: taints and
labels added through the API stay), and every ``status_period`` replaces its ``status`` with what
the member reports now (``engine.members.status``: resourceSummary with allocatableModelings,
nodeSummary, apiEnablements, a Ready condition whose lastTransitionTime moves only on a change).
Between refreshes the status is stale, as in a real fleet (``--cluster-status-update-frequency``,
10 s by default).

Faults (:class:`FaultState`, e.g. :class:`sandbox.faults.Faults`):

* ``NotReady``: the member answers but is not ready; the next refresh reports ``Ready=False``
  (``ClusterNotReachable``) and keeps the rest of the status as last collected;
* ``Unreachable``: no refresh at all, so the status goes stale; once nothing was posted for
  ``grace`` (``--cluster-monitor-grace-period``, 40 s), the cluster monitor turns ``Ready``
  ``Unknown`` (``ClusterStatusUnknown``: "Cluster status controller stopped posting cluster
  status.", as ``monitorClusterHealth`` does); the rest stays as it was.

Either way the scheduler stops placing there (it reads ``Ready``), and the execution side stops
applying Works (:mod:`sandbox.karmada.execution`). ``cluster_up``: the next due refresh reports
the member as it is, ``Ready=True`` again.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Protocol

from sandbox.errors import StatusError
from sandbox.faults import NOT_READY, UNREACHABLE
from sandbox.karmada.common import condition, get_or_none, on_conflict_retry
from sandbox.karmada.members import Member
from sandbox.store import Store

CLUSTERS = "clusters.cluster.karmada.io"
MONITOR_GRACE = timedelta(seconds=40)  # Karmada's --cluster-monitor-grace-period
STOPPED_POSTING = "Cluster status controller stopped posting cluster status."
NEVER_POSTED = "Cluster status controller never posted cluster status."


class FaultState(Protocol):
    """What the controllers read of the injected faults (:class:`sandbox.faults.Faults`)."""

    def cluster_state(self, name: str) -> str | None: ...

    def job_failure(self, namespace: str, name: str) -> str | None: ...

    def failing_jobs(self) -> dict[tuple[str, str], str]: ...


class NoFaults:
    def cluster_state(self, name: str) -> str | None:
        return None

    def job_failure(self, namespace: str, name: str) -> str | None:
        return None

    def failing_jobs(self) -> dict[tuple[str, str], str]:
        return {}


class ClusterStatusController:
    def __init__(
        self,
        store: Store,
        members: Sequence[Member],
        period: timedelta,
        faults: FaultState | None = None,
        grace: timedelta = MONITOR_GRACE,
    ) -> None:
        self.store = store
        self.members = list(members)
        self.period = period
        self.faults = faults or NoFaults()
        self.grace = grace
        self.refreshed: dict[str, datetime] = {}  # when each member's status was last written
        self.first_seen: dict[str, datetime] = {}

    def run(self, now: datetime) -> None:
        for member in self.members:
            self._ensure(member)
            self.first_seen.setdefault(member.name, now)
            state = self.faults.cluster_state(member.name)
            if state == UNREACHABLE:
                on_conflict_retry(lambda m=member: self._monitor(m, now))
                continue
            member.set_ready(state != NOT_READY, now)
            last = self.refreshed.get(member.name)
            due = last is None or now - last >= self.period
            if due and on_conflict_retry(lambda m=member: self._refresh(m, now)):
                self.refreshed[member.name] = now

    def refresh_now(self) -> None:
        """Make every Cluster's status due on the next pass (e.g. after a fault changed it)."""
        self.refreshed.clear()

    def _ensure(self, member: Member) -> None:
        if get_or_none(self.store, CLUSTERS, member.name) is not None:
            return
        try:
            self.store.create(CLUSTERS, member.cluster())
        except StatusError as error:
            if error.code != 409:
                raise

    def _refresh(self, member: Member, now: datetime) -> bool:
        cluster = get_or_none(self.store, CLUSTERS, member.name)
        if cluster is None:
            return True  # deleted through the API: created again on the next pass
        status = member.cluster_status(now, cluster.get("status"))
        if cluster.get("status") != status:
            cluster["status"] = status
            self.store.update_status(CLUSTERS, cluster)
        return True

    def _monitor(self, member: Member, now: datetime) -> None:
        """The cluster monitor: Ready Unknown once no status was posted for ``grace``."""
        posted = self.refreshed.get(member.name)
        if now - (posted or self.first_seen[member.name]) < self.grace:
            return
        cluster = get_or_none(self.store, CLUSTERS, member.name)
        if cluster is None:
            return
        status = dict(cluster.get("status") or {})
        ready = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
        if ready is not None and ready.get("status") == "Unknown":
            return
        reason = "ClusterStatusUnknown" if posted else "ClusterStatusNeverUpdated"
        message = STOPPED_POSTING if posted else NEVER_POSTED
        status["conditions"] = condition(
            status.get("conditions"), "Ready", "Unknown", reason, message, now
        )
        cluster["status"] = status
        self.store.update_status(CLUSTERS, cluster)
