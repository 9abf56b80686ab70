"""The reconciler loop: informers' caches → one scheduling cycle → the Applier, level-triggered.

``Reconciler(api_client, policies, settings)`` owns the informers, the cycles (a JobCache kept
between them: :mod:`reconciler.cycles`) and an :class:`Applier`. ``run_once(now)`` is one pass
(its docstring has the steps): the snapshot from the caches, the cycle (the garbage collector
paused), then what ``engine.enforce.plan_pass`` says to write (the lifecycle's transitions,
group rollbacks and plans, the decisions), each on the binding object it was planned on (from
the binding caches, so its resourceVersion is the precondition). Only managed bindings
(``fleetgate.io/managed``) are written. A CONFLICT or GONE marks the binding dirty: it is
decided again by a later pass, once the watch brought its new version (or, when the cache still
holds the version the 409 answered, once a fresh read shows it unchanged). Writes never go into
the caches: the watch brings them back. A pass run twice writes nothing again (UNCHANGED).

Writes go out on a pool of threads (:mod:`reconciler.writers`), a binding per thread; the
snapshot is kept from the informers' changes (:mod:`reconciler.kept`), not rebuilt; a Pending
decision its binding already carries is not planned again (:mod:`reconciler.settled`).
Adoption (:mod:`reconciler.adopt`) and the estimators (:mod:`reconciler.estimator`) feed the
snapshot. ``start()`` runs passes on a thread: after informer events (debounced; no cycle when
they changed nothing a pass reads), every ``resync`` seconds, and soon while bindings are dirty.
Past 400 lines: a pass's steps share the reconciler's state; what stands alone is in those above.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any, Protocol

import kubernetes
from kubernetes.client.exceptions import ApiException

from engine import annotations as ann
from engine.cycle import CycleResult, Decision, JobCache, shapes_wanted
from engine.enforce import (
    PLAN_CLEARED,
    PLANNED,
    ROLLED_BACK,
    Confirm,
    GroupRollback,
    MemberPlan,
    PassPlan,
    Reclaim,
    Started,
    Unplan,
    plan_pass,
)
from engine.errors import FleetgateError
from engine.fleet.model import Snapshot
from engine.gcpause import collector_paused
from engine.policy.policyset import PolicySet
from engine.policy.reload import NoPolicySetError
from reconciler.adopt import ADOPTED, Adopter, Adoption, ref_of
from reconciler.apply import Applier, Outcome, utc_now
from reconciler.cycles import Cycles
from reconciler.estimator import Asked, EstimatorClient
from reconciler.informer import Key
from reconciler.informers import Informers
from reconciler.kept import KeptSnapshot, Placed
from reconciler.passes import Attempt, PassSummary, Write, what_of
from reconciler.resources import CLUSTER_RESOURCE_BINDINGS, RESOURCE_BINDINGS
from reconciler.settings import ReconcilerSettings
from reconciler.settled import Settled
from reconciler.writers import WritePool, pool_size, widen_pool

log = logging.getLogger("fleetgate.reconciler")

DIRTY_RETRY = 1.0  # seconds before a pass looks again at dirty bindings no event came for
ERROR_BACKOFF = (0.5, 30.0)  # seconds: first and largest wait after a failed pass
SYNC_POLL = 0.5  # seconds between looks at whether every informer has listed
NO_POLICIES_RETRY = 2.0  # seconds between looks for a policy set while none is live
DEFAULTS = ReconcilerSettings()


class PolicySource(Protocol):
    @property
    def current(self) -> PolicySet: ...


class Reconciler:
    def __init__(
        self,
        api_client: kubernetes.client.ApiClient,
        policies: PolicySource,
        settings: ReconcilerSettings = DEFAULTS,
        *,
        clock: Callable[[], dt.datetime] = utc_now,
        informers: Informers | None = None,
        gate: Callable[[], bool] | None = None,
        estimator: EstimatorClient | None = None,
    ) -> None:
        self.policies = policies
        # asked before each cycle how many pods of each pending shape the Ready members hold
        # (Snapshot.estimates; reconciler.estimator); None: the resource models only
        self.estimator = estimator
        # asked before each pass and each write: False (a follower, or a leader past its renew
        # deadline; reconciler.leader) runs no pass and sends nothing; the informers run on
        self.gate = gate
        self.clock = clock
        self.debounce = settings.debounce
        self.resync = settings.resync
        self.informers = informers if informers is not None else Informers(api_client)
        self.applier = Applier(api_client, settings.mode, clock, settings.request_timeout)
        self.applier.gate = gate
        # a pass's writes go out on up to ``write_workers`` threads, a binding per thread
        # (reconciler.writers)
        self.writers = WritePool(settings.write_workers)
        watches = len(getattr(self.informers, "informers", ()))
        widen_pool(api_client, pool_size(settings.write_workers, watches))
        # the snapshot, kept up to date with what the informers changed (reconciler.kept):
        # a pass applies the changes heard since the last one, not every cached object
        self.kept = KeptSnapshot(self.informers)
        self._forced = False  # wake() asked for a pass: run it even when nothing changed
        self.quiet_passes = 0  # passes events asked for that did not run: nothing changed
        self.settled = Settled(tracks=self.kept.keyed)  # decisions found written: not again
        self.cycles = Cycles(JobCache())  # in full, or a rerun of the last (reconciler.cycles)
        self.adopter = Adopter()  # placed bindings the webhook never saw (reconciler.adopt)
        self.dirty: dict[str, str] = {}  # binding ref → the resourceVersion a write met 409/404 on
        self.due: dt.datetime | None = None  # when time alone next changes a decision (lifecycle)
        self.passes = 0
        self.failed_passes = 0  # passes that raised (the loop retries them with backoff)
        self.last: PassSummary | None = None
        self.last_result: CycleResult | None = None  # the latest cycle's decisions and queues
        self.last_snapshot: Snapshot | None = None  # the snapshot that cycle read
        # called after each pass with its result and summary (metrics, the read-only API);
        # an observer's error is logged, never fails the pass
        self.observers: list[Callable[[CycleResult, PassSummary], None]] = []
        self._pass = threading.Lock()
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self.informers.add_listener(self._on_event)

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self, *, loop: bool = True) -> Reconciler:
        """Start the informers and (``loop``) the pass thread."""
        self.informers.start()
        if loop and self._thread is None:
            self._stopping.clear()
            self._thread = threading.Thread(target=self._loop, name="reconciler", daemon=True)
            self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the thread, then the informers; idempotent."""
        self._stopping.set()
        self._wake.set()
        deadline = time.monotonic() + timeout
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
        self.writers.close()
        self.informers.stop(max(0.0, deadline - time.monotonic()))

    def wait_synced(self, timeout: float) -> bool:
        return self.informers.wait_synced(timeout)

    def wake(self) -> None:
        """Run a pass soon (e.g. this replica just became the leader), even a quiet one."""
        self._forced = True
        self._wake.set()

    def idle(self, timeout: float) -> bool:
        """Wait up to ``timeout`` for a running pass to end; True when none runs now."""
        if not self._pass.acquire(timeout=timeout):
            return False
        self._pass.release()
        return True

    def _on_event(self, _resource: str, _key: Key, _obj: Mapping[str, Any] | None) -> None:
        self._wake.set()  # every watched kind feeds the snapshot: each event says "look again"

    def _loop(self) -> None:
        failures = 0
        unloaded = False  # the last pass found no policy set (said once until one loads)
        # no pass before every informer has listed (client-go's WaitForCacheSync): a snapshot
        # with the Clusters but not yet the placed bindings would see their room free
        while not self.informers.wait_synced(SYNC_POLL):
            if self._stopping.is_set():
                return
        next_resync = time.monotonic()
        while not self._stopping.is_set():
            wait = max(0.0, next_resync - time.monotonic())
            if self.dirty:
                wait = min(wait, DIRTY_RETRY)
            if self.due is not None:  # a backoff, exclusion, startup timeout or grace ends
                wait = min(wait, max(0.0, (self.due - self.clock()).total_seconds()))
            woken = self._wake.wait(wait)
            if woken and not self._stopping.is_set():
                self._stopping.wait(self.debounce)  # let a burst of events settle
            self._wake.clear()
            if self._stopping.is_set():
                return
            quiet, self._forced = woken and not self._forced, False  # only events woke it
            quiet = quiet and (self.due is None or self.clock() < self.due)
            if time.monotonic() >= next_resync:
                next_resync, quiet = time.monotonic() + self.resync, False
            if self.gate is not None and not self.gate():
                continue  # a follower: caches warm, no pass (wake() when it leads)
            try:
                self.run_once(quiet=quiet)
                failures = 0
                unloaded = False
            except NoPolicySetError:  # the files never loaded and no last good set: look again
                if not unloaded:
                    log.warning("reconciler: no valid policy set yet; no pass until one loads")
                unloaded = True
                next_resync = time.monotonic() + min(self.resync, NO_POLICIES_RETRY)
            except Exception:  # the next pass starts again from the API state (level-triggered)
                failures += 1
                self.failed_passes += 1
                delay = min(ERROR_BACKOFF[0] * 2 ** (failures - 1), ERROR_BACKOFF[1])
                log.exception("reconciler: pass failed; next one in %.1fs", delay)
                self._stopping.wait(delay)

    # -- one pass ----------------------------------------------------------------------------

    def run_once(
        self, now: dt.datetime | None = None, *, quiet: bool = False
    ) -> PassSummary | None:
        """One level-triggered pass at ``now`` (default: the clock); ``quiet`` (events alone
        asked for it): None after step 1 when nothing it reads changed (``kept.nothing_new``):

        1. snapshot — the informers' objects (placed bindings the webhook never saw adopted
           first: ``reconciler.adopt``), and the estimators' answers for the pending shapes;
        2. cycle — in full, or a rerun of the last when quiet (``reconciler.cycles``);
        3. plan — ``engine.enforce.plan_pass``: the lifecycle's transitions, group rollbacks,
           group plans and the decisions to enforce, all from the same snapshot;
        4. write — in that order (a reclaimed job leaves before its room is given away),
           decisions already written (``Settled``) skipped;
        5. observers — the metrics and the API read the result.
        """
        with self._pass:
            started = time.perf_counter()
            moment = now if now is not None else self.clock()
            policies = self.policies.current
            adopted, snapshot, asked = self._snapshot(policies, moment)  # 1.
            quiet = quiet and not (adopted or self.dirty)
            if quiet and self.kept.nothing_new(snapshot, policies):
                self.quiet_passes += 1
                return None
            with collector_paused():
                result = self.cycles.decide(snapshot, policies, moment, quiet=quiet)  # 2.
            todo = plan_pass(snapshot, policies, result, moment, self._cached)  # 3.
            self.due = todo.due
            self.last_result, self.last_snapshot = result, snapshot
            summary = PassSummary(result.policy_version, len(result.decisions))
            summary.estimator_requests = dict(asked.requests)
            for attempt in adopted:
                self._count(attempt, summary)
            self._send(todo, result.policy_version, summary)  # 4.
            summary.seconds = time.perf_counter() - started
            led = self.gate is None or self.gate()  # no write held back for want of the lease
            clean = led and not (summary.errors or summary.conflicts or summary.gone or adopted)
            self.kept.ran(snapshot, policies, clean and self.estimator is None)
            self.passes += 1
            self.last = summary
            self._notify(result, summary)  # 5.
            log.debug("reconciler pass: %s", summary)
            return summary

    def _snapshot(
        self, policies: PolicySet, now: dt.datetime
    ) -> tuple[list[Attempt], Snapshot, Asked]:
        """The pass's snapshot: the informers' changes applied, the adoptions written first
        (this pass sees each adopted binding as written), the estimators' answers in it."""
        self.kept.update()
        self.settled.changed(self.kept.touched)
        adopted, written = self._adopt(policies, now)
        snapshot = self.kept.snapshot(written)
        asked = Asked()
        if self.estimator is not None:
            shapes = shapes_wanted(snapshot, policies, now, self.cycles.cache)
            asked = self.estimator.ask(snapshot, shapes)
            snapshot = dataclasses.replace(snapshot, estimates=asked.estimates)
        return adopted, snapshot, asked

    def _send(self, todo: PassPlan, version: str, summary: PassSummary) -> None:
        """The pass's writes, in the order ``todo`` lists them."""
        self._transitions(todo.transitions, version, summary)
        self._write_all([self._roll_back(r, version) for r in todo.rollbacks], summary)
        summary.skipped += todo.held
        send, settled = list(todo.decisions), 0
        if self.gate is None or self.gate():
            send, settled = self.settled.split(send, version, self._settled, self.dirty)
        summary.unchanged += settled
        send, planned = self._plan_groups(send, todo.plans, summary)
        writes = [self._enforce(d, version, planned.get(d.binding)) for d in send]
        self.settled.record(send, self._write_all(writes, summary), version)

    def _adopt(self, policies: PolicySet, now: dt.datetime) -> tuple[list[Attempt], Placed]:
        """Adopt what the webhook never saw (reconciler.adopt): the attempts, and each adopted
        binding as written, by entry key (this pass's view; the watch updates the cache)."""
        placed = self.kept.placed()
        found = self.adopter.find((obj for _, (_, obj) in placed), policies, now)
        if not found:
            return [], {}
        where = {ref_of(obj): (key, source) for key, (source, obj) in placed}
        written: Placed = {}

        def write(adoption: Adoption, binding: Mapping[str, Any]) -> Outcome:
            outcome, obj = self.applier.adopt(adoption, binding)
            if outcome == Outcome.APPLIED and adoption.binding in where:
                key, source = where[adoption.binding]
                written[key] = (source, obj)
            return outcome

        attempts = self.writers.run(
            [partial(self._attempt, a.binding, ADOPTED, partial(write, a)) for a in found]
        )
        return attempts, written

    def _transitions(
        self,
        found: Sequence[Started | Reclaim | Confirm],
        version: str,
        summary: PassSummary,
    ) -> None:
        """Started, requeued and given-up jobs, and Scheduled confirmations."""
        writes: list[Write] = [
            (
                change.binding,
                what_of(change),
                lambda b, c=change: self.applier.transition(c, b, version),
            )
            for change in found
        ]
        for change, attempt in zip(found, self._write_all(writes, summary), strict=True):
            if attempt.outcome == Outcome.APPLIED and isinstance(change, Reclaim):
                if change.gave_up:
                    summary.gave_up += 1
                else:
                    summary.requeued += 1

    def _roll_back(self, change: GroupRollback | Unplan, policy_version: str) -> Write:
        write = partial(self.applier.rollback, change, policy_version=policy_version)
        what = PLAN_CLEARED if isinstance(change, Unplan) else ROLLED_BACK
        return change.binding, what, write

    def _plan_groups(
        self, send: list[Decision], plans: Mapping[str, MemberPlan], summary: PassSummary
    ) -> tuple[list[Decision], dict[str, Mapping[str, Any]]]:
        """Phase 1 of binding a group (engine.enforce.groupphase): its plan on every member admitted
        with it. The decisions left to send (no member of a group any plan write of which did
        not go through) and the binding each planned member's Admit is made on."""
        admits = [d for d in send if d.binding in plans]
        if not admits:
            return send, {}
        written: dict[str, Mapping[str, Any]] = {}

        def write(member: MemberPlan, ref: str, binding: Mapping[str, Any]) -> Outcome:
            outcome, written[ref] = self.applier.write_plan(member, binding)
            return outcome

        attempts = self._write_all(
            [(d.binding, PLANNED, partial(write, plans[d.binding], d.binding)) for d in admits],
            summary,
        )
        done = {a.ref for a in attempts if a.outcome in (Outcome.APPLIED, Outcome.UNCHANGED)}
        failed = {p.group for ref, p in plans.items() if ref not in done}  # held back, or failed
        kept = [d for d in send if d.binding not in plans or plans[d.binding].group not in failed]
        summary.skipped += len(send) - len(kept)
        return kept, written

    def _enforce(
        self, decision: Decision, policy_version: str, planned: Mapping[str, Any] | None = None
    ) -> Write:
        """The decision's write, on the cached binding or (a group member, phase 2) on the
        binding its plan write left."""
        return (
            decision.binding,
            str(decision.action),
            lambda b: self.applier.apply(
                decision, b if planned is None else planned, policy_version=policy_version
            ),
        )

    def _write_all(self, writes: Sequence[Write], summary: PassSummary) -> list[Attempt]:
        """Each write on the pool's threads (reconciler.writers: a binding per thread, several
        bindings at once), once all have ended; outcomes counted in ``summary`` in the order
        given, in this thread."""
        attempts = self.writers.run([partial(self._attempt, *write) for write in writes])
        for attempt in attempts:
            self._count(attempt, summary)
        return attempts

    def _attempt(
        self, ref: str, what: str, write: Callable[[Mapping[str, Any]], Outcome]
    ) -> Attempt:
        """``write`` on the cached binding ``ref`` when it is managed and not stale. Runs on a
        writer thread: it counts nothing and marks nothing dirty (``_count`` does)."""
        if self.gate is not None and not self.gate():
            return Attempt(ref, what, None, "")  # not (or no longer) the leader: write nothing
        binding = self._cached(ref)
        if binding is None or not (_managed(binding) or what == ADOPTED):
            return Attempt(ref, what, None, "")
        version = _version(binding)
        stale = self.dirty.get(ref)
        if stale is not None:
            if stale == version and not self._unchanged_since(ref, binding):
                return Attempt(ref, what, None, version)  # the watch has not brought it yet
            self.dirty.pop(ref, None)
        try:
            outcome = write(binding)
        except (FleetgateError, ApiException, OSError) as error:
            log.error("%s: %s failed: %s", ref, what, error)
            return Attempt(ref, what, None, version, failed=True)
        return Attempt(ref, what, outcome, version)

    def _count(self, attempt: Attempt, summary: PassSummary) -> Outcome | None:
        outcome = summary.count(attempt)
        if outcome in (Outcome.CONFLICT, Outcome.GONE):
            self.dirty[attempt.ref] = attempt.version
            log.info("%s: %s; deciding again on its next version", attempt.ref, outcome)
        return outcome

    def _notify(self, result: CycleResult, summary: PassSummary) -> None:
        for observer in list(self.observers):
            try:
                observer(result, summary)
            except Exception:  # an observer (metrics, API view) must never stop the loop
                log.exception("reconciler: observer %r failed", observer)

    def _cached(self, ref: str) -> Mapping[str, Any] | None:
        namespace, _, name = ref.rpartition("/")
        resource = RESOURCE_BINDINGS if namespace else CLUSTER_RESOURCE_BINDINGS
        return self.informers[resource.key].get(namespace, name)

    def _settled(self, ref: str) -> str | None:
        binding = None if ref in self.dirty else self._cached(ref)
        return None if binding is None else _version(binding)

    def _unchanged_since(self, ref: str, binding: Mapping[str, Any]) -> bool:
        """A fresh read of a binding whose write met a 409 while the cache still holds the same
        version: True when the server holds that version too (the conflict came and went), so
        the cached object is current; never written into the cache."""
        return self.applier.server_version(binding) == _version(binding)


def _managed(binding: Mapping[str, Any]) -> bool:
    return ((binding.get("metadata") or {}).get("labels") or {}).get(ann.MANAGED) == "true"


def _version(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")
