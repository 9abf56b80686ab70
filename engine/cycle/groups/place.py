"""Placing a co-admission group (``groups.Unit``) at its queue's turn: all, or its minimum.

1. Quota counts the unit's whole demand (``gang.admitOn: MinMember``: its minimum's, the
   members of least demand), checked as one demand against the queue and its ancestors.
2. Each member goes whole to one cluster among its own candidates (the binding's
   PropagationPolicy, taints, filters, node shape: ``Placer.candidates`` and the clusters'
   fit checks), with spread on clusters of its own. Assigning members to clusters is a small
   bin-packing problem, searched by backtracking over trial copies of the cluster states:
   members most constrained first (fewest clusters that could ever hold them), then largest
   (dominant share of the fleet), each tried on its clusters best score first, then left out.
   The first complete leaf is first-fit-decreasing; the search stops when every member is
   placed or after ``BUDGET`` fit checks, keeping the attempt that placed the most members.
   Within the budget the answer is exact (the most members that fit at once, given the
   fit checks); beyond it, FFD may miss an assignment that needed a different choice early
   (a large member on the cluster a later, more constrained member needed).
3. The unit is admitted when at least its needed members fit at once (and, with MinMember,
   their quota: when the most members at once are beyond it, the members it counts are
   searched alone); otherwise nothing is taken, and every member gets the same reason with the
   best attempt per cluster; ``engine.cycle.groups.preempt`` may then find victims that let
   its minimum in as a whole. A running member is never a victim (``groups.preemptible``;
   docs/multi-cluster-training.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from engine import vectors
from engine.cycle.groups.formation import ADMITTED, PENDING, Unit, label, smallest
from engine.cycle.jobs.model import PendingJob
from engine.cycle.jobs.reading import pod_key
from engine.cycle.placement.capacity import ClusterState
from engine.cycle.placement.memo import Candidates
from engine.cycle.quota.tree import QuotaNode, QuotaTree
from engine.cycle.reasons import Reason
from engine.policy.model import AdmitOn

BUDGET = 20_000
"""Fit checks one group's search may make before it settles for the best attempt so far."""
DEEPEST = 400
"""Members beyond which a group is placed by first-fit-decreasing alone (the search recurses
once per member)."""


class Placing(Protocol):
    """What placing needs of ``engine.cycle.placement.Placer``."""

    def job_key(self, job: PendingJob) -> Any: ...

    def candidates(self, job: PendingJob, job_key: Any) -> Candidates: ...

    def job_variables(self, job: PendingJob) -> dict[str, Any]: ...

    def _score(
        self,
        name: str,
        candidates: Candidates,
        job_key: Any,
        variables: Mapping[str, Any],
        need: Mapping[str, int],
    ) -> Any: ...


@dataclass
class Outcome:
    decisions: list[tuple[PendingJob, Reason, str, dict[str, Any]]] = field(default_factory=list)
    admitted: list[PendingJob] = field(default_factory=list)
    state: str = PENDING


@dataclass(frozen=True, slots=True)
class _Member:
    job: PendingJob
    candidates: Candidates
    options: tuple[str, ...]  # clusters that could ever hold it, best score first
    ever: bool  # some candidate (or a cluster out only for now) could hold it when empty


def consider(
    unit: Unit,
    leaf: QuotaNode,
    quota: QuotaTree,
    placer: Placing,
    clusters: Mapping[str, ClusterState],
    admit_on: AdmitOn,
) -> Outcome:
    """Decide the unit's members; what is admitted is taken from ``quota`` and ``clusters``."""
    name = label(unit.key)
    total = unit.representative.demand
    miss = quota.check(leaf, total)
    if miss is not None:
        return _all(unit, miss.reason, f"group {name}: {miss.message}")
    members = members_of(unit, placer, clusters)
    order = sorted(members, key=lambda m: hardness(m, clusters))
    best = _search(order, clusters, unit.taken, unit.spec.spread)
    placed = [(order[i], where) for i, where in best]
    if admit_on == AdmitOn.MIN_MEMBER:
        placed = _within_quota(placed, quota, leaf)
        if len(best) >= unit.needed > len(placed):
            placed = _counted_alone(unit, order, clusters) or placed
    if len(placed) >= unit.needed:
        fitted = {order[i].job.ref for i, _ in best}
        return _admit(unit, placed, members, quota, leaf, clusters, fitted)
    if len(best) >= unit.needed:  # they fit, but their quota is not there
        why = f"{len(best)} members fit at once but only {len(placed)} within the quota of "
        why += f"queue {leaf.name}, {unit.needed} needed"
        return _all(unit, Reason.WAITING_FOR_QUOTA, f"group {name}: {why}")
    return _refuse(unit, order, best, clusters)


