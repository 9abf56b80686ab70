"""Where a job can run: candidate clusters, fit, and the choice among those that fit.

Candidates, each check naming the first one a cluster fails (the per-cluster reasons):
excluded after a failure, not Ready, kind not served (apiEnablements), the binding's placement
(cluster affinity from its PropagationPolicy; with ordered ``clusterAffinities`` any group may
be used, earlier groups preferred), untolerated taints, then the SchedulingPolicy's CEL filters.
The static part is cached per (placement, kind, exclusions, what the filters read of the job);
with a ``JobCache``, that cache, the CEL results and each job's projection are kept between
cycles (``PlacementMemo``), the static part while the clusters' views are the same objects.

A job that may not span clusters fits one cluster whole (totals and node shape). A splittable
job (one pod shape, ``allowSplit``) goes whole to one cluster when one fits (unless Spread is
by region), else its pods are divided (``division``): greedily in rank order (BinPack) or in
proportion to room (Spread), per cluster or per region. Clusters are ranked (``scoring``) by
affinity group, cost, whether every CEL score succeeded, then the weighted CEL scores plus the
strategy's term; a score that fails is named in the decision.

Where no candidate fits, node shape's other two answers (``nodebounds``): a job a pod of which
no node of any candidate could ever hold is rejected (``NeverFits``); a job that may fit where
the resource models cannot promise the room gets, with ``nodeShape: Optimistic``, a fallback
admission there, which the cycle takes when preemption cannot make it surely fit. One module
past 400 lines: finding candidates and choosing among them share the per-cycle caches.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from engine import annotations as ann
from engine import vectors
from engine.cycle.dependencies import pinned
from engine.cycle.jobs.cache import JobCache
from engine.cycle.jobs.model import PendingJob, PodGroup
from engine.cycle.jobs.reading import pod_key
from engine.cycle.jobs.values import JobValues
from engine.cycle.placement.capacity import ClusterState
from engine.cycle.placement.division import divide
from engine.cycle.placement.memo import MAX_STATIC, Candidates, PlacementMemo
from engine.cycle.placement.nodebounds import Never, never_message, never_text
from engine.cycle.placement.scoring import (
    CostRanking,
    cel_score,
    reverse,
    strategy_term,
    with_failed_scores,
)
from engine.cycle.placement.values import PlacedJob, cluster_values, placed_job, reads_placed
from engine.cycle.placement.values import cluster_region as region_of
from engine.cycle.reasons import Reason
from engine.fleet.affinity import untolerated
from engine.fleet.model import PlacementView, Snapshot, affinity_allows
from engine.policy import cel
from engine.policy.access import MISSING_ROOT
from engine.policy.model import NodeShape, PlacementStrategy, SpreadBy
from engine.policy.policyset import PolicySet

Assignment = tuple[str, tuple[PodGroup, ...]]
MAYBE_NOTE = "; a node may have the room, but the cluster's resource models cannot promise it"


@dataclass(frozen=True, slots=True)
class PlaceResult:
    assignments: tuple[Assignment, ...]  # empty when the job was not placed
    reason: Reason | None
    message: str
    cluster_reasons: tuple[tuple[str, str], ...] = ()
    # where the job may fit (``nodeShape: Optimistic``): the admission to make when no
    # preemption makes it surely fit
    fallback: PlaceResult | None = None


class Placer:
    def __init__(
        self,
        snapshot: Snapshot,
        policies: PolicySet,
        clusters: Mapping[str, ClusterState],
        now: dt.datetime,
        queue_values: Callable[[str], Mapping[str, Any]],
        cache: JobCache | None = None,
    ) -> None:
        self.snapshot = snapshot
        self.clusters = clusters
        self.now = now
        self.queue_values = queue_values
        placement = policies.scheduling.placement
        self.strategy = placement.strategy
        self.spread_by = placement.spread_by
        self.node_shape = placement.node_shape
        self.filters = placement.filters
        self.scores = placement.scores
        kept = (
            cache.placement(policies.version, lambda: PlacementMemo(policies))
            if cache is not None
            else PlacementMemo(policies)
        )
        self.memo = kept.memo.fork()  # results shared between cycles, counts per cycle
        self.job_projector = kept.job_projector
        self.cluster_projector = kept.cluster_projector
        self.reads_queue = kept.reads_queue
        self.reads_free = kept.reads_free
        self.reads_placed = reads_placed(self.job_projector.paths)
        self._placed: dict[str, PlacedJob] = {}  # binding ref → its placement ``job``
        self.costs = CostRanking(placement.cost)
        self._job_roots = self.job_projector.roots
        self._cluster_keys: dict[str, tuple[int, Any, Mapping[str, Any]]] = {}
        self._static = kept.static_for(tuple(state.view for state in clusters.values()))
        self._failures: dict[Any, PlaceResult] = {}
        self._kinds: dict[Any, _Kind] = {}  # per kind of job (the key of ``_failures``)
        # binding ref → (clusters, the job holding them): ``same-cluster-as`` (dependencies)
        self.pins: dict[str, tuple[tuple[str, ...], str]] = {}

    # --- candidates ----------------------------------------------------------------------------
    def _job(self, job: PendingJob) -> Mapping[str, Any]:
        """The CEL ``job``: with the binding's fields (``placevalues``) when they are read."""
        if not self.reads_placed:
            return job.values
        found = self._placed.get(job.ref)
        if found is None or found.values is not job.values:
            found = placed_job(
                job.values, job.binding.annotations, job.enqueued_at, self.now, self.clusters
            )
            self._placed[job.ref] = found
        return found

    def job_variables(self, job: PendingJob) -> dict[str, Any]:
        values: dict[str, Any] = {"job": self._job(job), "now": self.now}
        if self.reads_queue:
            values["queue"] = self.queue_values(job.mapped.queue)
        return values

    def job_key(self, job: PendingJob) -> Any:
        """``self.job_projector.key(self.job_variables(job))``, with the ``job`` part kept on
        the job's values (``now`` and ``queue`` change between and within cycles)."""
        roots = self._job_roots
        values = self._job(job)
        part = (
            values.part(self.job_projector)
            if isinstance(values, JobValues | PlacedJob)
            else self.job_projector.part("job", values)
        )
        if roots == ("job",):
            return (part,)
        variables = self.job_variables(job)
        return tuple(
            part
            if root == "job"
            else self.job_projector.part(root, variables[root])
            if root in variables
            else MISSING_ROOT
            for root in roots
        )

    def candidates(self, job: PendingJob, job_key: Any) -> Candidates:
        placement = self._placement(job)
        exclusions = job.binding.annotations.get(ann.EXCLUDED_CLUSTERS, "")
        resource = job.binding.resource
        static_key: tuple[Any, ...] = (
            placement,
            resource.api_version,
            resource.kind,
            exclusions,
            job_key,
            self.costs.pays(job.demand),
        )
        if exclusions:  # whether an exclusion still holds depends on now
            static_key += (self.now,)
        found = self._static.get(static_key)
        if found is None or self.reads_free:
            found = self._candidates(job, placement, exclusions, job_key)
            if len(self._static) >= MAX_STATIC:
                self._static.clear()
            self._static[static_key] = found
        pin = self.pins.get(job.ref) if self.pins else None
        return found if pin is None else pinned(found, *pin)

    def _placement(self, job: PendingJob) -> PlacementView | None:
        if job.binding.placement is not None:
            return job.binding.placement
        policy = self.snapshot.policy_for(job.binding)
        return policy.placement if policy is not None else None

    def _candidates(
        self, job: PendingJob, placement: PlacementView | None, exclusions: str, job_key: Any
    ) -> Candidates:
        excluded = ann.parse_exclusions(exclusions)
        resource = job.binding.resource
        names: list[str] = []
        preference: dict[str, int] = {}
        reasons: dict[str, str] = {}
        error = ""
        later: list[str] = []
        variables = self.job_variables(job)
        groups = _affinity_groups(placement)
        for name, state in self.clusters.items():
            view = state.view
            until = excluded.get(name)
            group = next((i for i, a in enumerate(groups) if affinity_allows(a, view)), None)
            taints = untolerated(placement.tolerations if placement else (), view.taints)
            if until is not None and until > self.now:
                reasons[name] = f"excluded until {ann.format_time(until)} after a failure there"
                later.append(name)
            elif not view.ready:
                reasons[name] = "cluster is not Ready"
                later.append(name)
            elif not view.serves(resource.api_version, resource.kind):
                reasons[name] = f"does not serve {resource.api_version} {resource.kind}"
            elif group is None:
                reasons[name] = "not allowed by the binding's cluster affinity"
            elif taints:
                t = taints[0]
                reasons[name] = f"taint {t.key}={t.value}:{t.effect} not tolerated"
            else:
                results = self._cel(name, job_key, variables)
                rejected = ""
                for f, result in zip(self.filters, results, strict=False):
                    if isinstance(result, cel.CelError):
                        rejected = f"filter {f.name} failed: {result.message}"
                        error = error or f"{f.expression.path}: {result}"
                        break
                    if result is not True:
                        rejected = f"filter {f.name} rejects it"
                        break
                rejected = rejected or self.costs.excluded(view, job.demand)
                if rejected:
                    reasons[name] = rejected
                else:
                    names.append(name)
                    preference[name] = group
        return Candidates(tuple(names), preference, reasons, error, tuple(later))

    def _cel(self, cluster: str, job_key: Any, job_variables: Mapping[str, Any]) -> tuple:
        if not self.memo.programs:
            return ()
        state = self.clusters[cluster]
        cached = self._cluster_keys.get(cluster)
        if cached is None or cached[0] != state.version:
            values = cluster_values(state)
            cached = (state.version, self.cluster_projector.key({"cluster": values}), values)
            self._cluster_keys[cluster] = cached
        return self.memo.evaluate_key((job_key, cached[1]), {**job_variables, "cluster": cached[2]})

    # --- placing -------------------------------------------------------------------------------
    def place(self, job: PendingJob, splittable: bool) -> PlaceResult:
        job_key = self.job_key(job)
        candidates = self.candidates(job, job_key)
        pods = job.pods
        fail_key = (candidates.names, job.pod_key or pod_key(pods), splittable, job_key)
        failed = self._failures.get(fail_key)
        if failed is not None:
            return failed
        result = self._place(job, candidates, job_key, splittable, fail_key)
        if result.reason is not None and result.fallback is None:
            self._failures[fail_key] = result
        return result

    def _place(
        self, job: PendingJob, candidates: Candidates, job_key: Any, splittable: bool, kind: Any
    ) -> PlaceResult:
        reasons = dict(candidates.reasons)
        if not candidates.names:
            reason = Reason.POLICY_EVAL_ERROR if candidates.error else Reason.NO_CANDIDATE_CLUSTER
            if candidates.later and not candidates.error:
                reason = Reason.NO_CLUSTER_FITS
            message = candidates.error or f"no cluster passes placement ({len(reasons)} checked)"
            return PlaceResult((), reason, message, _sorted(reasons))
        pods, demand, names = job.pods, job.demand, candidates.names
        key = job.pod_key or pod_key(pods)  # the clusters' fit caches are keyed by it
        kept = self._kinds.get(kind)
        if kept is None or kept.candidates is not candidates:
            kept = self._kinds[kind] = _Kind(candidates, [self.clusters[n] for n in names])
        versions = [state.version for state in kept.states]
        if versions != kept.versions:  # look again only where a cluster's state changed
            for i, state in enumerate(kept.states):
                if versions[i] != kept.versions[i]:
                    kept.fits[i] = state.fits(pods, demand, key)
                    kept.scores[i] = None
                    if kept.failed:
                        kept.failed.pop(names[i], None)
            kept.versions = versions
        fitting = [i for i, fits in enumerate(kept.fits) if fits]
        variables = self.job_variables(job)
        divided = splittable and len(pods) == 1
        if fitting and not (divided and self.spread_by == SpreadBy.REGION):  # else: divide it
            scores = kept.scores

            def score(i: int) -> Any:
                found = scores[i]
                if found is None:
                    found = scores[i] = self._score(
                        names[i], candidates, job_key, variables, demand, kept.failed, pods
                    )
                return found

            best = names[max(fitting, key=score)]
            message = f"admitted to {best}{self.costs.said(self.clusters, ((best, pods),))}"
            if not kept.failed:
                return PlaceResult(((best, pods),), None, message)
            said = {names[i]: kept.failed[names[i]] for i in fitting if names[i] in kept.failed}
            return _scored(((best, pods),), message, said)
        if divided:
            failed: dict[str, tuple[str, str]] = {}
            split = self._split(pods[0], candidates, job_key, variables, failed)
            if split:
                where = ", ".join(f"{n}={g[0].count}" for n, g in split)
                said = f"split across {where}" if len(split) > 1 else f"admitted to {split[0][0]}"
                return _scored(split, said + self.costs.said(self.clusters, split), failed)
        ever = False
        maybe: list[str] = []
        never: dict[str, tuple[PodGroup, Never]] = {}
        for name in candidates.names:
            state = self.clusters[name]
            found = state.beyond.never(pods, state.allocatable)
            if found is not None:
                never[name] = found
                reasons[name] = f"a pod {never_text(found[1], bool(state.view.node_shapes))}"
                continue
            if not state.could_ever_hold(pods, demand):
                reasons[name] = "gang larger than the cluster's allocatable"
                continue
            ever = True
            misfit = state.misfit(pods, demand, key)
            reason = misfit.message if misfit is not None else "no room"
            if misfit is not None and misfit.node_pods and state.may_hold(pods, demand, key):
                maybe.append(name)
                reason += MAYBE_NOTE
            reasons[name] = reason + state.beyond.note()
        need = vectors.describe_vec(demand)
        # clusters out only for now (not Ready, excluded) may hold it later: wait, not reject
        later = [self.clusters[n] for n in candidates.later]
        ever = ever or any(
            s.could_ever_hold(pods) and s.beyond.never(pods, s.allocatable) is None for s in later
        )
        if not ever and never:
            return PlaceResult((), Reason.NEVER_FITS, never_message(job, never), _sorted(reasons))
        if not ever and not splittable:
            return PlaceResult(
                (),
                Reason.GANG_TOO_LARGE,
                f"the gang ({need}) is larger than every candidate cluster",
                _sorted(reasons),
            )
        count = len(candidates.names)
        message = f"none of {count} candidate clusters has room now for {need}"
        fallback = None
        if maybe and self.node_shape == NodeShape.OPTIMISTIC:
            best = max(
                maybe,
                key=lambda n: self._score(n, candidates, job_key, variables, demand, None, pods),
            )
            fallback = PlaceResult(
                ((best, pods),),
                None,
                f"admitted to {best}, where it may fit: its resource models cannot promise a "
                "node with room (spec.placement.nodeShape: Optimistic)",
            )
        elif maybe:
            message += (
                f"; {len(maybe)} may have it, but their resource models cannot promise the room "
                "(spec.placement.nodeShape: Conservative)"
            )
        return PlaceResult((), Reason.NO_CLUSTER_FITS, message, _sorted(reasons), fallback)

    def _score(
        self,
        name: str,
        candidates: Candidates,
        job_key: Any,
        variables: Mapping[str, Any],
        need: Mapping[str, int],
        failed: dict[str, tuple[str, str]] | None = None,
        pods: Sequence[PodGroup] = (),
    ) -> tuple[int, float, bool, float, tuple[int, ...]]:
        """The rank (``scoring``): affinity group, cost, scores all ok, score, name."""
        results = self._cel(name, job_key, variables)[len(self.filters) :]
        ok, score = cel_score(self.scores, results, name, failed)
        state = self.clusters[name]
        score += strategy_term(self.strategy, state, need, pods)
        cost = self.costs.key(state.view, need)
        return (-candidates.preference.get(name, 0), cost, ok, score, reverse(name))

    def _split(
        self,
        group: PodGroup,
        candidates: Candidates,
        job_key: Any,
        variables: Mapping[str, Any],
        failed: dict[str, tuple[str, str]],
    ) -> tuple[Assignment, ...]:
        room = {n: self.clusters[n].max_pods(group.requests) for n in candidates.names}
        room = {n: r for n, r in room.items() if r > 0}
        if sum(room.values()) < group.count:
            return ()
        order = sorted(
            room,
            key=lambda n: self._score(n, candidates, job_key, variables, group.requests, failed),
            reverse=True,
        )
        spread = self.strategy == PlacementStrategy.SPREAD
        by_region = self.spread_by == SpreadBy.REGION
        region = (lambda n: region_of(self.clusters[n].view)) if by_region else None
        counts = divide(order, room, group.count, spread, region)
        return tuple((n, (PodGroup(group.requests, counts[n]),)) for n in order if n in counts)


