"""Karmada's part of the sandbox: its controllers over the store, and the member clusters.

:class:`KarmadaControllers` runs, in order, one level-triggered pass of each controller: every
pass reads the store, compares desired with observed state and writes only the difference (with
the resourceVersion it read; a 409 means read again and decide again), so a pass run twice, or
after a failure at any line, ends in the same state.

1. cluster status: Cluster objects from the fleet; status refreshed every ``status_period``;
2. detector: templates claimed by policies → ResourceBindings (through admission);
3. scheduler: bindings neither suspended nor placed → ``spec.clusters``;
4. binding controller: ``spec.clusters`` → Works in ``karmada-es-<cluster>``;
5. execution: Works → jobs on the members; members stepped to ``now``;
6. status: Work status → binding ``aggregatedStatus`` → template ``status``.

Passes are incremental: the store's events feed per-object work queues
(:mod:`sandbox.karmada.queue`: a key queued at most once, retried with backoff after an error),
and a pass reconciles only the queued keys; a full resync queues every key at start and every
``resync`` seconds. Passes read the store directly: it is in memory and in process, so it is the
cache an informer would keep.

``run_once(now)`` is one deterministic pass for tests (a full resync unless ``full=False``).
``start()`` runs passes on a thread: after any event that queued a key, and every ``tick``
seconds of real time so members advance. Faults (``faults=``, :class:`sandbox.faults.Faults`)
are read on each pass; a change to them wakes the loop.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from engine.members import Fleet, MemberCluster
from engine.members.spec import DEFAULT_JOB_DURATION, DEFAULT_STATUS_PERIOD
from sandbox.karmada.clusters import MONITOR_GRACE, ClusterStatusController, FaultState
from sandbox.karmada.common import get_or_none, log
from sandbox.karmada.detector import Detector
from sandbox.karmada.execution import Execution
from sandbox.karmada.members import EngineMember
from sandbox.karmada.queue import EventRouter, ObjectKey
from sandbox.karmada.scheduler import Scheduler
from sandbox.karmada.status import StatusController
from sandbox.karmada.works import WORKS, BindingController, binding_id
from sandbox.store import Store


@dataclass(frozen=True, slots=True)
class Timings:
    """Clock time, except ``tick`` (real seconds between passes of the started loop).

    ``None`` takes the fleet file's ``defaults`` (``statusPeriod``, ``jobDuration``)."""

    status_period: timedelta | None = None  # Karmada's --cluster-status-update-frequency, 10 s
    cluster_monitor_grace: timedelta = MONITOR_GRACE  # --cluster-monitor-grace-period, 40 s
    job_duration: timedelta | None = None  # unless the template's annotation says otherwise
    tick: float = 0.2
    resync: float = 30.0  # real seconds between full resyncs of the started loop


DEFAULT_PERIOD = DEFAULT_STATUS_PERIOD
DEFAULT_DURATION = DEFAULT_JOB_DURATION


def utc_now() -> datetime:
    return datetime.now(UTC)


