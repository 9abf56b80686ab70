"""Frozen values of a loaded policy set: what the scheduler, webhook and CLI read."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from fractions import Fraction

from engine.fleet.affinity import LabelSelector
from engine.policy.cel import CelProgram

Amounts = Mapping[str, Fraction]


class Strategy(StrEnum):
    STRICT_FIFO = "StrictFIFO"
    BEST_EFFORT_FIFO = "BestEffortFIFO"


class WithinQueuePreemption(StrEnum):
    NEVER = "Never"
    LOWER_PRIORITY = "LowerPriority"


class ReclaimPolicy(StrEnum):
    NEVER = "Never"
    ANY = "Any"


class AdmitOn(StrEnum):
    ALL = "All"
    MIN_MEMBER = "MinMember"


class PlacementStrategy(StrEnum):
    BIN_PACK = "BinPack"
    SPREAD = "Spread"


class SpreadBy(StrEnum):
    """What ``strategy: Spread`` divides a splittable job across."""

    CLUSTER = "Cluster"
    REGION = "Region"


class NodeShape(StrEnum):
    """``placement.nodeShape``: what a pod that may fit a node (between a resource-model
    grade's minimum and its maximum) is taken for when no cluster surely fits it."""

    OPTIMISTIC = "Optimistic"
    """Admit it where it may fit; the startup timeout catches a wrong guess (requeued with
    that cluster excluded for a while)."""
    CONSERVATIVE = "Conservative"
    """Wait until some cluster's models promise the room (or its estimator says so)."""


class Unpriced(StrEnum):
    """What ``placement.cost`` does with a cluster that has no well-formed price."""

    EXCLUDE = "Exclude"
    LAST = "Last"


class Enforcement(StrEnum):
    DENY = "Deny"
    WARN = "Warn"
    DRY_RUN = "DryRun"


class FailurePolicy(StrEnum):
    FAIL = "Fail"
    IGNORE = "Ignore"


@dataclass(frozen=True, slots=True)
class Origin:
    """Where a policy object was defined."""

    file: str
    line: int


@dataclass(frozen=True, slots=True)
class Expression:
    """A compiled CEL expression and where it was written."""

    path: str  # e.g. spec.placement.filters[0].expression
    program: CelProgram

    @property
    def source(self) -> str:
        return self.program.source


@dataclass(frozen=True, slots=True)
class QueuePreemption:
    within_queue: WithinQueuePreemption = WithinQueuePreemption.NEVER
    reclaim: ReclaimPolicy = ReclaimPolicy.NEVER


@dataclass(frozen=True, slots=True)
class Queue:
    name: str
    parent: str | None
    priority: int
    weight: float
    strategy: Strategy
    guarantee: Amounts
    max: Amounts
    borrowing_limit: Amounts | None
    lending_limit: Amounts | None
    preemption: QueuePreemption
    origin: Origin
    description: str = ""
    # which namespaces may submit to the queue and its descendants (None: every namespace)
    namespace_selector: LabelSelector | None = None


@dataclass(frozen=True, slots=True)
class FairSharing:
    enabled: bool
    resources: tuple[str, ...]  # empty: every resource named by any queue


@dataclass(frozen=True, slots=True)
class Gang:
    min_member: Expression
    admit_on: AdmitOn
    allow_split: Expression


@dataclass(frozen=True, slots=True)
class NamedFilter:
    name: str
    expression: Expression


@dataclass(frozen=True, slots=True)
class NamedScore:
    name: str
    weight: float
    expression: Expression


@dataclass(frozen=True, slots=True)
class Cost:
    """``spec.placement.cost``: the price per ``resource`` unit (per job when None) is the
    Cluster label ``label``; clusters are ranked cheapest first."""

    label: str
    resource: str | None = None
    unpriced: Unpriced = Unpriced.EXCLUDE


@dataclass(frozen=True, slots=True)
class Placement:
    filters: tuple[NamedFilter, ...]
    scores: tuple[NamedScore, ...]
    strategy: PlacementStrategy
    cost: Cost | None = None
    spread_by: SpreadBy = SpreadBy.CLUSTER
    node_shape: NodeShape = NodeShape.OPTIMISTIC


@dataclass(frozen=True, slots=True)
class Requeue:
    """Durations in seconds."""

    startup_timeout: float
    backoff_base: float
    backoff_max: float
    max_attempts: int
    cluster_not_ready_grace: float
    # after a job is seen running (``fleetgate.io/running-since``), how long its room stays
    # reserved until the Cluster's status counts its pods (Karmada's cluster status period)
    cluster_status_lag: float = 20.0


@dataclass(frozen=True, slots=True)
class Dependencies:
    """``spec.dependencies``: CEL over the job, added to what its template's annotations say
    (``fleetgate.io/after``, ``fleetgate.io/same-cluster-as``). None: not set."""

    after: Expression | None = None  # list(string) of references
    same_cluster_as: Expression | None = None  # string: a reference, "" for none
    cross_namespace: bool = False  # crossNamespace: Allow (default Deny)


@dataclass(frozen=True, slots=True)
class Groups:
    """``spec.groups``: CEL over the job naming its co-admission group, for templates without
    the HyperJob label or ``fleetgate.io/group``. ``name`` None: not set."""

    name: Expression | None = None  # string: the group in the job's namespace, "" for none
    size: Expression | None = None  # int: its members
    min: Expression | None = None  # int: admitted at once; 0 or None: the size


@dataclass(frozen=True, slots=True)
class PreemptionLimits:
    """``spec.preemption``: which admitted jobs may be victims, and how many per cycle. None:
    no limit."""

    min_runtime: float | None = None  # seconds since admission before a job may be a victim
    max_per_job: int | None = None  # preemptions after which a job is not preempted again
    max_victims_per_cycle: int | None = None


@dataclass(frozen=True, slots=True)
class Reservations:
    """``spec.reservations``: jobs waiting ``after`` seconds get room held for them."""

    after: float
    max: int = 4


@dataclass(frozen=True, slots=True)
class Ordering:
    """``spec.ordering``: ``late_after`` seconds since a job was queued, after which it goes
    behind the jobs queued less long (None: not set; FIFO throughout)."""

    late_after: float | None = None


@dataclass(frozen=True, slots=True)
class SchedulingPolicy:
    name: str
    queue: Expression
    tenant: Expression
    priority: Expression
    fair_sharing: FairSharing
    gang: Gang
    placement: Placement
    requeue: Requeue
    scope: Expression
    origin: Origin | None  # None for the built-in default
    dependencies: Dependencies = Dependencies()
    groups: Groups = Groups()
    preemption: PreemptionLimits = PreemptionLimits()
    reservations: Reservations | None = None
    ordering: Ordering = Ordering()


@dataclass(frozen=True, slots=True)
class Validation:
    expression: Expression
    message: str | None
    message_expression: Expression | None
    reason: str


@dataclass(frozen=True, slots=True)
class AdmissionPolicy:
    name: str
    match: Expression
    validations: tuple[Validation, ...]
    enforcement: Enforcement
    failure_policy: FailurePolicy
    origin: Origin