def members_of(unit: Unit, placer: Placing, clusters: Mapping[str, ClusterState]) -> list[_Member]:
    found = []
    for job in unit.members:
        key = placer.job_key(job)
        candidates = placer.candidates(job, key)
        holds = [n for n in candidates.names if clusters[n].could_ever_hold(job.pods, job.demand)]
        variables = placer.job_variables(job)
        scores = {n: placer._score(n, candidates, key, variables, job.demand) for n in holds}
        options = tuple(sorted(holds, key=scores.__getitem__, reverse=True))
        later = any(clusters[n].could_ever_hold(job.pods, job.demand) for n in candidates.later)
        found.append(_Member(job, candidates, options, bool(options) or later))
    return found


def hardness(member: _Member, clusters: Mapping[str, ClusterState]) -> tuple[Any, ...]:
    """Most constrained first, then largest (dominant share of the clusters it may use)."""
    share = 0.0
    for r, v in member.job.demand.items():
        room = sum(clusters[n].allocatable.get(r, 0) for n in member.options)
        if room > 0:
            share = max(share, v / room)
    return (len(member.options), -share, member.job.order_key, member.job.ref)


def _search(
    order: Sequence[_Member],
    clusters: Mapping[str, ClusterState],
    taken: frozenset[str],
    spread: bool,
) -> list[tuple[int, str]]:
    """(index into ``order``, cluster) of the most members found to fit at once."""
    trial = dict(clusters)
    chosen: list[tuple[int, str]] = []
    used = set(taken)
    best: list[tuple[int, str]] = []
    steps = 0
    n = len(order)

    def go(i: int) -> bool:
        nonlocal best, steps
        if len(chosen) > len(best):
            best = list(chosen)
        if len(chosen) == n:
            return True
        if i == n or steps >= BUDGET or len(chosen) + n - i <= len(best):
            return False
        job = order[i].job
        key = job.pod_key or pod_key(job.pods)
        for name in order[i].options:
            if spread and name in used:
                continue
            state = trial[name]
            steps += 1
            if not state.fits(job.pods, job.demand, key):
                continue
            trial[name] = state.copy()
            trial[name].place(job.pods)
            chosen.append((i, name))
            used.add(name)
            done = go(i + 1)
            trial[name] = state
            chosen.pop()
            used.discard(name)
            if done or steps >= BUDGET:
                return done
        return go(i + 1)  # leave member i out

    if n > DEEPEST:
        return _first_fit(order, trial, used, spread)
    go(0)
    return best


def _first_fit(
    order: Sequence[_Member], trial: dict[str, ClusterState], used: set[str], spread: bool
) -> list[tuple[int, str]]:
    """Each member on its best cluster that fits, in order; no backtracking."""
    chosen: list[tuple[int, str]] = []
    for i, member in enumerate(order):
        job = member.job
        key = job.pod_key or pod_key(job.pods)
        for name in member.options:
            if (spread and name in used) or not trial[name].fits(job.pods, job.demand, key):
                continue
            trial[name] = trial[name].copy()
            trial[name].place(job.pods)
            chosen.append((i, name))
            used.add(name)
            break
    return chosen


def _counted_alone(
    unit: Unit, order: Sequence[_Member], clusters: Mapping[str, ClusterState]
) -> list[tuple[_Member, str]]:
    """With MinMember, the members the quota counts (the needed ones of least demand, whose
    demand passed it) placed on their own, when they all fit at once (else empty): the most
    members at once may be larger ones, beyond the quota."""
    counted = {j.ref for j in smallest(unit.members, unit.needed)}
    few = [m for m in order if m.job.ref in counted]
    found = _search(few, clusters, unit.taken, unit.spec.spread)
    return [(few[i], where) for i, where in found] if len(found) >= unit.needed else []


def _within_quota(
    placed: list[tuple[_Member, str]], quota: QuotaTree, leaf: QuotaNode
) -> list[tuple[_Member, str]]:
    """The placed members, in queue order, as long as their demand passes the quota."""
    kept: list[tuple[_Member, str]] = []
    demand: dict[str, int] = {}
    for member, where in sorted(placed, key=lambda p: (p[0].job.order_key, p[0].job.ref)):
        more = vectors.add(demand, member.job.demand)
        if quota.check(leaf, more) is None:
            kept.append((member, where))
            demand = more
    return kept