class _Kind:
    """What placing one kind of job found on its candidate clusters, each at the state
    version it was found at: whether the job fits, and its score there (None: not yet).
    Both are functions of the version and the kind (its candidates, pods and job key)."""

    __slots__ = ("candidates", "failed", "fits", "scores", "states", "versions")

    def __init__(self, candidates: Candidates, states: list[ClusterState]) -> None:
        self.candidates = candidates
        self.states = states
        self.versions = [-1] * len(states)  # no state version is negative: all looked at
        self.fits = [False] * len(states)
        self.scores: list[Any] = [None] * len(states)
        self.failed: dict[str, tuple[str, str]] = {}  # cluster → (score, why): its score failed


def _affinity_groups(placement: PlacementView | None) -> list[Any]:
    if placement is None:
        return [None]
    if placement.affinities:
        return [a for _, a in placement.affinities]
    return [placement.affinity]


def _scored(
    assignments: tuple[Assignment, ...], message: str, failed: Mapping[str, tuple[str, str]]
) -> PlaceResult:
    """A placement; the scores that failed on clusters (counted as 0) are said."""
    if not failed:
        return PlaceResult(assignments, None, message)
    reasons = _sorted({name: why for name, (_, why) in failed.items()})
    return PlaceResult(assignments, None, with_failed_scores(message, failed), reasons)


def _sorted(reasons: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(reasons.items()))
