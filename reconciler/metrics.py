"""Prometheus metrics of the reconciler, named after Kueue's, in a registry of their own.

``ReconcilerMetrics().attach(reconciler)`` registers an observer that the reconciler calls after
each pass (``Reconciler.observers``). The gauges (jobs pending and admitted per queue, queue
usage and quota) describe the latest pass and are read from one immutable state that each pass
replaces whole, so a scrape never sees half a pass. The counters and histograms count
transitions that a pass *wrote*: an admission or a preemption is counted when the Applier's
outcome for it was ``Applied`` (``PassSummary.applied_to``), so a pass that decides the same
thing again and finds it already written (``Unchanged``), a 409, a skipped binding or a replica
that does not lead counts nothing, and every admission is counted exactly once.
A job the lifecycle reclaims after a failure (``engine.enforce.lifecycle``), and a member of a
group rolled back with the rest (``engine.enforce.groupplan``, reason ``GroupRolledBack``), is
counted as evicted the same way, from the write the loop records for it.

Kueue's names, with ``fleetgate_`` for ``kueue_`` and ``queue`` for ``cluster_queue``:
``kueue_pending_workloads`` → ``fleetgate_pending_jobs``, ``kueue_admitted_active_workloads`` →
``fleetgate_admitted_active_jobs``, ``kueue_admitted_workloads_total``,
``kueue_admission_wait_time_seconds``, ``kueue_cluster_queue_resource_usage``,
``kueue_cluster_queue_nominal_quota`` (fleetgate's guarantee), ``kueue_preempted_workloads_total``,
``kueue_evicted_workloads_total``, ``kueue_cluster_queue_weighted_share``. A pass (one cycle and
its writes) is timed by ``fleetgate_reconcile_pass_duration_seconds``, Kueue's
``kueue_admission_attempt_duration_seconds``. The calls a pass made to the members'
karmada-scheduler-estimators (``reconciler.estimator``) are counted by cluster and result in
``fleetgate_estimator_requests_total``. docs/observability.md lists them all.

For alerts (deploy/monitoring/): ``fleetgate_reconcile_leader`` says whether this replica leads
(1 too with leader election off), ``fleetgate_oldest_pending_job_timestamp_seconds`` when the
longest-waiting job of each queue and reason was queued, and
``fleetgate_reconcile_pass_failures_total`` counts passes that raised (the loop retries them).
Only a replica that leads reports the gauges of its latest pass: a former leader's last pass
would otherwise stay on its /metrics, stale, for as long as it runs as a follower.
"""

from __future__ import annotations

import threading
from collections import Counter as Tally
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from engine.cycle import Action, CycleResult
from engine.enforce import ROLLED_BACK, Trigger

if TYPE_CHECKING:
    from reconciler.loop import PassSummary, Reconciler

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# Jobs wait seconds to days: 1 s doubling to 2^17 s (36 h); Kueue doubles from 1 s as well.
WAIT_BUCKETS = tuple(float(2**i) for i in range(18))
# A pass is milliseconds on a small fleet and about a second at 15,000 pending jobs.
PASS_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
PREEMPTED = "Preempted"  # the eviction reason of a preemption victim (Kueue's too)
IN_QUEUE, RECLAIM = "InQueue", "Reclaim"  # why a job was preempted, from the preemptor's view
TRIGGERS = frozenset(str(t) for t in Trigger)  # what the loop records for a lifecycle reclaim
# … and for a member of a group taken off its clusters with the rest (engine.enforce.groupplan)
EVICTING = TRIGGERS | {ROLLED_BACK}
OUTCOMES = ("applied", "unchanged", "conflicts", "gone", "skipped", "errors")


@dataclass(frozen=True, slots=True)
class Gauges:
    """What the latest pass left: the values every gauge reports until the next pass."""

    pending: Mapping[tuple[str, str], int] = field(default_factory=dict)  # (queue, reason)
    rejected: Mapping[tuple[str, str], int] = field(default_factory=dict)
    admitted: Mapping[str, int] = field(default_factory=dict)  # queue → jobs (subtree)
    usage: Mapping[tuple[str, str], float] = field(default_factory=dict)  # (queue, resource)
    guarantee: Mapping[tuple[str, str], float] = field(default_factory=dict)
    max: Mapping[tuple[str, str], float] = field(default_factory=dict)
    share: Mapping[str, float] = field(default_factory=dict)
    last_pass: float | None = None  # the pass's ``now``, Unix seconds
    # the pass's result: its oldest pending jobs are read from its records when scraped
    # (``CycleResult.jobs`` is built on first use: a pass nobody scrapes pays nothing for it)
    result: CycleResult | None = None


