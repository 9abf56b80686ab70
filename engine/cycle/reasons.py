"""The closed set of reason codes a scheduling decision carries, and what each action means.

Every job the cycle does not admit gets exactly one reason: the first check it failed, in the
order the cycle runs them (the order of ``Reason`` below, after the admitted/preempted codes).
"""

from __future__ import annotations

from enum import StrEnum


class Action(StrEnum):
    ADMIT = "Admit"
    """Bind the job to the listed clusters now."""
    PENDING = "Pending"
    """Keep the job suspended; it may be admitted by a later cycle."""
    PREEMPT = "Preempt"
    """Evict this admitted job (whole) so that a waiting job can run; it is requeued."""
    REJECT = "Reject"
    """The job as written can never be admitted; it stays suspended until it is changed."""


class Reason(StrEnum):
    ADMITTED = "Admitted"
    """Quota and a placement were found; the clusters are listed."""
    PREEMPTED = "Preempted"
    """Chosen as a victim: its queue borrowed the preemptor's guarantee (reclaim), or it has a
    lower priority in the preemptor's own queue."""
    PREEMPTING = "Preempting"
    """Victims were chosen that make the job fit; it is nominated to a cluster and waits for
    them to terminate."""
    BACKOFF = "Backoff"
    """The job was requeued after a failure and waits out its backoff."""
    GAVE_UP = "GaveUp"
    """The job failed ``requeue.maxAttempts`` times (``fleetgate.io/gave-up`` says how); it is
    not admitted again until that annotation is removed."""
    UNKNOWN_DEMAND = "UnknownDemand"
    """The job's demand cannot be read from its template or its binding."""
    WAITING_FOR_TEMPLATE = "WaitingForTemplate"
    """The job's binding is seen but not its template, and the binding does not carry the
    demand. Karmada deletes a binding with its template, so this passes: the watch of the
    template's kind lags the bindings'. Never a rejection."""
    POLICY_EVAL_ERROR = "PolicyEvalError"
    """A SchedulingPolicy expression failed on this job (queue, tenant, priority, gang)."""
    INVALID_QUEUE_NAME = "InvalidQueueName"
    """The job maps to a queue name that is not a Kubernetes name (a DNS-1123 label, as every
    queue's is): no queue can have it. The name is never used, and echoed escaped and capped."""
    UNKNOWN_PRIORITY_CLASS = "UnknownPriorityClass"
    """The job names a PriorityClass that does not exist (Kubernetes would reject its pods)."""
    QUEUE_NOT_FOUND = "QueueNotFound"
    """The job maps to a queue that is not defined."""
    QUEUE_NOT_LEAF = "QueueNotLeaf"
    """The job maps to a queue with child queues; jobs wait in leaf queues only."""
    QUEUE_NOT_ALLOWED = "QueueNotAllowed"
    """The job's namespace may not use its queue: the labels of its Namespace do not match
    the ``spec.namespaceSelector`` of the queue or of an ancestor."""
    INVALID_DEPENDENCY = "InvalidDependency"
    """``fleetgate.io/after``/``same-cluster-as`` (or the policy's ``dependencies``) cannot be
    read: an unknown condition, an empty or malformed reference; or it names a job of another
    namespace, which ``spec.dependencies.crossNamespace`` does not allow."""
    DEPENDENCY_CYCLE = "DependencyCycle"
    """The job is on a cycle of dependencies among waiting jobs: none of them can ever start."""
    DEPENDENCY_FAILED = "DependencyFailed"
    """A dependency can never be met: ``succeeded`` on a job that failed, ``failed`` on one
    that succeeded."""
    DEPENDENCY_NOT_FOUND = "DependencyNotFound"
    """A job the job depends on is not in the fleet (not created yet, or deleted), or the
    reference matches several jobs; it may be created (or named better) later."""
    WAITING_FOR_DEPENDENCY = "WaitingForDependency"
    """A job it depends on has not ended as required yet (or, for ``same-cluster-as``, has not
    been placed yet). It takes no turn in its queue and blocks no StrictFIFO queue."""
    INVALID_GROUP = "InvalidGroup"
    """The job's co-admission group cannot be formed as written: its members map to different
    queues, disagree on its size, outnumber it, or a group annotation cannot be read."""
    WAITING_FOR_GROUP = "WaitingForGroup"
    """Not every member of the job's group exists yet (or enough of them cannot be considered
    now). Like a job waiting for a dependency, it takes no turn in its queue."""
    EXCEEDS_MAX_QUOTA = "ExceedsMaxQuota"
    """The job alone needs more than its queue's (or an ancestor's) max: it can never fit."""
    GANG_TOO_LARGE = "GangTooLarge"
    """No cluster the job may use could hold its gang even when empty."""
    NEVER_FITS = "NeverFits"
    """A pod of the job is larger than any node of every candidate cluster, even empty (the
    clusters' ``fleetgate.io/node-shapes``, else their allocatable): it can never start. A
    fleet change that makes it fit (a bigger node) admits it on a later cycle."""
    GROUP_TOO_LARGE = "GroupTooLarge"
    """The group's minimum could never fit at once, even on empty clusters: too few of its
    members fit any cluster they may use (with spread, too few distinct clusters)."""
    BLOCKED_BY_HEAD = "BlockedByHead"
    """A StrictFIFO queue's head job does not fit, so the jobs behind it wait."""
    WAITING_FOR_QUOTA = "WaitingForQuota"
    """Admitting the job now would exceed its queue's share: max of an ancestor, or guarantee
    plus what can be borrowed."""
    NO_CANDIDATE_CLUSTER = "NoCandidateCluster"
    """No cluster passes the job's placement (Ready, affinity, taints, kind served, filters)."""
    NO_CLUSTER_FITS = "NoClusterFits"
    """Candidate clusters exist but none has the free capacity or node shape for the gang now."""
    RESERVED = "Reserved"
    """The job has waited past ``spec.reservations.after`` and fits no cluster yet: room on the
    cluster where it can start soonest is held for it, and smaller jobs may not take it."""
    RESERVED_FOR = "ReservedFor"
    """The job would fit, but only in room held for a job that has waited longer (``Reserved``);
    it waits so that the held room can grow into a start for that job."""


NEVER = frozenset(
    {
        Reason.GAVE_UP,
        Reason.UNKNOWN_DEMAND,
        Reason.INVALID_QUEUE_NAME,
        Reason.QUEUE_NOT_ALLOWED,
        Reason.INVALID_DEPENDENCY,
        Reason.DEPENDENCY_CYCLE,
        Reason.DEPENDENCY_FAILED,
        Reason.EXCEEDS_MAX_QUOTA,
        Reason.GANG_TOO_LARGE,
        Reason.NEVER_FITS,
        Reason.INVALID_GROUP,
        Reason.GROUP_TOO_LARGE,
    }
)
"""Reasons that make a decision Reject rather than Pending."""
