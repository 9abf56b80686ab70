"""The discrete-event loop: trace jobs arrive, the real cycle decides, simulated members run them.

Time advances in ticks. A tick is the next event (an arrival, a job's end on a member, a
timer: backoff end, startup timeout, NotReady grace, a scripted fault), but never earlier than
``interval`` after the previous tick: events in between are batched into one tick, as the
reconciler's debounce batches watch events. ``interval=0`` gives one tick per distinct event
time. At each tick:

 1. timers and faults that are due;
 2. arrivals: the template and its suspended ResourceBinding appear;
 3. members step (``engine.members``): jobs whose time is up succeed (at their exact end time)
    and free their pods, pending pods bind (to the fullest node that fits), jobs start;
 4. if anything changed since the last cycle and jobs wait: one cycle (``run_cycle`` with a
    ``JobCache`` kept across cycles, as the reconciler runs it, or the baseline), its decisions
    applied to the in-memory objects with ``engine/enforce/plan.py``'s semantics (``objects``):
    Admit → bound and submitted to the members, which bind and start it at once; Preempt →
    evicted, back in its queue; then the members bind what was admitted;
 5. Clusters whose members changed are read again (status as Karmada reports it); metrics.

Failures requeue as ``engine.requeue`` says (the reconciler's rule). Every trace job ends
finished, given up, or still pending/running at ``until``.

One module past 400 lines: the tick's steps, the timers and the scripted faults among them,
share the loop's state and act on it (a due timer may fail a job, which requeues it and sets
more timers), and the report's facts (start times, GPU time lost, waits) are recorded where the
events happen.
"""

from __future__ import annotations

import bisect
import datetime as dt
import gc
import heapq
import math
import random
import time
from collections.abc import Callable

from engine.cycle import Action, CycleResult, Decision, JobCache, Reason, run_cycle
from engine.enforce import (
    Found,
    failed_on_member,
    not_ready_past_grace,
    reclaim,
    startup_overdue,
)
from engine.fleet.frozen import FrozenDict
from engine.fleet.model import ClusterView, Snapshot
from engine.gcpause import collector_paused
from engine.members import EventType, Fleet, FleetSpec, JobSpec, MemberEvent, PodGroup
from engine.policy.policyset import PolicySet
from simulate import objects
from simulate.live import Fault, LiveJob, Options, Part, live_jobs
from simulate.metrics import RESOURCES, Metrics
from simulate.results import GPU, RunResult
from simulate.summary import fragmentation_now, summarize
from simulate.trace import Trace

GC_EVERY = 2000  # ticks between two collections of cyclic garbage
CACHE_ENTRIES = 50_000
"""The JobCache's bound (the reconciler keeps 500,000): every job of a trace passes through it
and it forgets only when full, so a smaller bound keeps a long replay's heap small."""
Decide = Callable[[Snapshot, PolicySet, dt.datetime, JobCache], CycleResult]
Progress = Callable[[float, int, int], None]  # simulated seconds, jobs ended, jobs total


