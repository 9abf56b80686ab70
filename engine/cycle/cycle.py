"""One scheduling cycle: Snapshot + PolicySet + now → CycleResult. Pure: no I/O, no clock.

The steps, each in its own module:
 1. jobs       — managed bindings → pending, admitted (holding quota and capacity), backoff
 2. accounting — cluster free capacity (minus in-flight admissions) and queue usage
 3. screening  — jobs that cannot be considered (unknown demand, policy errors, bad queue),
                 and jobs whose dependencies are unmet (not yet eligible: no turn, no place);
                 co-admission groups: members waiting for their group, or one unit per group
 4. order      — queue priority tiers, weighted fair share, FIFO within a queue
 5. quota      — guarantee, borrowing within limits, max on every ancestor
 6. placement  — candidate clusters, gang fit, scores; commit so later jobs see it
 7. preemption — victims for a job that quota or capacity keeps out, when its queue allows;
                 without any, a job that may fit (``nodeShape: Optimistic``) is admitted there
 8. explain    — a reason for every job not admitted, its position, queue reports

One module past 400 lines: the steps above share the cycle's working state (``Cycle``).
"""

from __future__ import annotations

import datetime as dt
import functools
import operator
from collections import Counter, defaultdict
from collections.abc import Iterable
from typing import Any

from engine import vectors
from engine.cycle import dependencies, explain, reservations
from engine.cycle.groups import formation as groups
from engine.cycle.groups import place as groups_place
from engine.cycle.groups import preempt as groups_preempt
from engine.cycle.jobs import records
from engine.cycle.jobs.cache import JobCache
from engine.cycle.jobs.model import Backoff, PendingJob
from engine.cycle.jobs.reading import classify
from engine.cycle.model import CycleResult, Decision, GroupState
from engine.cycle.ordering.order import QueueOrder, late_key
from engine.cycle.placement.placer import Placer
from engine.cycle.placement.states import cluster_states
from engine.cycle.placement.values import queue_values
from engine.cycle.preemption import candidates, ranking, victims
from engine.cycle.quota.held import add_held
from engine.cycle.quota.misses import QuotaMiss
from engine.cycle.quota.tree import QuotaNode, QuotaTree
from engine.cycle.reasons import NEVER, Reason
from engine.fleet.model import Snapshot
from engine.policy import queueaccess
from engine.policy.model import Strategy
from engine.policy.policyset import PolicySet

_REF = operator.attrgetter("ref")


def binding_key(item: Backoff) -> tuple[str, str]:
    """What jobs in backoff are kept sorted by."""
    return item.binding.namespace, item.binding.name


def run_cycle(
    snapshot: Snapshot, policies: PolicySet, now: dt.datetime, cache: JobCache | None = None
) -> CycleResult:
    return FullCycle(snapshot, policies, now, cache).run()


class _Missed(dict[tuple[Any, ...], QuotaMiss]):
    """(queue, priority, pods) → the quota miss of a job that preempted nobody, for the quota
    at ``version`` only: a job alike then misses alike, and preempts nobody either."""

    version = -1

    def reset(self, version: int) -> None:
        self.clear()
        self.version = version


