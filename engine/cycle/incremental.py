"""A cycle continued for jobs that arrive after it ran: ``Cycle.arrive``.

``fleetgate bench`` times it, and tests/cycle/test_incremental.py checks it against full cycles.
"""

from __future__ import annotations

import bisect

from engine.cycle import explain
from engine.cycle.cycle import FullCycle, binding_key
from engine.cycle.groups import formation as groups
from engine.cycle.jobs.model import Backoff, PendingJob
from engine.cycle.jobs.reading import read_job
from engine.cycle.model import Decision
from engine.cycle.reasons import NEVER, Reason
from engine.fleet.model import BindingView, Snapshot


class Cycle(FullCycle):
    """The working state of one cycle; ``arrive`` continues it for jobs that came later."""

    def arrive(self, snapshot: Snapshot, binding: BindingView) -> Decision | None:
        """Decide a job that arrived after ``run``, against the state the cycle ended in.

        The decision is the one a full cycle on ``snapshot`` gives the job when that cycle
        considers it after every job decided so far: nothing but arrivals changed, and within
        and between such cycles capacity and quota only shrink, so every job that waited still
        waits. Earlier decisions are never revised, so a job that goes ahead of one of them in
        its queue (a higher priority, an earlier enqueue time) is decided as its queue's latest
        (behind a blocked StrictFIFO head, say); the next full cycle gives it its place. A job
        in backoff gets its ``Backoff`` decision. None: not a pending job (not managed, or
        admitted). tests/cycle/test_incremental.py checks this against full cycles.
        """
        job = read_job(snapshot, self.policies, self.cache, self.now, binding)
        if isinstance(job, Backoff):
            bisect.insort(self.backoff, job, key=binding_key)
            return self._placed(explain.for_backoff(job))
        if not isinstance(job, PendingJob):
            return None
        self.snapshot = self.placer.snapshot = snapshot
        self.pending.append(job)
        start = len(self.decisions)  # the job's decision; a preemptor's victims follow it
        problem = self._screen(job)
        queue = job.mapped.queue
        if problem is not None:
            self._decide(job, *problem)
        elif not self._eligible(job, None):
            pass
        elif job.grouped and groups.key_of(job.workload, job.mapped):  # by the next full cycle
            message = "a member of a group: decided with the group by the next full cycle"
            self.decisions.append(explain.for_job(job, Reason.WAITING_FOR_GROUP, message))
        elif queue in self.blocked:
            self._block((job,), self.blocked[queue])
        else:
            admitted = self._consider(job, self.quota.nodes[queue])
            if not admitted and self.decisions[start].reason not in NEVER and self._strict(queue):
                self.blocked[queue] = job  # it waits: it is the head later arrivals wait behind
        decision = self.decisions[start] = self._placed(self.decisions[start])
        return decision

    def _placed(self, decision: Decision) -> Decision:
        """``decision`` with its place among its queue's waiting jobs, those in backoff too."""
        queue = decision.queue
        held = [self.backoff_place(b) for b in self.backoff if b.mapped and b.mapped.queue == queue]
        jobs = [*self.waiting.get(queue, ()), *held]
        return explain.with_positions([decision], {queue: jobs})[0]