class ReconcilerMetrics:
    """The reconciler's metrics; every instance has its own registry (tests stay independent)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.gauges = Gauges()
        self.admissions = Counter(
            "fleetgate_admitted_jobs",
            "Jobs admitted (written to their binding), by queue.",
            ["queue"],
            registry=self.registry,
        )
        self.wait_time = Histogram(
            "fleetgate_admission_wait_time_seconds",
            "Time from a job's queued-at (fleetgate.io/queued-at, else its binding's creation) "
            "to its admission, by queue.",
            ["queue"],
            buckets=WAIT_BUCKETS,
            registry=self.registry,
        )
        self.pass_duration = Histogram(
            "fleetgate_reconcile_pass_duration_seconds",
            "Duration of one reconciler pass: snapshot, estimators' answers (when asked), "
            "scheduling cycle and writes.",
            buckets=PASS_BUCKETS,
            registry=self.registry,
        )
        self.writes = Counter(
            "fleetgate_reconcile_writes",
            "Decisions and lifecycle steps by what the Applier answered "
            "(applied, unchanged, conflicts, gone, skipped, errors).",
            ["outcome"],
            registry=self.registry,
        )
        self.preemptions = Counter(
            "fleetgate_preempted_jobs",
            "Jobs preempted (evicted for a waiting job), by the preempting job's queue and why "
            "(InQueue: a lower priority in that queue; Reclaim: its own queue borrowed).",
            ["preempting_queue", "reason"],
            registry=self.registry,
        )
        self.evictions = Counter(
            "fleetgate_evicted_jobs",
            "Admitted jobs whose clusters were emptied, by their queue and reason (Preempted, "
            "the lifecycle trigger: FailedOnMember, Unhealthy, ClusterNotReady, "
            "StartupTimeout, or GroupRolledBack: a member of a group taken off with the rest).",
            ["queue", "reason"],
            registry=self.registry,
        )
        self.estimator_requests = Counter(
            "fleetgate_estimator_requests",
            "Calls to the members' karmada-scheduler-estimators before a pass, by cluster and "
            "result (ok; timeout, error, unavailable: the cluster's resource models were used).",
            ["cluster", "result"],
            registry=self.registry,
        )
        self._attached: set[int] = set()
        self._lock = threading.Lock()
        # the attached reconciler's: whether it may write now (None: leader election off),
        # and how many of its passes failed
        self._gate: Callable[[], bool] | None = None
        self._failures: Callable[[], int] | None = None
        self.registry.register(_GaugeCollector(self))

    def attach(self, reconciler: Reconciler) -> ReconcilerMetrics:
        """Observe every later pass of ``reconciler`` (once, however often it is called), and
        report whether it leads and how many of its passes failed."""
        with self._lock:
            if id(reconciler) in self._attached:
                return self
            self._attached.add(id(reconciler))
            self._gate = reconciler.gate
            self._failures = lambda: reconciler.failed_passes

        def observer(result: CycleResult, summary: PassSummary) -> None:
            self.observe(result, summary)

        reconciler.observers.append(observer)
        return self

    def observe(self, result: CycleResult, summary: PassSummary) -> None:
        """Record one pass: its result (with the records of the jobs its cycle read: when the
        jobs it admitted were queued, the queues of the jobs the lifecycle reclaimed) and what
        it wrote."""
        self.gauges = gauges_of(result)
        self.pass_duration.observe(summary.seconds)
        for outcome in OUTCOMES:
            count = getattr(summary, outcome)
            if count:
                self.writes.labels(outcome).inc(count)
        for (cluster, answer), calls in sorted(summary.estimator_requests.items()):
            self.estimator_requests.labels(cluster, answer).inc(calls)
        by_ref = {d.binding: d for d in result.decisions} if summary.applied_to else {}
        written = [(by_ref.get(ref), what) for ref, what in summary.applied_to]
        admitted = [d for d, what in written if d is not None and what == Action.ADMIT]
        preempted = [d for d, what in written if d is not None and what == Action.PREEMPT]
        for decision in admitted:
            self.admissions.labels(decision.queue).inc()
            record = result.jobs.get(decision.binding)
            queued = record.queued_at if record is not None else None
            if queued is not None:
                waited = (result.now - queued).total_seconds()
                self.wait_time.labels(decision.queue).observe(max(0.0, waited))
        for victim in preempted:
            preemptor = by_ref.get(victim.preemptor)
            queue = preemptor.queue if preemptor is not None else ""
            self.preemptions.labels(queue, IN_QUEUE if queue == victim.queue else RECLAIM).inc()
            self.evicted(victim.queue, PREEMPTED)
        for ref, trigger in summary.applied_to:
            if trigger in EVICTING:
                record = result.jobs.get(ref)
                self.evicted(record.queue if record is not None else "", trigger)

    def evicted(self, queue: str, reason: str) -> None:
        """Count one admitted job of ``queue`` evicted for ``reason``. The loop's writes
        (preemptions, the lifecycle's reclaims) are counted by :meth:`observe` already: this is
        for evictions made elsewhere."""
        self.evictions.labels(queue, reason).inc()

    def leading(self) -> bool | None:
        """Whether the attached reconciler leads (may write) now: True with leader election
        off; None before one is attached."""
        if self._failures is None:
            return None
        return self._gate is None or self._gate()

    def failed_passes(self) -> int | None:
        return self._failures() if self._failures is not None else None

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


def oldest_pending(result: CycleResult) -> dict[tuple[str, str], float]:
    """(queue, reason) → the earliest queued-at (Unix seconds) of the pass's Pending
    decisions, those of ``fleetgate_pending_jobs``; a job with no queued-at is left out."""
    oldest: dict[tuple[str, str], float] = {}
    for d in result.decisions:
        if d.action != Action.PENDING:
            continue
        record = result.jobs.get(d.binding)
        if record is None or record.queued_at is None:
            continue
        key, queued = (d.queue, str(d.reason)), record.queued_at.timestamp()
        if queued < oldest.get(key, float("inf")):
            oldest[key] = queued
    return oldest


def gauges_of(result: CycleResult) -> Gauges:
    pending: Tally[tuple[str, str]] = Tally()
    rejected: Tally[tuple[str, str]] = Tally()
    for d in result.decisions:
        if d.action == Action.PENDING:
            pending[d.queue, str(d.reason)] += 1
        elif d.action == Action.REJECT:
            rejected[d.queue, str(d.reason)] += 1
    usage, guarantee, ceiling = {}, {}, {}
    for q in result.queues:
        for target, vec in ((usage, q.usage), (guarantee, q.guarantee), (ceiling, q.max)):
            target.update({(q.name, r): milli / 1000 for r, milli in vec.items()})
    return Gauges(
        pending=dict(pending),
        rejected=dict(rejected),
        admitted={q.name: q.admitted for q in result.queues},
        usage=usage,
        guarantee=guarantee,
        max=ceiling,
        share={q.name: q.share for q in result.queues},
        last_pass=result.now.timestamp(),
        result=result,
    )


class _GaugeCollector(Collector):
    def __init__(self, metrics: ReconcilerMetrics) -> None:
        self._metrics = metrics

    def collect(self) -> Iterator[Metric]:
        leading = self._metrics.leading()
        leader = GaugeMetricFamily(
            "fleetgate_reconcile_leader",
            "1 while this replica leads (holds the Lease within its renew deadline: it runs "
            "passes and writes), 0 for a follower; 1 with leader election off.",
        )
        if leading is not None:
            leader.add_metric([], float(leading))
        yield leader
        failed = self._metrics.failed_passes()
        failures = CounterMetricFamily(
            "fleetgate_reconcile_pass_failures",
            "Passes that failed with an error before the end of their writes (retried with "
            "backoff; the log has the error).",
        )
        if failed is not None:
            failures.add_metric([], failed)
        yield failures
        # one reference: every family comes from the same pass; a follower reports none
        g = self._metrics.gauges if leading is not False else Gauges()
        yield _family(
            "fleetgate_pending_jobs",
            "Jobs waiting in their (leaf) queue after the latest pass, by the reason they wait.",
            ["queue", "reason"],
            g.pending,
        )
        yield _family(
            "fleetgate_rejected_jobs",
            "Jobs that cannot be admitted as written (Reject decisions) after the latest pass.",
            ["queue", "reason"],
            g.rejected,
        )
        yield _family(
            "fleetgate_admitted_active_jobs",
            "Jobs admitted and not finished in the queue's subtree after the latest pass.",
            ["queue"],
            {(k,): v for k, v in g.admitted.items()},
        )
        yield _family(
            "fleetgate_queue_resource_usage",
            "What the queue's subtree holds after the latest pass, in base units (cores, "
            "bytes, devices, pods).",
            ["queue", "resource"],
            g.usage,
        )
        yield _family(
            "fleetgate_queue_nominal_quota",
            "The queue's guarantee (Kueue's nominal quota), in base units.",
            ["queue", "resource"],
            g.guarantee,
        )
        yield _family(
            "fleetgate_queue_max_quota",
            "The queue's max (ceiling, borrowing included), in base units; absent: no max.",
            ["queue", "resource"],
            g.max,
        )
        yield _family(
            "fleetgate_queue_weighted_share",
            "The queue's weighted dominant share of borrowed resources after the latest pass.",
            ["queue"],
            {(k,): v for k, v in g.share.items()},
        )
        last = GaugeMetricFamily(
            "fleetgate_reconcile_last_pass_timestamp_seconds",
            "The time (Unix seconds) the latest pass decided at; absent before the first.",
        )
        if g.last_pass is not None:
            last.add_metric([], g.last_pass)
        yield last
        yield _family(
            "fleetgate_oldest_pending_job_timestamp_seconds",
            "When (Unix seconds) the longest-waiting job of fleetgate_pending_jobs{queue, "
            "reason} was queued (fleetgate.io/queued-at, else its binding's creation).",
            ["queue", "reason"],
            oldest_pending(g.result) if g.result is not None else {},
        )


def _family(
    name: str, help_text: str, labels: list[str], values: Mapping[tuple[str, ...], float]
) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, help_text, labels=labels)
    for key in sorted(values):
        family.add_metric(list(key), values[key])
    return family


__all__ = ["CONTENT_TYPE", "Gauges", "ReconcilerMetrics", "gauges_of", "oldest_pending"]