def _admit(
    unit: Unit,
    placed: list[tuple[_Member, str]],
    members: Sequence[_Member],
    quota: QuotaTree,
    leaf: QuotaNode,
    clusters: Mapping[str, ClusterState],
    fitted: set[str],
) -> Outcome:
    """Admit the ``placed`` members; the others (``fitted``: placed, but over the quota)
    wait."""
    outcome = Outcome(state=ADMITTED)
    where = {m.job.ref: name for m, name in placed}
    count = len(placed) + unit.placed
    said = f"with its group {label(unit.key)} ({count} of {unit.spec.size} members"
    said += f", minimum {unit.spec.min})" if unit.spec.min < unit.spec.size else ")"
    for member in members:
        job = member.job
        if job.ref in where:
            name = where[job.ref]
            clusters[name].place(job.pods)
            quota.add(leaf, job.demand)
            outcome.admitted.append(job)
            extra = {"assignments": ((name, job.pods),)}
            outcome.decisions.append((job, Reason.ADMITTED, f"admitted to {name} {said}", extra))
    for member in members:
        job = member.job
        if job.ref in fitted and job.ref not in where:
            message = f"not admitted {said}: no quota left for it in queue {leaf.name}"
            outcome.decisions.append((job, Reason.WAITING_FOR_QUOTA, message, {}))
        elif job.ref not in where:
            reasons = _reasons_now(member, clusters, where.values(), unit.spec.spread)
            message = f"not admitted {said}: it fits no cluster now"
            outcome.decisions.append(
                (job, Reason.NO_CLUSTER_FITS, message, {"cluster_reasons": reasons})
            )
    return outcome


def _refuse(
    unit: Unit,
    order: Sequence[_Member],
    best: list[tuple[int, str]],
    clusters: Mapping[str, ClusterState],
) -> Outcome:
    name = label(unit.key)
    needed, n = unit.needed, len(order)
    ever = [m for m in order if m.ever]
    reach = len(ever)
    if unit.spec.spread:
        reach = min(reach, len({c for m in ever for c in (*m.options, *m.candidates.later)}))
    errors = [m.candidates.error for m in order if m.candidates.error]
    if errors:
        reason, why = Reason.POLICY_EVAL_ERROR, errors[0]
    elif len(usable := [m for m in order if m.candidates.names or m.candidates.later]) < needed:
        reason = Reason.NO_CANDIDATE_CLUSTER
        none = [_short(m.job) for m in order if m not in usable]
        why = f"{len(none)} of its {n} members have no candidate cluster ({', '.join(none)})"
    elif reach < needed:
        reason = Reason.GROUP_TOO_LARGE
        spread = " on distinct clusters" if unit.spec.spread else ""
        why = f"at most {reach} of its {n} members could ever fit{spread}, {needed} needed"
    else:
        reason = Reason.NO_CLUSTER_FITS
        why = f"{len(best)} of {n} members fit at once, {needed} needed"
    # the best attempt, on trial copies of the clusters
    trial = dict(clusters)
    placed: dict[str, str] = {}
    for i, where in best:
        trial[where] = trial[where].copy()
        trial[where].place(order[i].job.pods)
        placed[order[i].job.ref] = where
    if best:
        why += "; best attempt: " + ", ".join(
            f"{_short(order[i].job)} → {where}" for i, where in sorted(best)
        )
    reasons: dict[str, list[str]] = {}
    for member in order:
        if member.job.ref in placed:
            reasons.setdefault(placed[member.job.ref], []).insert(0, f"takes {_short(member.job)}")
    unplaced = [m for m in order if m.job.ref not in placed]
    for member in unplaced[:2]:
        for cluster, text in _reasons_now(member, trial, placed.values(), unit.spec.spread):
            reasons.setdefault(cluster, []).append(f"{_short(member.job)}: {text}")
    if len(unplaced) > 2:
        why += f"; {len(unplaced)} members fit nowhere"
    cluster_reasons = tuple((c, "; ".join(texts)) for c, texts in sorted(reasons.items()))
    return _all(unit, reason, f"group {name}: {why}", cluster_reasons)


def _reasons_now(
    member: _Member,
    clusters: Mapping[str, ClusterState],
    used: Any,
    spread: bool,
) -> tuple[tuple[str, str], ...]:
    """Why each cluster does not take ``member`` on ``clusters`` (as they are or a trial)."""
    job = member.job
    said = dict(member.candidates.reasons)
    taken = set(used)
    for name in member.candidates.names:
        state = clusters[name]
        if spread and name in taken:
            said[name] = "holds another member (group-spread: clusters)"
        elif not state.could_ever_hold(job.pods, job.demand):
            said[name] = "member larger than the cluster's allocatable"
        else:
            misfit = state.misfit(job.pods, job.demand, job.pod_key or pod_key(job.pods))
            said[name] = misfit.message if misfit is not None else "no room"
    return tuple(sorted(said.items()))


def _all(
    unit: Unit, reason: Reason, message: str, cluster_reasons: tuple[tuple[str, str], ...] = ()
) -> Outcome:
    outcome = Outcome()
    extra = {"cluster_reasons": cluster_reasons}
    outcome.decisions = [(job, reason, message, dict(extra)) for job in unit.members]
    return outcome


def _short(job: PendingJob) -> str:
    return job.workload.name if job.workload is not None else job.ref
