"""Reservations: a job that has waited long is not starved by smaller jobs backfilling its room.

With ``spec.reservations``, the pending jobs that have waited ``after`` since they were queued
(``fleetgate.io/queued-at``) take their turn before every other job, oldest first, at most one
per queue and ``max`` in all (``starving``). One that then fits no cluster gets a reservation,
as Slurm's backfill reserves for its top job: on the candidate cluster where it can start
soonest (``where``: the one whose free room already holds the largest part of its pods, then
of its demand, then by name) the room it could use is held for it (``hold``): as many of its
pods as fit now are laid onto the nodes; for each pod still missing, the node closest to
holding one (the most of its scarcest resource free) is kept out of use, as Slurm keeps the
nodes its top job will start on; without resource models, what it lacks is taken from the
free totals. Smaller jobs cannot fill that room as it frees up. A later job that fits only in
held room waits with ``ReservedFor`` (``blocking``). Durations are not known, so nothing is
backfilled into a reservation: this is Slurm's reservation without its time window.

Reservations are derived anew each cycle from the queue times: no state is kept, and a
reservation ends when its job starts (or stops waiting that long: a new queue time).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from engine import annotations as ann
from engine import vectors
from engine.cycle.jobs.model import PendingJob, PodGroup
from engine.cycle.jobs.reading import pod_key
from engine.cycle.placement.capacity import ClusterState
from engine.policy.model import Reservations
from engine.vectors import Vec


@dataclass(frozen=True, slots=True)
class Hold:
    job: PendingJob
    cluster: str
    pods: tuple[PodGroup, ...]  # laid onto the cluster's nodes for the job
    withheld: tuple[PodGroup, ...]  # nodes kept for the pods still missing (their free room)
    totals: Vec  # taken from the free totals beyond those


def starving(
    jobs: Iterable[PendingJob], policy: Reservations, now: dt.datetime
) -> list[PendingJob]:
    """The jobs that get a reservation's turn: per queue its longest waiter past ``after``,
    oldest first, at most ``max``."""
    oldest: dict[str, PendingJob] = {}
    for job in jobs:
        if (now - job.enqueued_at).total_seconds() < policy.after:
            continue
        kept = oldest.get(job.mapped.queue)
        if kept is None or (job.enqueued_at, job.order_key) < (kept.enqueued_at, kept.order_key):
            oldest[job.mapped.queue] = job
    ranked = sorted(oldest.values(), key=lambda j: (j.enqueued_at, j.order_key, j.ref))
    return ranked[: policy.max]


def nominated(jobs: Iterable[PendingJob]) -> list[PendingJob]:
    """The jobs nominated to a cluster by a preemption they made (``fleetgate.io/nominated-
    cluster``, kept until they are admitted or requeued), longest queued first."""
    found = [j for j in jobs if j.binding.annotations.get(ann.NOMINATED_CLUSTER)]
    return sorted(found, key=lambda j: (j.enqueued_at, j.order_key, j.ref))


def where(
    job: PendingJob, names: Sequence[str], clusters: Mapping[str, ClusterState]
) -> str | None:
    """The candidate cluster where ``job`` can start soonest (see the module doc)."""
    pods = sum(g.count for g in job.pods) or 1

    def soonest(name: str) -> tuple[float, float, str]:
        state = clusters[name]
        ready = sum(min(state.max_pods(g.requests), g.count) for g in job.pods) / pods
        share = min(
            (max(state.free.get(r, 0), 0) / v for r, v in job.demand.items() if v > 0),
            default=1.0,
        )
        return (-ready, -share, name)

    fitting = [
        n
        for n in names
        if clusters[n].could_ever_hold(job.pods, job.demand)
        and clusters[n].beyond.never(job.pods, clusters[n].allocatable) is None
    ]
    return min(fitting, key=soonest) if fitting else None


def hold(job: PendingJob, state: ClusterState) -> Hold:
    """Hold on ``state`` the room ``job`` could use there now (see the module doc)."""
    placed: list[PodGroup] = []
    for group in job.pods:
        n = min(state.max_pods(group.requests), group.count)
        if n:
            part = PodGroup(group.requests, n)
            state.place((part,))
            placed.append(part)
    missing = [
        (g, g.count - sum(p.count for p in placed if p.requests is g.requests)) for g in job.pods
    ]
    withheld: list[PodGroup] = []
    taken: Vec = {}
    if state.nodes is not None:
        for group, count in missing:
            nearest = _nearest_nodes(state, group.requests, count)
            if nearest:
                state.retake(nearest)  # those nodes' free room, as nodes of their own, taken
                withheld += nearest
    else:
        rest = vectors.add(job.demand, vectors.total((g.requests, g.count) for g in placed), -1)
        taken = {r: min(v, max(state.free.get(r, 0), 0)) for r, v in rest.items() if v > 0}
        taken = {r: v for r, v in taken.items() if v}
        if taken:
            state.take(taken)
    return Hold(job, state.name, tuple(placed), tuple(withheld), taken)


def _nearest_nodes(state: ClusterState, requests: Vec, count: int) -> list[PodGroup]:
    """``count`` nodes closest to holding a pod of ``requests`` (the largest fraction of its
    scarcest resource free), each as a pod group of its free amounts."""
    assert state.nodes is not None
    need = [(i, requests.get(r, 0)) for i, r in enumerate(state.model)]
    need = [(i, v) for i, v in need if v > 0]
    if not need or count <= 0:
        return []

    def closeness(shape: tuple[int, ...]) -> tuple[float, tuple[int, ...]]:
        return (min(shape[i] / v for i, v in need), shape)

    found = []
    for shape in sorted(state.nodes, key=closeness, reverse=True):
        if not any(shape[i] for i, _ in need):
            break
        n = min(state.nodes[shape], count)
        found.append(PodGroup(dict(zip(state.model, shape, strict=True)), n))
        count -= n
        if not count:
            break
    return found


def said(hold: Hold, now: dt.datetime) -> str:
    """What a reserved job's decision says of its reservation."""
    ready = sum(g.count for g in hold.pods)
    pods = sum(g.count for g in hold.job.pods)
    since = ann.format_time(hold.job.enqueued_at)
    hours = (now - hold.job.enqueued_at).total_seconds() / 3600
    return (
        f"waiting since {since} ({hours:.1f}h): room is held for it on {hold.cluster}, where "
        f"{ready} of its {pods} pods fit now; smaller jobs may not take it"
    )


def held(hold: Hold) -> str:
    """What a reserved job's binding says of its reservation: ``said`` without the clock."""
    return f"room is held for it on {hold.cluster}; smaller jobs may not take it"


def blocking(
    job: PendingJob,
    holds: Sequence[Hold],
    clusters: Mapping[str, ClusterState],
    names: Sequence[str],
    seen: dict[tuple, bool],
) -> Hold | None:
    """The reservation on one of ``names`` without which ``job`` would fit there now
    (``seen``: the answers of this cycle, by cluster, its state's version and the pods)."""
    pods = job.pod_key or pod_key(job.pods)
    for held in holds:
        if held.job is job or held.cluster not in names:
            continue
        state = clusters[held.cluster]
        key = (held.cluster, state.version, pods)
        fits = seen.get(key)
        if fits is None:
            trial = state.copy()
            trial.release(held.pods + held.withheld)
            vectors.add_into(trial.free, held.totals)
            fits = seen[key] = trial.fits(job.pods, job.demand)
        if fits:
            return held
    return None


def held_back(held: Hold) -> str:
    return (
        f"it would fit {held.cluster}, but that room is held for {held.job.ref}, which has "
        f"waited since {ann.format_time(held.job.enqueued_at)}"
    )