class KarmadaControllers:
    def __init__(
        self,
        store: Store,
        fleet: Fleet | Sequence[MemberCluster],
        clock: Callable[[], datetime] = utc_now,
        timings: Timings | None = None,
        *,
        skipped_namespaces: Sequence[str] = ("kube-.*",),
        new_id: Callable[[], str] | None = None,
        faults: FaultState | None = None,
        template_syncs: int = 1,
    ) -> None:
        self.store = store
        self.fleet = {m.name: m for m in fleet}
        self.clock = clock
        self.timings = timings or Timings()
        spec = fleet.spec if isinstance(fleet, Fleet) else None
        period = self.timings.status_period or (spec.status_period if spec else DEFAULT_PERIOD)
        duration = self.timings.job_duration or (spec.job_duration if spec else DEFAULT_DURATION)
        members = [EngineMember(m) for m in fleet]
        grace = self.timings.cluster_monitor_grace
        self.clusters = ClusterStatusController(store, members, period, faults, grace)
        self.detector = Detector(
            store, skipped_namespaces, new_id or (lambda: str(uuid.uuid4())), template_syncs
        )
        self._wake = threading.Event()
        self.router = EventRouter(store, [rt.key for rt in self.detector.types], self._wake.set)
        self.scheduler = Scheduler(store)
        self.bindings = BindingController(store, self._works_of)
        self.execution = Execution(store, members, duration, faults)
        self.status = StatusController(store, self.execution, self._works_of)
        self._pass = threading.Lock()
        self._resynced_at = float("-inf")
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self.passes = 0
        subscribe = getattr(faults, "subscribe", None)
        if subscribe is not None:  # a fault changed: look again now rather than on the tick
            subscribe(lambda _kind, _detail: self._wake.set())

    @property
    def pass_lock(self) -> threading.Lock:
        """Held for the whole of each pass: the members change only inside one."""
        return self._pass

    def member(self, name: str) -> MemberCluster:
        """The member model (for faults: ``fail``, ``set_ready``)."""
        return self.fleet[name]

    def running_at(self, cluster: str, now: datetime) -> set[tuple[str, str]]:
        """The templates (namespace, name) of the jobs ``cluster``'s member runs at ``now``, as
        the member knows it: the API's statuses come a status period later (for the demo's
        failure, which must hit jobs that are running)."""
        with self._pass:
            member = self.fleet[cluster]
            templates = self.execution.templates
            return {templates[key] for key in member.running_at(now) if key in templates}

    def run_once(self, now: datetime | None = None, *, full: bool = True) -> None:
        """One pass of every controller at ``now`` (default: the clock); ``full``: a resync
        first (every key queued), else only what events queued."""
        with self._pass:
            moment = now if now is not None else self.clock()
            if full:
                self.router.resync()
                self._resynced_at = time.monotonic()
            router = self.router
            self.clusters.run(moment)  # 1
            templates = router.templates.drain()
            if router.policies_changed.is_set():
                router.policies_changed.clear()
                templates = list(dict.fromkeys([*templates, *self._template_keys()]))
            self.detector.run_keys(templates)  # 2
            bindings = router.bindings.drain()
            if router.clusters_changed.is_set():
                router.clusters_changed.clear()
                bindings = list(dict.fromkeys([*bindings, *sorted(self.scheduler.waiting)]))
            self.scheduler.run_keys(bindings, moment)  # 3
            self.bindings.run_keys(bindings)  # 4
            changed = self.execution.run_keys(router.works.drain(), moment)  # 5
            self.status.run_keys(bindings, changed, moment)  # 6
            self.passes += 1

    def _template_keys(self) -> list[ObjectKey]:
        keys: list[ObjectKey] = []
        for rt in self.detector.types:
            self.store.scan(rt, lambda o, r=rt.key: keys.append(_key(r, o)))
        return sorted(keys)

    def _works_of(self, binding: Mapping[str, Any]) -> list[dict[str, Any]]:
        found = []
        for namespace, name in self.router.works_of(binding_id(binding)):
            work = get_or_none(self.store, WORKS, name, namespace)
            if work is not None:
                found.append(work)
        return found

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stopping.clear()
        self._thread = threading.Thread(target=self._loop, name="karmada-controllers", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the loop and its watches; idempotent."""
        self._stopping.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def __enter__(self) -> KarmadaControllers:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _loop(self) -> None:
        while not self._stopping.is_set():
            self._wake.wait(self.timings.tick)
            self._wake.clear()
            if self._stopping.is_set():
                return
            try:
                due = time.monotonic() - self._resynced_at >= self.timings.resync
                self.run_once(full=due)
            except Exception:  # noqa: BLE001 - one bad pass must not end the loop: the
                # next pass starts again from what the API holds (level-triggered)
                log.exception("karmada controllers: pass failed; a full resync on the next tick")
                self._resynced_at = float("-inf")  # keys drained by the failed pass come back


def _key(resource: str, obj: Mapping[str, Any]) -> ObjectKey:
    m = obj.get("metadata") or {}
    return resource, str(m.get("namespace") or ""), str(m.get("name", ""))
