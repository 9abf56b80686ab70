"""The admitted jobs a cycle's preemption may take, in victim order, with the work each would
lose: ``groups.preemptible`` (no member of a group), then ``protection.preemptible`` (the
limits), the jobs that use something, ``protection.work_lost`` and ``victims.victim_order``.

What depends on a job alone (in a group or not, times preempted, dominant share of the fleet,
admission time) is kept from one cycle to the next (``Candidates``, in the ``JobCache``) while
the snapshot's workloads and the fleet's capacity are the very same: a warm cycle pays per
job for what depends on ``now`` only. The answers are those of the functions named above
(tests/cycle/test_victim_candidates.py).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from engine.cycle.groups.formation import key_of
from engine.cycle.jobs.model import AdmittedJob
from engine.cycle.preemption.protection import dominant_share, preemptions
from engine.fleet.model import Snapshot
from engine.policy.model import PreemptionLimits


class Facts(NamedTuple):
    job: AdmittedJob  # held, so that the id it is kept by stays its own
    grouped: bool  # a member of a group: never a victim
    preemptions: int
    share: float  # dominant share of the capacity
    since: float  # minus the admission's timestamp (``victim_order``)


class Candidates:
    __slots__ = ("_facts", "_source")

    def __init__(self) -> None:
        self._facts: dict[int, Facts] = {}  # id(job) → its facts
        self._source: tuple[object, tuple[tuple[str, int], ...]] = (None, ())

    def ordered(
        self,
        admitted: Sequence[AdmittedJob],
        snapshot: Snapshot,
        limits: PreemptionLimits,
        now: dt.datetime,
        capacity: Mapping[str, int],
    ) -> tuple[list[AdmittedJob], dict[str, float]]:
        """(the victims preemption may take, in victim order; binding ref → work lost)."""
        amounts = tuple(capacity.items())
        if self._source[0] is not snapshot.workloads or self._source[1] != amounts:
            self._facts, self._source = {}, (snapshot.workloads, amounts)
        facts, kept = self._facts, {}
        most, runtime = limits.max_per_job, limits.min_runtime
        jobs: list[AdmittedJob] = []
        since: list[float] = []
        lost_of: dict[str, float] = {}
        for job in admitted:
            found = facts.get(id(job))
            if found is None or found.job is not job:
                found = _facts(job, snapshot, capacity)
            kept[id(job)] = found
            if found.grouped or (most is not None and found.preemptions >= most):
                continue
            ran = (now - job.admitted_at).total_seconds()
            if (runtime is not None and ran < runtime) or not job.usage:
                continue
            jobs.append(job)
            since.append(found.since)
            lost_of[job.ref] = found.share * max(ran, 0.0)
        self._facts = kept  # only the jobs of this cycle
        keys = [
            (j.mapped.priority, lost_of[j.ref], s, j.binding.uid)
            for j, s in zip(jobs, since, strict=True)
        ]
        return [jobs[i] for i in sorted(range(len(jobs)), key=keys.__getitem__)], lost_of


def _facts(job: AdmittedJob, snapshot: Snapshot, capacity: Mapping[str, int]) -> Facts:
    grouped = key_of(snapshot.workload_for(job.binding), job.mapped) is not None
    share = dominant_share(job, capacity)
    return Facts(job, grouped, preemptions(job), share, -job.admitted_at.timestamp())
