"""The built-in ``baseline`` that ``fleetgate simulate --compare baseline`` measures fleetgate
against: what volcano-global does across a Karmada fleet. It lives beside the cycle because it
reads jobs as the cycle does and decides with the cycle's reasons.

* order: job priority (higher first); among jobs of one priority, round-robin across queues
  (queues by name, one job each in turn), FIFO within a queue (enqueue time, then uid);
* quota: a queue's ``max`` is its capability (Volcano's ``capability``): usage + demand ≤ max
  on the job's own queue, no guarantee, no borrowing, no fair share, no preemption;
* placement: a capability-only check, as Karmada's general estimator on
  ``resourceSummary`` does: a Ready cluster that serves the kind, whose taints the job
  tolerates, that the binding's cluster affinity allows and the job is not excluded from, and
  whose free totals (allocatable − allocated − allocating, minus what this cycle placed) cover
  the whole job. No node shape: a gang of 8-GPU pods may be sent where no node has 8 GPUs
  free, and then waits on the member until its startup timeout requeues it. The cluster with
  the most free of the job's scarcest resource (GPUs, else cpu) is chosen, ties by name;
* dependencies (``fleetgate.io/after``) are not known to it.

Same signature as ``run_cycle`` and the same ``classify`` of bindings (the SchedulingPolicy maps
each job to its queue, tenant and priority), so the simulation loop applies its decisions alike.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict

from engine import annotations as ann
from engine import vectors
from engine.cycle import explain
from engine.cycle.jobs.cache import JobCache
from engine.cycle.jobs.model import PendingJob
from engine.cycle.jobs.reading import classify
from engine.cycle.model import CycleResult, Decision
from engine.cycle.reasons import Reason
from engine.fleet.model import Snapshot, affinity_allows, tolerates
from engine.policy.policyset import PolicySet

VERSION = "baseline"
GPU = "nvidia.com/gpu"


class Baseline:
    """The baseline as a cycle function; it keeps the round-robin's place between cycles
    (the queue after the one that was served last goes first), as a scheduler's loop does."""

    def __init__(self) -> None:
        self.last_served = ""

    def __call__(
        self,
        snapshot: Snapshot,
        policies: PolicySet,
        now: dt.datetime,
        cache: JobCache | None = None,
    ) -> CycleResult:
        cache = cache if cache is not None else JobCache()
        pending, admitted, backoff, _ = classify(snapshot, policies, cache, now)
        free = {
            c.name: vectors.capacity_milli(c.free)
            for c in sorted(snapshot.clusters, key=lambda c: c.name)
        }
        usage: dict[str, vectors.Vec] = defaultdict(dict)
        for job in admitted:
            vectors.add_into(usage[job.mapped.queue], job.demand)
            for name in job.in_flight:
                if name in free:
                    vectors.add_into(free[name], job.usage.get(name, {}), -1)
        decisions: list[Decision] = [explain.for_backoff(b) for b in backoff]
        for job in self._round_robin(pending, decisions):
            decision = _decide(job, snapshot, policies, free, usage, now)
            if decision.reason == Reason.ADMITTED:
                self.last_served = job.mapped.queue
            decisions.append(decision)
        return CycleResult(VERSION, now, tuple(decisions), (), {"pending": len(pending)})

    def _round_robin(
        self, pending: list[PendingJob], decisions: list[Decision]
    ) -> list[PendingJob]:
        by_priority: dict[int, dict[str, list[PendingJob]]] = defaultdict(lambda: defaultdict(list))
        for job in sorted(pending, key=lambda j: (j.order_key, j.ref)):
            if job.problem is not None:
                decisions.append(explain.for_job(job, *job.problem))
                continue
            by_priority[job.mapped.priority][job.mapped.queue].append(job)
        ordered: list[PendingJob] = []
        for priority in sorted(by_priority, reverse=True):
            names = sorted(by_priority[priority])
            after = [n for n in names if n > self.last_served]
            names = after + [n for n in names if n <= self.last_served]
            queues = [by_priority[priority][n] for n in names]
            for i in range(max(len(q) for q in queues)):
                ordered.extend(q[i] for q in queues if i < len(q))
        return ordered


def _decide(
    job: PendingJob,
    snapshot: Snapshot,
    policies: PolicySet,
    free: dict[str, vectors.Vec],
    usage: dict[str, vectors.Vec],
    now: dt.datetime,
) -> Decision:
    queue = policies.queue(job.mapped.queue)
    if queue is None:
        return explain.for_job(job, Reason.QUEUE_NOT_FOUND, f"queue {job.mapped.queue!r}")
    capability = vectors.capacity_milli(queue.max)
    held = usage[job.mapped.queue]
    over = [r for r, cap in capability.items() if held.get(r, 0) + job.demand.get(r, 0) > cap]
    if over:
        alone = [r for r in over if job.demand.get(r, 0) > capability[r]]
        reason = Reason.EXCEEDS_MAX_QUOTA if alone else Reason.WAITING_FOR_QUOTA
        return explain.for_job(job, reason, f"queue capability exceeded: {', '.join(over)}")
    excluded = ann.parse_exclusions(job.binding.annotations.get(ann.EXCLUDED_CLUSTERS, ""))
    placement = job.binding.placement
    kind = (job.binding.resource.api_version, job.binding.resource.kind)
    candidates = [
        c
        for c in sorted(snapshot.clusters, key=lambda c: c.name)
        if c.ready
        and c.serves(*kind)
        and not (c.name in excluded and excluded[c.name] > now)
        and tolerates(placement.tolerations if placement else (), c.taints)
        and affinity_allows(placement.affinity if placement else None, c)
    ]
    if not candidates:
        return explain.for_job(job, Reason.NO_CANDIDATE_CLUSTER, "no Ready cluster serves it")
    scarce = GPU if job.demand.get(GPU, 0) > 0 else "cpu"
    fits = [
        c.name
        for c in candidates
        if all(free[c.name].get(r, 0) >= need for r, need in job.demand.items())
    ]
    if not fits:
        never = all(
            any(vectors.capacity_milli(c.allocatable).get(r, 0) < n for r, n in job.demand.items())
            for c in candidates
        )
        reason = Reason.GANG_TOO_LARGE if never else Reason.NO_CLUSTER_FITS
        return explain.for_job(job, reason, "no cluster has the free capacity in total")
    chosen = min(fits, key=lambda n: (-free[n].get(scarce, 0), n))
    vectors.add_into(free[chosen], job.demand, -1)
    vectors.add_into(usage[job.mapped.queue], job.demand)
    message = f"capability fits {chosen} (totals only, no node shape)"
    return explain.for_job(job, Reason.ADMITTED, message, assignments=((chosen, job.pods),))
