"""The cycle's reading of one managed binding, as values: what the SchedulingPolicy says about
it (``Mapped``), and the job as the cycle schedules it (``PendingJob``), counts it
(``AdmittedJob``), lets it wait (``Backoff``) or no longer counts it (``Finished``). Built by
``engine.cycle.jobs.reading``; kept between cycles by ``engine.cycle.jobs.cache``."""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from engine.cycle.jobs.values import EPOCH
from engine.cycle.reasons import Reason
from engine.fleet.model import BindingView
from engine.policy import cel
from engine.policy.bounded import BoundedMemo
from engine.policy.memo import MemoEvaluator
from engine.policy.model import SchedulingPolicy
from engine.vectors import Vec
from engine.workloads.model import Workload


@dataclass(frozen=True, slots=True)
class Mapped:
    """What the SchedulingPolicy says about one job."""

    queue: str
    tenant: str
    priority: int
    min_member: int
    allow_split: bool
    error: str = ""  # "spec.<field>: <CEL error>" when an expression failed
    # spec.dependencies of the SchedulingPolicy, when it sets them (see ``dependencies``)
    after: tuple[str, ...] = ()
    same_cluster_as: str = ""
    group: tuple[str, int, int] | None = None  # spec.groups: (name, size, min), when named


class MappingEvaluators(NamedTuple):
    """The SchedulingPolicy's mapping expressions, ready to evaluate (memoised): ``queue``
    first, then ``tenant``, ``priority`` and ``gang``; ``dependencies`` and ``groups`` when the
    policy sets them."""

    first: MemoEvaluator
    rest: MemoEvaluator
    dependencies: MemoEvaluator | None
    groups: MemoEvaluator | None

    @classmethod
    def of(
        cls, s: SchedulingPolicy, memo: BoundedMemo | None = None, volatile: Collection[str] = ()
    ) -> MappingEvaluators:
        """Evaluators with a memo each, or sharing ``memo``; ``volatile``: see MemoEvaluator."""
        rest = [s.tenant, s.priority, s.gang.min_member, s.gang.allow_split]
        d, g = s.dependencies, s.groups
        after = [e.program for e in (d.after, d.same_cluster_as) if e is not None]
        grouped = [e.program for e in (g.name, g.size, g.min) if e is not None]

        def evaluator(programs: list[cel.CelProgram]) -> MemoEvaluator:
            return MemoEvaluator(programs, cel.MAPPING_VARS, memo=memo, volatile=volatile)

        return cls(
            evaluator([s.queue.program]),
            evaluator([e.program for e in rest]),
            evaluator(after) if after else None,
            evaluator(grouped) if g.name is not None else None,
        )


@dataclass(frozen=True, slots=True)
class PodGroup:
    requests: Vec  # per pod, milli-units, including pods: 1000
    count: int


@dataclass(frozen=True, slots=True)
class PendingJob:
    binding: BindingView
    workload: Workload | None
    mapped: Mapped
    enqueued_at: dt.datetime
    pods: tuple[PodGroup, ...]  # what must be placed: the whole gang or its minimum
    demand: Vec  # the sum of pods
    problem: tuple[Reason, str] | None  # why it cannot even be considered
    values: Mapping[str, Any] = field(repr=False, compare=False)  # the CEL `job` variable
    ref: str = ""  # namespace/name of the binding
    # Within a queue: higher priority first, then earlier enqueue time, then uid.
    order_key: tuple[int, dt.datetime, str] = (0, EPOCH, "")
    workload_ref: str = ""  # Kind/namespace/name of the template, as decisions name it
    pod_key: tuple = ()  # ``pod_key(pods)``: what caches of fit answers are keyed by
    depends: bool = False  # it declares dependencies (``engine.cycle.dependencies``)
    grouped: bool = False  # it may be in a co-admission group (``engine.cycle.groups.formation``)


@dataclass(frozen=True, slots=True)
class AdmittedJob:
    binding: BindingView
    mapped: Mapped
    admitted_at: dt.datetime
    usage: Mapping[str, Vec]  # cluster → what the job holds there
    pods: Mapping[str, tuple[PodGroup, ...]]  # cluster → its pods there
    in_flight: frozenset[str]  # clusters whose status does not show the job yet
    ref: str = ""
    demand: Vec = field(default_factory=dict)  # the sum over clusters


@dataclass(frozen=True, slots=True)
class Backoff:
    binding: BindingView
    mapped: Mapped | None
    until: dt.datetime


@dataclass(frozen=True, slots=True)
class Finished:
    """A placed job whose clusters all report it finished: it holds nothing."""

    binding: BindingView
    mapped: Mapped