class FullCycle:
    """The working state of one cycle over every pending job (``incremental.Cycle`` continues
    it for jobs that come later)."""

    def __init__(
        self,
        snapshot: Snapshot,
        policies: PolicySet,
        now: dt.datetime,
        cache: JobCache | None = None,
    ) -> None:
        self.snapshot = snapshot
        self.policies = policies
        self.now = now
        self.cache = cache if cache is not None else JobCache()
        self._read_jobs()  # 1. jobs
        self._account()  # 2. accounting
        self.decisions: list[Decision] = []
        # queue → (binding ref, order key) of every job that keeps its place in the queue
        self.waiting: dict[str, list[tuple[str, tuple[Any, ...]]]] = defaultdict(list)
        self.no_victims: dict[tuple[Any, ...], str] = {}  # shape → whose search found none
        self.searched: dict[str, str] = {}  # queue → the job (ref) whose search it had
        self.missed = _Missed()
        self.blocked: dict[str, PendingJob] = {}  # StrictFIFO leaf → its blocked head
        self.order: QueueOrder | None = None
        self.units: dict[str, groups.Unit] = {}  # a group's representative → its unit
        self.group_states: dict[str, GroupState] = {}  # binding ref → its group, for decisions
        self.holds: list[reservations.Hold] = []  # room held for long waiters (step 3d)
        self.held_fits: dict[tuple, bool] = {}  # ``reservations.blocking``'s answers
        self.refusals: dict[tuple[str, str], str | None] = {}  # (queue, namespace) → refusal
        self.cross = policies.scheduling.dependencies.cross_namespace  # references elsewhere
        late = policies.scheduling.ordering.late_after  # queued at or before: late
        self.late_since = None if late is None else now - dt.timedelta(seconds=late)

    def _read_jobs(self) -> None:
        """1. jobs, sorted here too: the result does not depend on the snapshot's order."""
        read = classify(self.snapshot, self.policies, self.cache, self.now)
        self.pending = sorted(read.pending, key=_REF)
        self.admitted = sorted(read.admitted, key=_REF)
        self.backoff = sorted(read.backoff, key=binding_key)
        self.finished = read.finished

    def _account(self) -> None:
        """2. accounting: each cluster's room and each queue's usage, with what runs and what
        is in flight."""
        views = sorted(self.snapshot.clusters, key=lambda c: c.name)
        self.clusters = cluster_states(views, self.snapshot.estimates, self.cache.cluster_states)
        ready = (s.allocatable for s in self.clusters.values() if s.view.ready)
        self.capacity = vectors.total((a, 1) for a in ready)
        self.quota = QuotaTree(self.policies.queues, self.capacity)
        held = self.cache.held.held(self.admitted)  # summed per queue, kept between cycles
        self.admitted_count: Counter[str] = add_held(self.quota, held)
        for job in held.in_flight:
            for name in job.in_flight:
                if name in self.clusters:
                    self.clusters[name].place(job.pods[name])
        values = functools.partial(queue_values, self.policies, self.quota)
        self.placer = Placer(
            self.snapshot, self.policies, self.clusters, self.now, values, self.cache
        )

    def run(self) -> CycleResult:
        """Steps 3–8, one call each (1 and 2 ran when the cycle was made)."""
        eligible = self._screen_all()  # 3. screening and dependencies
        by_leaf, strict = self._units(eligible)  # 3c. groups, 3d. reservations
        self.order = self._queue_order(by_leaf)  # 4. order
        self._take_turns(strict)  # 5.–7. quota, placement, preemption
        return self.result()  # 8. explain

    def _screen_all(self) -> list[PendingJob]:
        """The pending jobs that may be considered: a job not yet eligible takes no turn."""
        verdicts = dependencies.check(self.pending, dependencies.Fleet(self.snapshot), self.cross)
        eligible = []
        for job in self.pending:
            problem = self._screen(job)
            if problem is not None:
                self._decide(job, *problem)
            elif self._eligible(job, verdicts):
                eligible.append(job)
        return eligible

    def _units(self, eligible: list[PendingJob]) -> tuple[dict[str, list[PendingJob]], set[str]]:
        """Each leaf's jobs (members that wait for their group take no turn; a group takes
        one), room held for long waiters; and the StrictFIFO leaves."""
        by_leaf: dict[str, list[PendingJob]] = defaultdict(list)
        for job in self._groups(eligible):
            by_leaf[job.mapped.queue].append(job)
        strict = {name for name in by_leaf if self._strict(name)}
        self._reserve(by_leaf, strict)
        return by_leaf, strict

    def _queue_order(self, by_leaf: dict[str, list[PendingJob]]) -> QueueOrder:
        fair = self.policies.scheduling.fair_sharing
        resources = fair.resources or self.quota.resources
        return QueueOrder(
            self.quota,
            by_leaf,
            fair_sharing=fair.enabled,
            resources=resources,
            late_since=self.late_since,
        )

    def _take_turns(self, strict: set[str]) -> None:
        """Each job (a group: as a whole) in turn: quota, placement, preemption."""
        assert self.order is not None
        while (pick := self.order.next()) is not None:
            leaf_name, job = pick
            leaf = self.quota.nodes[leaf_name]
            unit = self.units.get(job.ref) if self.units else None
            admitted = self._consider_group(unit, leaf) if unit else self._consider(job, leaf)
            if admitted or self.decisions[-1].reason in NEVER or leaf_name not in strict:
                self.order.advance(leaf_name)
                continue
            self.blocked[leaf_name] = job
            self._block(self.order.block(leaf_name), job)

    def result(self) -> CycleResult:
        """8. explain: positions, group states, queue reports, the records of the jobs."""
        decisions = [explain.for_backoff(b) for b in self.backoff] + self.decisions
        decisions = explain.with_positions(decisions, self.places(), every_queue=True)
        return self.explained(groups.with_states(decisions, self.group_states))

    def places(self) -> dict[str, list[tuple[str, tuple[Any, ...]]]]:
        """Each queue's waiting jobs (those in backoff too) with their order keys."""
        waiting = {queue: list(jobs) for queue, jobs in self.waiting.items()}
        for item in self.backoff:
            if item.mapped is not None:
                waiting.setdefault(item.mapped.queue, []).append(self.backoff_place(item))
        return waiting

    def explained(self, decisions: list[Decision]) -> CycleResult:
        """The result of ``decisions`` (backoff first, positions given): reports, records."""
        reports = explain.queue_reports(
            self.quota,
            self.order or QueueOrder(self.quota, {}, fair_sharing=False, resources=()),
            self.admitted_count,
            {k: len(v) for k, v in self.waiting.items()},
        )
        stats = {
            "pending": len(self.pending),
            "admitted": [d.reason for d in self.decisions].count(Reason.ADMITTED),
            "celEvaluations": self.placer.memo.misses,
        }
        jobs = records.table(
            self.snapshot, self.pending, self.admitted, self.backoff, self.finished,
            self.group_states,
        )  # fmt: skip
        return CycleResult(self.policies.version, self.now, tuple(decisions), reports, stats, jobs)

    # --- steps -----------------------------------------------------------------------------
    def _screen(self, job: PendingJob) -> tuple[Reason, str] | None:
        if job.problem is not None:
            return job.problem
        name = job.mapped.queue
        node = self.quota.node(name)
        if node is None:
            return Reason.QUEUE_NOT_FOUND, f"queue {name!r} is not defined"
        if node.children:
            children = ", ".join(c.name for c in node.children)
            return Reason.QUEUE_NOT_LEAF, f"queue {name} has child queues ({children})"
        key = (name, job.binding.namespace)  # namespaceSelector: asked once per pair
        if key not in self.refusals:
            labels = self.snapshot.namespace_labels(key[1])
            self.refusals[key] = queueaccess.refusal(self.policies, *key, labels)
        refused = self.refusals[key]
        return None if refused is None else (Reason.QUEUE_NOT_ALLOWED, refused)

    def _eligible(self, job: PendingJob, verdicts: dict[str, dependencies.Verdict] | None) -> bool:
        """Whether ``job``'s dependencies let it be considered now; if not, its decision (it
        keeps no place in its queue). ``verdicts`` None: look again (a job that arrived)."""
        if not job.depends:
            return True
        if verdicts is None:
            verdicts = dependencies.check(
                self.pending, dependencies.Fleet(self.snapshot), self.cross
            )
        verdict = verdicts[job.ref]
        if verdict.reason is not None:
            self.decisions.append(explain.for_job(job, verdict.reason, verdict.message))
            return False
        if verdict.pin:
            self.placer.pins[job.ref] = (verdict.pin, verdict.pinned_to)
        return True

    def _consider(self, job: PendingJob, leaf: QuotaNode) -> bool:
        missed = self.missed
        if missed.version != self.quota.version:  # new with each admission and preemptor's hold
            missed.reset(self.quota.version)
        alike = (leaf.name, job.mapped.priority, job.pod_key)  # the pods make the demand
        seen = missed.get(alike)
        if seen is not None:  # as a job alike before it, with nothing admitted or held since
            self._decide(job, seen.reason, seen.message)
            return False
        miss = self.quota.check(leaf, job.demand)
        if miss is not None:
            if miss.reason not in NEVER and self._preempt(job, leaf, miss.message):
                return False
            if job.pod_key:
                missed[alike] = miss
            self._decide(job, miss.reason, miss.message)
            return False
        splittable = job.mapped.allow_split and job.workload is not None
        placed = self.placer.place(job, splittable)
        held = None
        if placed.reason == Reason.NO_CLUSTER_FITS and self.holds:  # it waits for held room:
            names = self.placer.candidates(job, self.placer.job_key(job)).names  # no preempting,
            held = reservations.blocking(job, self.holds, self.clusters, names, self.held_fits)
        if held is None and placed.reason == Reason.NO_CLUSTER_FITS and placed.fallback:
            if self._preempt(job, leaf, placed.message):
                return False
            placed = placed.fallback  # nothing to preempt: where it may fit
        if placed.reason is None:
            for name, groups in placed.assignments:
                self.clusters[name].place(groups)
            self.quota.add(leaf, job.demand)
            self.admitted_count[leaf.name] += 1
            self._decide(
                job,
                Reason.ADMITTED,
                placed.message,
                assignments=placed.assignments,
                cluster_reasons=placed.cluster_reasons,  # scores that failed there, if any
            )
            if self.order is not None:
                self.order.usage_changed(leaf.name)
            return True
        fits_nowhere = held is None and placed.reason == Reason.NO_CLUSTER_FITS
        if fits_nowhere and self._preempt(job, leaf, placed.message):
            return False
        reason, message = placed.reason, placed.message
        if job.ref in self.placer.pins:
            pin = self.placer.pins[job.ref]
            message += "; " + dependencies.pinned_note(*pin, placed.cluster_reasons)
        note = ""
        if held is not None:  # nor a guess where it may fit: the room is the reserved job's
            note = reservations.held_back(held)
            reason, message = Reason.RESERVED_FOR, f"{message}; {note}"
        self._decide(job, reason, message, cluster_reasons=placed.cluster_reasons, note=note)
        return False

    def _reserve(self, by_leaf: dict[str, list[PendingJob]], strict: set[str]) -> None:
        """3d. A preemptor (``fleetgate.io/nominated-cluster``) that fits now is admitted first:
        the room its victims freed is its own, as a pod's nominated node is. Then
        ``reservations``: the longest waiters take their turn first; room is held for each
        that fits no cluster (the rest of a StrictFIFO queue then waits behind it)."""
        policy = self.policies.scheduling.reservations
        queued = [j for jobs in by_leaf.values() for j in jobs if j.ref not in self.units]
        for job in reservations.nominated(queued):
            leaf = self.quota.nodes[job.mapped.queue]
            if (
                self.quota.check(leaf, job.demand) is None
                and not self.placer.place(job, False).reason
            ):
                by_leaf[leaf.name].remove(job)
                queued.remove(job)
                self._consider(job, leaf)
        for job in reservations.starving(queued, policy, self.now) if policy else ():
            leaf = self.quota.nodes[job.mapped.queue]
            by_leaf[leaf.name].remove(job)
            if self._consider(job, leaf) or self.decisions[-1].reason != Reason.NO_CLUSTER_FITS:
                continue
            names = self.placer.candidates(job, self.placer.job_key(job)).names
            cluster = reservations.where(job, names, self.clusters)
            if cluster is not None:
                held = reservations.hold(job, self.clusters[cluster])
                self.holds.append(held)
                last = self.decisions[-1]
                said = f"{reservations.said(held, self.now)}; {last.message}"
                self.decisions[-1] = last._replace(
                    reason=Reason.RESERVED, message=said, note=reservations.held(held)
                )
            if leaf.name in strict:
                self.blocked[leaf.name] = job
                self._block(by_leaf.pop(leaf.name), job)

    def _groups(self, eligible: list[PendingJob]) -> list[PendingJob]:
        """The jobs that take turns: ``eligible`` with each group's members replaced by one
        representative (``groups.form``); members that cannot go yet get their decision."""
        admit_on = self.policies.scheduling.gang.admit_on
        formed = groups.form(eligible, self.pending, self.admitted, self.snapshot, admit_on)
        if formed is None:
            return eligible
        for job, reason, message in formed.decisions:  # no position: they take no turn
            self.decisions.append(explain.for_job(job, reason, message))
        self.units, self.group_states = formed.units, formed.states
        return formed.queued

    def _consider_group(self, unit: groups.Unit, leaf: QuotaNode) -> bool:
        gang = self.policies.scheduling.gang
        outcome = groups_place.consider(
            unit, leaf, self.quota, self.placer, self.clusters, gang.admit_on
        )
        found = groups_preempt.attempt(self, unit, leaf, outcome)  # None: nobody preempted
        for job, reason, message, extra in (found.outcome if found else outcome).decisions:
            self._decide(job, reason, message, **extra)
        for victim, member, reclaim in found.victims if found else ():
            self.decisions.append(explain.for_victim(victim, member, reclaim))
        groups.settle(self.group_states, unit, outcome.state)
        if not outcome.admitted:
            return False
        self.admitted_count[leaf.name] += len(outcome.admitted)
        if self.order is not None:
            self.order.usage_changed(leaf.name)
        return True

    def _preempt(self, job: PendingJob, leaf: QuotaNode, why: str) -> bool:
        """Search victims for ``job``: at most once per queue per cycle, for the first job of
        the queue (in queue order) that has candidates — Kueue likewise tries one head per
        ClusterQueue per cycle. The next cycle tries the next job."""
        chosen = ranking.search(self, job, leaf)
        if chosen is None:
            return False
        self.victims.take(chosen.victims)
        # the preemptor's quota held on top of the victims' (they run until they terminate)
        self.quota.add(leaf, job.demand)
        # On the nominated cluster, what the victims do not free is taken from what is free now.
        freed = vectors.total((v.usage.get(chosen.cluster, {}), 1) for v in chosen.victims)
        self.clusters[chosen.cluster].take(vectors.beyond(job.demand, freed))
        names = ", ".join(v.ref for v in chosen.victims)
        self._decide(
            job,
            Reason.PREEMPTING,
            f"{why}; preempting {names} makes room on {chosen.cluster}",
            assignments=((chosen.cluster, job.pods),),
            victims=chosen.victims,
        )
        for victim in chosen.victims:
            self.decisions.append(explain.for_victim(victim, job, victim.ref in chosen.reclaim))
        return True

    @functools.cached_property
    def victims(self) -> victims.VictimIndex:
        """The admitted jobs preemption may take, built when a search first needs them."""
        if self.cache.candidates is None:
            self.cache.candidates = candidates.Candidates()
        limits = self.policies.scheduling.preemption
        return victims.VictimIndex.ordered(
            *self.cache.candidates.ordered(
                self.admitted, self.snapshot, limits, self.now, self.capacity
            )
        )

    def victims_spent(self, more: int = 0) -> bool:
        """Whether taking ``more`` victims (any, when 0) passes ``maxVictimsPerCycle``."""
        most = self.policies.scheduling.preemption.max_victims_per_cycle
        built = self.__dict__.get("victims")  # none taken before the index is built
        taken = len(built.taken) if built is not None else 0
        return most is not None and taken + max(more, 1) > most

    def _block(self, jobs: Iterable[PendingJob], head: PendingJob) -> None:
        message = f"StrictFIFO queue {head.mapped.queue}: waits behind its head {head.workload_ref}"
        for job in jobs:
            unit = self.units.get(job.ref) if self.units else None
            for member in unit.members if unit else (job,):
                self._decide(member, Reason.BLOCKED_BY_HEAD, message)

    def backoff_place(self, item: Backoff) -> tuple[str, tuple[Any, ...]]:
        ref, key = explain.backoff_place(item)
        return ref, late_key(key, key[1], self.late_since)

    def _strict(self, leaf: str) -> bool:
        queue = self.policies.queue(leaf)
        return queue is not None and queue.strategy == Strategy.STRICT_FIFO

    def _decide(self, job: PendingJob, reason: Reason, message: str, **extra: Any) -> None:
        if reason in explain.WAITS:  # neither admitted nor rejected: it keeps its place
            waiting = self.waiting[job.mapped.queue]
            key = job.order_key  # with lateAfter, the late flag too (as the queue order has it)
            if self.late_since is not None:
                key = late_key(key, job.enqueued_at, self.late_since)
            waiting.append((job.ref, key))
            # its place, unless a job decided later goes before it: ``with_positions`` says
            extra["position"] = len(waiting)
        self.decisions.append(explain.for_job(job, reason, message, **extra))
