"""The lifecycle of admitted jobs: when they run, and the failures that requeue them.

``review(snapshot, policies, now, objects)`` is pure: from the snapshot's managed bindings that
are placed (``spec.clusters``, no ``fleetgate.io/readmit``), the SchedulingPolicy's ``requeue``
settings and ``now``, it returns what to write (``engine.enforce.plan.plan_transition`` turns each
value into merge patches, ``reconciler.apply.Applier.transition`` sends them):

- :class:`Started`: the job runs on every cluster it was placed on and has not finished there
  (see :func:`running_on`): ``fleetgate.io/running-since`` is set once; the startup timeout no
  longer applies to this admission.
- :class:`Reclaim`: the first of these that holds, in this order, reclaims the whole job:

  1. ``FailedOnMember``: a cluster reports the job failed (a terminal failure in
     ``aggregatedStatus[].status``, as ``engine.fleet.bindings.job_outcome`` reads each kind);
  2. ``Unhealthy``: Karmada's health of the job on a cluster is ``Unhealthy`` (applied, not
     finished) after the job ran (``running-since``; before, the startup timeout applies);
  3. ``ClusterNotReady``: a cluster's ``Ready`` condition has been other than True for
     ``requeue.clusterNotReadyGrace`` or longer (since its ``lastTransitionTime``; a cluster
     without that time, or missing from the snapshot, is not acted on);
  4. ``StartupTimeout``: the job never ran (no ``running-since``) and is not running on every
     cluster ``requeue.startupTimeout`` after its admission (``admitted-at``, else the binding's
     ``Scheduled`` time; without either there is no timeout).

  The job's clusters are emptied (Karmada removes their Works), the binding stays suspended,
  ``attempts`` grows by one, and the job waits ``min(backoffBase·2^(attempts−1), backoffMax)``
  (``backoff-until``). The clusters that failed it are excluded for ``backoffMax`` from now:
  the next attempt, which starts before the backoff can exceed that, goes elsewhere, and once
  backoffs reach their cap, exclusions from early attempts have expired, so a small fleet is
  never emptied for good. Expired exclusions are dropped on the same write. ``queued-at`` is
  reset to ``now`` (Kueue's default requeuing timestamp, ``Eviction``): a failed job goes
  behind the jobs that waited meanwhile, so a crash-looping job cannot hold the head of a
  StrictFIFO queue. The admission annotations are cleared.

  When this failure is attempt ``maxAttempts`` (the job has been requeued ``maxAttempts − 1``
  times), fleetgate gives up: the same write without a backoff, plus ``fleetgate.io/gave-up``
  saying why; the cycle then rejects the job with ``GaveUp`` until a user removes it.

A finished job (every cluster reports a terminal state, none failed) is not reclaimed: the
cycle no longer counts it, so its quota and any in-flight reservation are free in the next
cycle. A preemption is not a failure (``engine.enforce.plan`` evicts victims without counting).

``Review.due`` is the next moment at which time alone changes what a pass decides (a backoff
or an exclusion ends, a startup timeout or a NotReady grace runs out): the loop wakes then.
docs/scheduling-cycle.md ("Failure and requeue") states the rules for users. The triggers the
simulator observes itself (``failed_on_member``, ``not_ready_past_grace``, ``startup_overdue``)
and ``reclaim`` are public: it applies the same rules to what its members report.

A little past 400 lines: one module for the lifecycle's rules, each one function.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from engine import annotations as ann
from engine.enforce.memberstatus import failure_detail, member_statuses, status_says_running
from engine.fleet.model import BindingView, ClusterView, Snapshot
from engine.policy.model import Requeue
from engine.policy.policyset import PolicySet
from engine.requeue import after_failure

DETAIL_LIMIT = 512  # characters of a member's failure message kept in messages


class Trigger(StrEnum):
    """Why an admitted job is reclaimed (the order :func:`review` checks them in)."""

    FAILED_ON_MEMBER = "FailedOnMember"
    """A cluster reports the job failed."""
    UNHEALTHY = "Unhealthy"
    """Karmada reports the job Unhealthy on a cluster."""
    CLUSTER_NOT_READY = "ClusterNotReady"
    """A cluster the job was placed on has not been Ready for ``clusterNotReadyGrace``."""
    STARTUP_TIMEOUT = "StartupTimeout"
    """The job was not running within ``startupTimeout`` of its admission."""


@dataclass(frozen=True, slots=True)
class Started:
    """The job was seen running on all its clusters for the first time since its admission."""

    binding: str  # namespace/name (name alone when cluster-scoped)
    since: dt.datetime
    clusters: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Confirm:
    """An admission whose spec patch went through but whose ``Scheduled=True`` condition (and
    Admitted Event) did not: the status write met 409s, or the reconciler died in between.
    Written again, level-triggered, so ``kubectl describe`` always tells the admission."""

    binding: str
    clusters: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Reclaim:
    """Take the job off its clusters and requeue it (or give up on it)."""

    binding: str
    trigger: Trigger
    clusters: tuple[str, ...]  # where it failed: excluded until ``excluded[name]``
    message: str  # why, with numbers
    attempts: int  # failed attempts so far, this one included
    max_attempts: int
    backoff: dt.timedelta  # zero when giving up
    backoff_until: dt.datetime | None  # None when giving up
    excluded: tuple[tuple[str, dt.datetime], ...]  # every exclusion in force, by name
    queued_at: dt.datetime

    @property
    def gave_up(self) -> bool:
        return self.backoff_until is None

    def summary(self) -> str:
        """What the Event and the give-up annotation say."""
        if self.backoff_until is None:
            return (
                f"gave up after {self.attempts} failed attempts (requeue.maxAttempts "
                f"{self.max_attempts}); the last: {self.trigger}: {self.message}"
            )
        names = ", ".join(self.clusters)
        until = dict(self.excluded).get(self.clusters[0]) if self.clusters else None
        return (
            f"{self.trigger}: {self.message}; attempt {self.attempts} of {self.max_attempts}, "
            f"back in its queue after {_duration(self.backoff)} "
            f"({ann.format_time(self.backoff_until)})"
            + (f"; {names} excluded until {ann.format_time(until)}" if until else "")
        )


@dataclass(frozen=True, slots=True)
class Review:
    started: tuple[Started, ...] = ()
    reclaims: tuple[Reclaim, ...] = ()
    confirms: tuple[Confirm, ...] = ()
    # the next moment after ``now`` at which time alone changes what a pass decides: a
    # backoff or an exclusion ends, a startup timeout or a NotReady grace runs out
    due: dt.datetime | None = None

    @property
    def reclaimed(self) -> frozenset[str]:
        return frozenset(r.binding for r in self.reclaims)

    def transitions(self, decided: Iterable[str] = ()) -> tuple[Started | Reclaim | Confirm, ...]:
        """The writes in binding order, reclaims first; a ``Started`` or ``Confirm`` of a
        binding the cycle decided something about (a preemption victim) is left for a later
        pass."""
        skip = frozenset(decided)
        confirms = tuple(c for c in self.confirms if c.binding not in skip)
        skip |= {c.binding for c in confirms}  # one write per binding and pass: Started next time
        started = tuple(s for s in self.started if s.binding not in skip)
        return self.reclaims + confirms + started


ObjectLookup = Callable[[str], Mapping[str, Any] | None]


def review(
    snapshot: Snapshot, policies: PolicySet, now: dt.datetime, objects: ObjectLookup
) -> Review:
    """Every admitted managed binding's transition at ``now``. ``objects(ref)`` is the binding
    object of ``ref`` (for the members' job status Karmada aggregates); None when unknown."""
    requeue = policies.scheduling.requeue
    started: list[Started] = []
    reclaims: list[Reclaim] = []
    confirms: list[Confirm] = []
    later: list[dt.datetime] = []
    fleet = {c.name: c for c in snapshot.clusters}
    for binding in snapshot.notable_bindings():  # any other waits with no backoff, exclusions
        if not binding.clusters:
            later.extend(_waits_until(binding))
            continue
        if not _placed_and_managed(binding):
            continue
        later.extend(_deadlines(binding, fleet, requeue))
        ref = binding_ref(binding)
        statuses = _Statuses(objects, ref)
        found = _trigger(binding, fleet, requeue, now, statuses)
        if found is not None:
            trigger, failing, message = found
            reclaims.append(reclaim(binding, trigger, failing, message, requeue, now))
            continue
        if ann.ADMITTED_AT in binding.annotations and binding.conditions.get("Scheduled") != "True":
            confirms.append(Confirm(ref, tuple(name for name, _ in binding.clusters)))
        if ann.RUNNING_SINCE not in binding.annotations:
            live = _unfinished(binding)
            if live and all(running_on(binding, c, statuses.get(c)) for c in live):
                started.append(Started(ref, now, live))
    due = min((t for t in later if t > now), default=None)
    return Review(tuple(started), tuple(reclaims), tuple(confirms), due)


def _waits_until(binding: BindingView) -> list[dt.datetime]:
    """When a waiting managed job's backoff and exclusions end."""
    notes = binding.annotations
    excluded, backoff = notes.get(ann.EXCLUDED_CLUSTERS), notes.get(ann.BACKOFF_UNTIL)
    if not (excluded or backoff) or binding.labels.get(ann.MANAGED) != "true":
        return []
    found = list(ann.parse_exclusions(excluded).values()) if excluded else []
    until = ann.parse_time(backoff) if backoff else None
    return [*found, until] if until is not None else found


def _deadlines(
    binding: BindingView, clusters: Mapping[str, ClusterView], requeue: Requeue
) -> list[dt.datetime]:
    """When a placed job's startup timeout, and the grace of its NotReady clusters, run out."""
    found: list[dt.datetime] = []
    grace = dt.timedelta(seconds=requeue.cluster_not_ready_grace)
    for name in _unfinished(binding):
        cluster = clusters.get(name)
        if cluster is not None and not cluster.ready and cluster.ready_changed_at is not None:
            found.append(cluster.ready_changed_at + grace)
    admitted = ann.parse_time(binding.annotations.get(ann.ADMITTED_AT, "")) or binding.scheduled_at
    if admitted is not None and ann.RUNNING_SINCE not in binding.annotations:
        found.append(admitted + dt.timedelta(seconds=requeue.startup_timeout))
    running = ann.parse_time(binding.annotations.get(ann.RUNNING_SINCE, ""))
    if running is not None:  # the cycle stops reserving its room then (engine.cycle.jobs.reading)
        found.append(running + dt.timedelta(seconds=requeue.cluster_status_lag))
    return found


def reclaim(
    binding: BindingView,
    trigger: Trigger,
    clusters: tuple[str, ...],
    message: str,
    requeue: Requeue,
    now: dt.datetime,
) -> Reclaim:
    """The requeue (or give-up) of ``binding`` for a failure on ``clusters``."""
    exclusions = ann.parse_exclusions(binding.annotations.get(ann.EXCLUDED_CLUSTERS, ""))
    out = after_failure(requeue, _attempts(binding), exclusions, clusters, now)
    return Reclaim(
        binding=binding_ref(binding),
        trigger=trigger,
        clusters=clusters,
        message=message,
        attempts=out.attempts,
        max_attempts=requeue.max_attempts,
        backoff=out.backoff,
        backoff_until=None if out.give_up else out.backoff_until,
        excluded=tuple(sorted(out.exclusions.items())),
        queued_at=now,
    )


Found = tuple[Trigger, tuple[str, ...], str]
"""A reclaim's trigger, the clusters it names, and its message."""


def _trigger(
    binding: BindingView,
    clusters: Mapping[str, ClusterView],
    requeue: Requeue,
    now: dt.datetime,
    statuses: _Statuses,
) -> Found | None:
    """The first reclaim that holds, in the order the module docstring lists them."""
    found = failed_on_member(binding, lambda c: failure_detail(statuses.get(c)))
    if found is not None:
        return found
    live = _unfinished(binding)
    if not live:
        return None  # finished everywhere: the cycle releases what it held
    # before it first ran, Unhealthy is what Karmada says of a job its operator has not
    # written a status for yet (Kubeflow's interpreter): the startup timeout covers that time
    ran = ann.RUNNING_SINCE in binding.annotations
    sick = tuple(
        c for c in live if ran and binding.applied.get(c) and binding.health.get(c) == "Unhealthy"
    )
    if sick:
        return Trigger.UNHEALTHY, sick, f"Karmada reports the job Unhealthy on {', '.join(sick)}"
    found = not_ready_past_grace(binding, clusters, requeue, now)
    if found is not None:
        return found
    return startup_overdue(binding, requeue, now, lambda c: running_on(binding, c, statuses.get(c)))


def failed_on_member(binding: BindingView, detail: Callable[[str], str]) -> Found | None:
    """``FailedOnMember``: a cluster it was placed on reports it failed; ``detail(cluster)``
    is the member's own words about it ("" when it has none)."""
    placed = tuple(name for name, _ in binding.clusters)
    failed = tuple(c for c in placed if c in binding.failed)
    if not failed:
        return None
    details = [d for c in failed if (d := detail(c))]
    where = ", ".join(failed)
    return (
        Trigger.FAILED_ON_MEMBER,
        failed,
        f"the job failed on {where}" + (f": {details[0][:DETAIL_LIMIT]}" if details else ""),
    )


def not_ready_past_grace(
    binding: BindingView, clusters: Mapping[str, ClusterView], requeue: Requeue, now: dt.datetime
) -> Found | None:
    """``ClusterNotReady``: a cluster it runs on (and has not finished on) has been other than
    Ready for ``clusterNotReadyGrace`` or longer; a cluster missing from ``clusters``, or
    without a transition time, is not acted on."""
    grace = dt.timedelta(seconds=requeue.cluster_not_ready_grace)
    down: list[str] = []
    since: dt.datetime | None = None
    for name in _unfinished(binding):
        cluster = clusters.get(name)
        changed = cluster.ready_changed_at if cluster is not None else None
        if cluster is not None and not cluster.ready and changed and now - changed >= grace:
            down.append(name)
            since = changed if since is None else min(since, changed)
    if not down or since is None:
        return None
    return (
        Trigger.CLUSTER_NOT_READY,
        tuple(down),
        f"cluster {', '.join(down)} not Ready since {ann.format_time(since)} "
        f"(clusterNotReadyGrace {_duration(grace)})",
    )


def startup_overdue(
    binding: BindingView, requeue: Requeue, now: dt.datetime, running: Callable[[str], bool]
) -> Found | None:
    """``StartupTimeout``: it never ran (no ``running-since``) and, ``startupTimeout`` after its
    admission (``admitted-at``, else its ``Scheduled`` time), ``running(cluster)`` is False for
    a cluster it has not finished on."""
    if ann.RUNNING_SINCE in binding.annotations:
        return None
    admitted = ann.parse_time(binding.annotations.get(ann.ADMITTED_AT, "")) or binding.scheduled_at
    timeout = dt.timedelta(seconds=requeue.startup_timeout)
    if admitted is None or now < admitted + timeout:
        return None
    idle = tuple(c for c in _unfinished(binding) if not running(c))
    if not idle:
        return None  # running now: ``review`` records it
    return (
        Trigger.STARTUP_TIMEOUT,
        idle,
        f"not running on {', '.join(idle)} {_duration(now - admitted)} after its admission at "
        f"{ann.format_time(admitted)} (startupTimeout {_duration(timeout)})",
    )


def running_on(binding: BindingView, cluster: str, status: Any) -> bool:
    """Whether the job runs on ``cluster``: its Work is applied, Karmada's health of it is not
    Unhealthy, and the member's job status says it runs, as its kind reports it. Health alone
    decides for a kind without a running signal (it must be Healthy); for the others, Unknown
    health is no objection (Karmada reports Unknown for kinds it has no health interpreter
    for), so a job that runs is never taken for one that did not start."""
    health = binding.health.get(cluster)
    if not binding.applied.get(cluster) or health == "Unhealthy":
        return False
    says = status_says_running(binding.resource.api_version, binding.resource.kind, status)
    return health == "Healthy" if says is None else says


def binding_ref(binding: BindingView) -> str:
    return f"{binding.namespace}/{binding.name}" if binding.namespace else binding.name


class _Statuses:
    """The members' job statuses of one binding, read from its object only when asked (a job
    recorded running, with nothing wrong, needs none)."""

    def __init__(self, objects: ObjectLookup, ref: str) -> None:
        self._objects = objects
        self._ref = ref
        self._found: dict[str, Any] | None = None

    def get(self, cluster: str) -> Any:
        if self._found is None:
            self._found = member_statuses(self._objects(self._ref))
        return self._found.get(cluster)


def _placed_and_managed(binding: BindingView) -> bool:
    notes = binding.annotations
    return (
        binding.labels.get(ann.MANAGED) == "true"
        and bool(binding.clusters)
        and ann.READMIT not in notes
        and ann.GAVE_UP not in notes
    )


def _unfinished(binding: BindingView) -> tuple[str, ...]:
    return tuple(name for name, _ in binding.clusters if name not in binding.finished)


def _attempts(binding: BindingView) -> int:
    try:
        return max(int(binding.annotations.get(ann.ATTEMPTS, "0")), 0)
    except ValueError:
        return 0  # a hand-edited annotation: counted afresh


def _duration(delta: dt.timedelta) -> str:
    """``1h2m3s`` (Go's style, as the policy's durations are written); ``0s`` for zero."""
    seconds = int(delta.total_seconds())
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    text = (f"{hours}h" if hours else "") + (f"{minutes}m" if minutes else "")
    return text + (f"{secs}s" if secs or not text else "")