class Simulation:
    def __init__(
        self,
        policies: PolicySet,
        fleet: FleetSpec,
        trace: Trace,
        options: Options | None = None,
        decide: Decide | None = None,
    ) -> None:
        self.policies = policies
        self.options = options or Options()
        self.rules = policies.scheduling.requeue
        self.decide: Decide = decide or run_cycle
        self.members = Fleet(fleet, objects.at(0))
        self.rng = random.Random(self.options.seed)
        self.cache = JobCache(CACHE_ENTRIES)
        self.classes = objects.priority_classes(trace.jobs)
        self.jobs, self.predecessors = live_jobs(trace.jobs)
        self.by_trace_name = {j.trace.name: j for j in self.jobs}
        self.by_ref: dict[str, LiveJob] = {}
        self.by_key: dict[str, LiveJob] = {}  # member job key → job
        self.bindings: dict[tuple[str, str, str], LiveJob] = {}
        self.order: list[tuple[str, str, str]] = []
        # every template of the trace, one value for the whole run: the cycle's JobCache keeps
        # pending jobs while the snapshot's workloads are the very same object
        self.workloads = FrozenDict({j.binding.resource.key: j.work for j in self.jobs})
        self.views: dict[str, ClusterView] = {}
        self.readers = {m.name: objects.ClusterReader(m, objects.at(0)) for m in self.members}
        self.stale: set[str] = set(self.members.members)
        # parts submitted to a member and not started: their pods may wait for nodes
        self.unstarted = dict.fromkeys(self.members.members, 0)
        self.restep: set[str] = set()
        self.ends: list[tuple[float, str]] = []
        self.timers: list[tuple[float, int, str, object]] = []
        self.seq = 0
        self.down: dict[str, int] = {}
        self.pending = 0
        self.peak_pending = 0
        self.waiting: dict[int, LiveJob] = {}  # the jobs counted in ``pending``
        self.ended = 0
        self.want_cycle = False
        self.next_arrival = 0
        self.cycles = 0
        self.ticks = 0
        self.preemptions = 0
        self.failures = 0
        self.lost_gpu_s = 0.0
        self.admitted: dict[str, LiveJob] = {}
        for fault in self.options.faults:
            self.timer(fault.at, "fault", fault)
        gpus = sum(
            float(g.allocatable.get_amount(GPU)) * g.count for c in fleet.clusters for g in c.nodes
        )
        span = max((j.trace.submit + j.trace.duration for j in self.jobs), default=0.0)
        horizon = self.options.until if self.options.until is not None else span
        sample = max(horizon / max(self.options.samples, 1), self.options.interval, 1.0)
        allocatable = {
            name: [float(r.allocatable.get_amount(k)) for k in RESOURCES]
            for name, r in self.readers.items()
        }
        self.metrics = Metrics(policies, allocatable, gpus, self.options.window_s, sample)
        self.metrics.arrivals_end = max((j.trace.submit for j in self.jobs), default=0.0)
        self.t = 0.0

    # -- the loop -----------------------------------------------------------------------------

    def run(self, progress: Progress | None = None) -> RunResult:
        """Run to ``until`` (or until nothing can change). The cyclic garbage collector is
        paused throughout and run every ``GC_EVERY`` ticks: with the trace's objects frozen out
        of its view, a run's garbage is almost all freed by reference counting, and letting
        allocation counts trigger collections rescans the live state again and again. At the
        end all is unfrozen, uncollected, into the oldest generation (no 1–2 s young one)."""
        started = time.perf_counter()
        until = self.options.until if self.options.until is not None else math.inf
        last: float | None = None
        gc.collect()
        gc.freeze()  # the trace, its templates and bindings: kept all run long
        try:
            with collector_paused():
                while (event := self._next_event()) is not None and event <= until:
                    t = event if last is None else max(event, last + self.options.interval)
                    self._tick(min(t, until))
                    last = min(t, until)
                    self.ticks += 1
                    if self.ticks % GC_EVERY == 0:
                        gc.collect()
                    if progress is not None:
                        progress(last, self.ended, len(self.jobs))
                gc.freeze()  # or re-enabling the collector collects the last ticks' objects
        finally:
            gc.unfreeze()
        end = until if until != math.inf else self.t
        self.metrics.advance(end)
        records = [j.record() for j in self.jobs]
        summary = summarize(self, records, end, time.perf_counter() - started)
        return RunResult(self.options.label, summary, self.metrics.series, records)

    def _next_event(self) -> float | None:
        candidates = []
        if self.next_arrival < len(self.jobs):
            candidates.append(self.jobs[self.next_arrival].trace.submit)
        if self.ends:
            candidates.append(self.ends[0][0])
        if self.timers:
            candidates.append(self.timers[0][0])
        if self.want_cycle and self.pending:
            candidates.append(self.t + max(self.options.interval, 1.0))
        return max(min(candidates), self.t) if candidates else None

    def _tick(self, t: float) -> None:
        self.metrics.advance(t)
        self.t = t
        now = objects.at(t)
        while self.timers and self.timers[0][0] <= t:  # 1. timers and faults
            _, _, kind, payload = heapq.heappop(self.timers)
            self._on_timer(kind, payload, t)
        while self.next_arrival < len(self.jobs):  # 2. arrivals
            job = self.jobs[self.next_arrival]
            if job.trace.submit > t:
                break
            self.next_arrival += 1
            self._arrive(job)
        self._step(t, now)  # 3. members
        if self.want_cycle and self.pending:  # 4. one cycle
            self.want_cycle = False
            self._refresh()
            self._cycle(t, now)
            self._step(t, now)
        if self.metrics.due(t):
            self.metrics.sample(t, fragmentation_now(self.waiting.values(), self.members))

    def _refresh(self) -> None:
        for name in sorted(self.stale):
            self.views[name] = self.readers[name].view(self.unstarted[name] > 0)
        self.stale.clear()

    # -- arrivals, members ----------------------------------------------------------------------

    def _arrive(self, job: LiveJob) -> None:
        job.state = "pending"
        b = job.binding
        self.by_ref[job.ref] = job
        key = (b.namespace, b.name, b.kind)
        self.bindings[key] = job
        bisect.insort(self.order, key)
        job.in_snapshot = True
        self._waiting(job, True)
        self.want_cycle = True

    def _waiting(self, job: LiveJob, waits: bool) -> None:
        if waits != job.waiting:
            job.waiting = waits
            self.pending += 1 if waits else -1
            if waits:
                self.waiting[id(job)] = job
                self.peak_pending = max(self.peak_pending, self.pending)
            else:
                del self.waiting[id(job)]
            self.metrics.wait(job.queue, job.gpus, 1 if waits else -1)

    def _step(self, t: float, now: dt.datetime) -> None:
        due = set(self.restep)
        while self.ends and self.ends[0][0] <= t:
            due.add(heapq.heappop(self.ends)[1])
        self.restep.clear()
        for name in sorted(due):
            member = self.members[name]
            for event in member.step(now):
                self._on_member_event(event)
            self.stale.add(name)

    def _on_member_event(self, event: MemberEvent) -> None:
        job = self.by_key.get(event.job)
        part = job.parts.get(event.cluster) if job is not None else None
        if job is None or part is None or part.key != event.job:
            return
        t = (event.at - objects.EPOCH).total_seconds()
        if event.type == EventType.STARTED:
            part.started_at = t
            if all(p.started_at is not None for p in job.parts.values()):
                # what the reconciler's lifecycle writes; the room stays reserved for
                # clusterStatusLag more, as the cycle holds it until the Cluster counts the pods
                job.binding = objects.running(job.binding, event.at)
                job.started_at = t  # the report's wait to start
                self.timer(t + self.rules.cluster_status_lag, "wake", None)
            self.unstarted[event.cluster] -= 1
            self.metrics.occupy(event.cluster, part.usage)
            heapq.heappush(self.ends, (t + job.trace.duration, event.cluster))
            if self.options.fail_rate and self.rng.random() < self.options.fail_rate:
                when = t + self.rng.random() * job.trace.duration
                self.timer(when, "fail", (job, part.key))
            return
        part.done = True
        self.metrics.occupy(event.cluster, part.usage, -1)
        self.members[event.cluster].remove(event.job)
        del self.by_key[event.job]
        job.binding = objects.finished(job.binding, event.cluster, failed=False)
        self.want_cycle = True
        if all(p.done for p in job.parts.values()):
            job.finished_at = max(t, job.finished_at or 0.0)
            self._end(job, "succeeded")

    # -- the cycle ------------------------------------------------------------------------------

    def _snapshot(self) -> Snapshot:
        return Snapshot(
            clusters=tuple(self.views[n] for n in sorted(self.views)),
            bindings=tuple(self.bindings[k].binding for k in self.order),
            workloads=self.workloads,
            policies=(),
            priority_classes=self.classes,
        )

    def _cycle(self, t: float, now: dt.datetime) -> None:
        snapshot = self._snapshot()
        result = self.decide(snapshot, self.policies, now, self.cache)
        self.cycles += 1
        for decision in result.decisions:
            job = self.by_ref.get(decision.binding)
            if job is None:
                continue
            if decision.queue and job.state == "pending":
                if job.waiting and job.queue != decision.queue:
                    self._waiting(job, False)
                    job.queue = decision.queue
                    self._waiting(job, True)
                job.queue, job.tenant = decision.queue, decision.tenant or job.tenant
            if job.state == "pending":
                job.reason = decision.reason
                where = decision.clusters[0].name if decision.clusters else ""
                if decision.reason == Reason.PREEMPTING and where and where != job.nominated:
                    job.binding = objects.nominated(job.binding, decision, result.policy_version)
            if decision.action == Action.ADMIT and job.state == "pending":
                self._admit(job, decision, t, now, result.policy_version)
            elif decision.action == Action.PREEMPT and job.state == "admitted":
                by = self.by_ref.get(decision.preemptor)
                if by is not None and by.queue != job.queue:
                    self.metrics.reclaimed(job.queue, job.demand)
                self.preemptions += 1
                job.preemptions += 1
                job.preempted_gpu_s += self._evict(job, t)  # the report's loss by preemption
                job.binding = objects.preempted(job.binding, decision, now, result.policy_version)
                self._requeue(job)

    def _admit(
        self, job: LiveJob, decision: Decision, t: float, now: dt.datetime, version: str
    ) -> None:
        job.binding = objects.admitted(job.binding, decision, job.work.resizable, now, version)
        job.state = "admitted"
        job.admitted_at = t
        job.started_at = None
        job.admissions += 1
        self.admitted[job.ref] = job
        self._waiting(job, False)
        self.metrics.admit(job.queue, job.demand)
        split = len(decision.clusters) > 1
        for assignment in decision.clusters:
            key = f"{job.ref}@{assignment.name}#{job.admissions}"
            if split:
                role = job.work.roles[0]
                groups = (PodGroup(role.name, assignment.replicas, role.requests),)
                spec = JobSpec(key, groups, dt.timedelta(seconds=job.trace.duration), False)
                usage = tuple(
                    float(role.requests.get_amount(r)) * assignment.replicas for r in RESOURCES
                )
            else:
                duration = dt.timedelta(seconds=job.trace.duration)
                spec = JobSpec.from_workload(key, job.work, duration)
                usage = job.demand
            self.members[assignment.name].submit(spec, now)
            self.unstarted[assignment.name] += 1
            job.parts[assignment.name] = Part(key, assignment.name, usage)
            self.by_key[key] = job
            self.restep.add(assignment.name)
            job.last_cluster = assignment.name
        self.timer(t + self.rules.startup_timeout, "startup", (job, job.admissions))

    def _evict(self, job: LiveJob, t: float) -> float:
        """Its Works are deleted: pods freed; returns the GPU-seconds of started parts lost."""
        lost = 0.0
        for part in job.parts.values():
            if part.done:
                continue
            if part.started_at is not None:
                lost += part.gpus * (t - part.started_at)
                self.metrics.occupy(part.cluster, part.usage, -1)
            self.members[part.cluster].remove(part.key)
            if part.started_at is None:
                self.unstarted[part.cluster] -= 1
            self.by_key.pop(part.key, None)
            self.restep.add(part.cluster)
            self.stale.add(part.cluster)
        job.parts = {}
        if (ran := job.started()) is not None:  # time it ran is not waiting time
            job.held_s += t - ran
        self.admitted.pop(job.ref, None)
        self.metrics.admit(job.queue, job.demand, -1)
        self.want_cycle = True
        self.lost_gpu_s += lost
        return lost

    def _requeue(self, job: LiveJob) -> None:
        job.state = "pending"
        self._waiting(job, True)

    def fail(self, job: LiveJob, found: Found, t: float) -> None:
        """Reclaim ``job`` as the reconciler's lifecycle does for the trigger ``found``
        (``engine.enforce.reclaim``: requeued after a backoff, or given up)."""
        now = objects.at(t)
        trigger, clusters, message = found
        self.failures += 1
        job.failures += 1
        self._evict(job, t)
        change = reclaim(job.binding, trigger, clusters, message, self.rules, now)
        job.binding = objects.reclaimed(job.binding, change, now, self.policies.version)
        if change.gave_up:
            job.finished_at = t
            self._end(job, "gave_up")
            return
        self._requeue(job)
        for _, until in change.excluded:  # a cycle when the backoff and each exclusion end
            self.timer((until - objects.EPOCH).total_seconds(), "wake", None)
        if change.backoff_until is not None:
            self.timer((change.backoff_until - objects.EPOCH).total_seconds(), "wake", None)

    def _end(self, job: LiveJob, state: str) -> None:
        job.state = state
        self.ended += 1
        self.admitted.pop(job.ref, None)
        if state == "succeeded":
            self.metrics.admit(job.queue, job.demand, -1)
        if job.dependents == 0:
            self._drop(job)
        for p in self.predecessors[id(job)]:
            p.dependents -= 1
            if p.dependents == 0 and p.state in ("succeeded", "gave_up"):
                self._drop(p)

    def _drop(self, job: LiveJob) -> None:
        if not job.in_snapshot:
            return
        b = job.binding
        key = (b.namespace, b.name, b.kind)
        del self.bindings[key]
        del self.order[bisect.bisect_left(self.order, key)]
        self.by_ref.pop(job.ref, None)
        job.in_snapshot = False

    # -- timers ---------------------------------------------------------------------------------

    def timer(self, t: float, kind: str, payload: object) -> None:
        self.seq += 1
        heapq.heappush(self.timers, (t, self.seq, kind, payload))

    def _on_timer(self, kind: str, payload: object, t: float) -> None:
        """A timer that is due: ``wake`` (a backoff or exclusion ended: look again),
        ``startup`` (admitted, not running within the startup timeout), ``fail`` (a failure drawn
        by ``--fail-rate``), ``grace`` (NotReady past the grace), ``fault`` (the fault script)."""
        if kind == "wake":
            self.want_cycle = True
        elif kind == "startup":
            job, admission = payload  # type: ignore[misc]
            if job.state == "admitted" and job.admissions == admission:
                now = objects.at(t)
                found = startup_overdue(job.binding, self.rules, now, job.running_on)
                if found is not None:
                    self.fail(job, found, t)
        elif kind == "fail":
            job, key = payload  # type: ignore[misc]
            part = next((p for p in job.parts.values() if p.key == key), None)
            if job.state == "admitted" and part is not None and not part.done:
                self._failed_on(job, [part.cluster], "", t)
        elif kind == "grace":
            name, down = payload  # type: ignore[misc]
            if self.down.get(name) == down and not self.members[name].ready:
                view = {name: self.readers[name].view(self.unstarted[name] > 0)}
                for job in [j for j in self.admitted.values() if name in j.parts]:
                    found = not_ready_past_grace(job.binding, view, self.rules, objects.at(t))
                    if found is not None:
                        self.fail(job, found, t)
        elif kind == "fault":
            self._fault(payload, t)  # type: ignore[arg-type]

    def _fault(self, fault: Fault, t: float) -> None:
        now = objects.at(t)
        if fault.action in ("cluster-down", "cluster-up"):
            member = self.members[fault.target]
            ready = fault.action == "cluster-up"
            member.set_ready(ready, now)
            self.down[fault.target] = self.down.get(fault.target, 0) + 1
            self.stale.add(fault.target)
            self.want_cycle = True
            if not ready:
                grace = t + self.rules.cluster_not_ready_grace
                self.timer(grace, "grace", (fault.target, self.down[fault.target]))
            return
        job = self.by_trace_name.get(fault.target)
        if job is not None and job.state == "admitted" and job.parts:
            clusters = sorted(p.cluster for p in job.parts.values() if not p.done)
            self._failed_on(job, clusters, fault.message or "job failed (fault script)", t)

    def _failed_on(self, job: LiveJob, clusters: list[str], detail: str, t: float) -> None:
        """The job failed on ``clusters`` (its members report it): ``FailedOnMember``."""
        for name in clusters:
            job.binding = objects.finished(job.binding, name, failed=True)
        found = failed_on_member(job.binding, lambda _: detail)
        if found is not None:
            self.fail(job, found, t)
