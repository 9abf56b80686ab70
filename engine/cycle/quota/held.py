"""What the admitted jobs hold, summed per queue and kept from one cycle to the next.

Step 2 of a cycle adds every admitted job's demand to the quota tree. Between two cycles
few jobs come or go, so ``HeldSums`` keeps each queue's sum and count and brings them through
the jobs admitted and gone since the last cycle (jobs are compared by identity: an
``AdmittedJob`` is immutable, and one read again is a new object, counted as gone and come).
What it returns is what adding the jobs one by one, in order, would give: the same sums
(exact integers), the same counts, and the resources and queues in the order the jobs first
name them (``Held.kinds``), so that ``QuotaTree.add_all`` leaves the same tree.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import NamedTuple

from engine import vectors
from engine.cycle.jobs.model import AdmittedJob
from engine.cycle.quota.tree import QuotaNode, QuotaTree
from engine.vectors import Vec

Kind = tuple[str, tuple[str, ...]]  # a job's queue and the resources its demand names, in order


class Held(NamedTuple):
    kinds: list[Kind]  # each (queue, resources) once, in the order the jobs first have it
    sums: dict[str, Vec]  # queue → its jobs' demand summed (a resource none has may read 0)
    counts: dict[str, int]  # queue → its jobs
    in_flight: list[AdmittedJob]  # the jobs with a cluster in flight, in order


class HeldSums:
    """``held(admitted)`` of successive cycles, paying for the jobs that changed."""

    __slots__ = ("_counts", "_flying", "_jobs", "_kind_of", "_kinds", "_known", "_sums")

    def __init__(self) -> None:
        self._jobs: dict[int, AdmittedJob] = {}  # id → the job (held, so its id stays its)
        self._kind_of: dict[int, int] = {}  # id(job) → index of its kind in ``_kinds``
        self._kinds: list[Kind] = []
        self._known: dict[Kind, int] = {}
        self._sums: dict[str, Vec] = {}
        self._counts: dict[str, int] = {}
        self._flying: set[int] = set()  # ids of the jobs with a cluster in flight

    def held(self, admitted: Sequence[AdmittedJob]) -> Held:
        jobs = dict(zip(map(id, admitted), admitted, strict=True))
        if len(jobs) != len(admitted):  # one job twice: no sums kept, as it would add twice
            return _summed(admitted)
        for key in self._jobs.keys() - jobs.keys():
            self._drop(key)
        for key in jobs.keys() - self._jobs.keys():
            self._take(key, jobs[key])
        order = dict.fromkeys(map(self._kind_of.__getitem__, jobs))  # C loops: no per-job code
        flying = [j for j in admitted if id(j) in self._flying] if self._flying else []
        counts = self._counts
        return Held([self._kinds[k] for k in order], self._sums, counts, flying)

    def _take(self, key: int, job: AdmittedJob) -> None:
        queue = job.mapped.queue
        kind = (queue, tuple(job.demand))
        index = self._known.get(kind)
        if index is None:
            index = self._known[kind] = len(self._kinds)
            self._kinds.append(kind)
        self._jobs[key] = job
        self._kind_of[key] = index
        vectors.add_into(self._sums.setdefault(queue, {}), job.demand)
        self._counts[queue] = self._counts.get(queue, 0) + 1
        if job.in_flight:
            self._flying.add(key)

    def _drop(self, key: int) -> None:
        job = self._jobs.pop(key)
        del self._kind_of[key]
        queue = job.mapped.queue
        self._counts[queue] -= 1
        if self._counts[queue] == 0:  # start the queue's sums anew
            del self._counts[queue]
            del self._sums[queue]
        else:
            vectors.add_into(self._sums[queue], job.demand, -1)
        self._flying.discard(key)
        if len(self._kinds) > 4 * len(self._jobs) + 64:  # kinds of jobs long gone: forget them
            self._forget()

    def _forget(self) -> None:
        used = sorted(set(self._kind_of.values()))
        renumber = {old: new for new, old in enumerate(used)}
        self._kinds = [self._kinds[i] for i in used]
        self._known = {kind: i for i, kind in enumerate(self._kinds)}
        self._kind_of = {key: renumber[i] for key, i in self._kind_of.items()}


def add_held(quota: QuotaTree, held: Held) -> Counter[str]:
    """Add what the admitted jobs hold to ``quota`` (a queue it does not know holds nothing)
    and return how many jobs each queue holds, as one ``add`` per job in order would."""
    kinds: list[tuple[QuotaNode, tuple[str, ...]]] = []
    counts: Counter[str] = Counter()
    for queue, resources in held.kinds:
        node = quota.node(queue)
        if node is not None:
            kinds.append((node, resources))
            counts.setdefault(queue, held.counts[queue])
    quota.add_sums(kinds, held.sums)
    return counts


def _summed(admitted: Sequence[AdmittedJob]) -> Held:
    """``HeldSums.held`` without keeping anything."""
    kinds: dict[Kind, None] = {}
    sums: dict[str, Vec] = {}
    counts: dict[str, int] = {}
    for job in admitted:
        queue = job.mapped.queue
        kinds[(queue, tuple(job.demand))] = None
        vectors.add_into(sums.setdefault(queue, {}), job.demand)
        counts[queue] = counts.get(queue, 0) + 1
    return Held(list(kinds), sums, counts, [j for j in admitted if j.in_flight])
