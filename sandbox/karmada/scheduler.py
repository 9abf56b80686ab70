"""A simple Karmada scheduler: places bindings that are not suspended and not yet placed.

It skips a binding whose ``spec.suspension.scheduling`` is true (fleetgate's bind mode), one
that already has ``spec.clusters``, one being deleted, and one for another ``schedulerName``.
Within ``spec.placement`` (``clusterAffinity``, else the ``clusterAffinities`` terms in order;
``clusterTolerations`` against the cluster taints: ``engine.fleet.affinity``), among Ready
clusters that serve the kind, it picks the cluster with the most free of the job's dominant
resource (its largest share of the fleet's allocatable), preferring clusters where the whole
demand fits; ties go to the first name. One cluster holds the whole job; divisible kinds
(a binding with ``spec.replicas``) get all their replicas there. Karmada's spread constraints,
replica division and weights are not modelled.

Writes: a merge patch of ``spec.clusters`` carrying the binding's resourceVersion, then the
status subresource: ``Scheduled`` (Success / NoClusterFit), ``schedulerObservedGeneration``,
``schedulerObservedAffinityName``, ``lastScheduledTime``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from fractions import Fraction
from typing import Any

from engine.fleet.affinity import ClusterAffinity, affinity_allows, tolerates
from engine.fleet.bindings import read_binding
from engine.fleet.clusters import read_cluster
from engine.fleet.model import BindingView, ClusterView
from engine.resources import PODS, Resources
from engine.workloads.model import DemandError
from engine.workloads.registry import read_workload
from sandbox.karmada.common import (
    condition,
    condition_status,
    deleting,
    get_or_none,
    log,
    meta,
    with_retry,
)
from sandbox.meta import now_rfc3339
from sandbox.store import Store

RB = "resourcebindings.work.karmada.io"
CRB = "clusterresourcebindings.work.karmada.io"
CLUSTERS = "clusters.cluster.karmada.io"
SCHEDULER_NAMES = ("", "default-scheduler")


def choose(
    clusters: Sequence[ClusterView], binding: BindingView, demand: Resources
) -> tuple[str | None, str, str]:
    """(cluster or None, affinity term name, message)."""
    placement = binding.placement
    terms: list[tuple[str, ClusterAffinity | None]] = [("", None)]
    if placement is not None:
        if placement.affinity is not None or not placement.affinities:
            terms = [("", placement.affinity)]
        else:
            terms = list(placement.affinities)
    tolerations = placement.tolerations if placement is not None else ()
    ref = binding.resource
    reasons: dict[str, int] = {}
    for term, affinity in terms:
        feasible = []
        for cluster in clusters:
            why = _unfit(cluster, affinity, tolerations, ref.api_version, ref.kind)
            if why:
                reasons[why] = reasons.get(why, 0) + 1
            else:
                feasible.append(cluster)
        if feasible:
            best = min(feasible, key=lambda c: _rank(c, demand, clusters))
            return best.name, term, ""
    detail = ", ".join(f"{n} {why}" for why, n in sorted(reasons.items()))
    return None, "", f"0/{len(clusters)} clusters are available: {detail or 'no cluster'}."


def _unfit(
    cluster: ClusterView,
    affinity: ClusterAffinity | None,
    tolerations: Sequence[Any],
    api_version: str,
    kind: str,
) -> str:
    if not affinity_allows(affinity, cluster):
        return "cluster(s) did not match the placement cluster affinity constraint"
    if not tolerates(tolerations, cluster.taints):
        return "cluster(s) had untolerated taint"
    if not cluster.ready:
        return "cluster(s) were not ready"
    if not cluster.serves(api_version, kind):
        return f"cluster(s) did not have the API resource {api_version} {kind}"
    return ""


def _rank(
    cluster: ClusterView, demand: Resources, clusters: Sequence[ClusterView]
) -> tuple[bool, Fraction, str]:
    """Smaller is better: fits first, then the most free of the dominant resource, then name."""
    free = cluster.free
    fits = all(free.get_amount(k) >= v for k, v in demand.items() if k != PODS)
    return not fits, -free.get_amount(_dominant(demand, clusters)), cluster.name


def _dominant(demand: Resources, clusters: Sequence[ClusterView]) -> str:
    total = Resources.sum(c.allocatable for c in clusters)
    shares = {
        k: v / total[k] if total.get_amount(k) else Fraction(0)
        for k, v in demand.items()
        if k != PODS
    }
    return max(sorted(shares), key=lambda k: shares[k]) if shares else "cpu"


class Scheduler:
    def __init__(self, store: Store) -> None:
        self.store = store
        self.waiting: set[tuple[str, str, str]] = set()  # seen without spec.clusters

    def run_keys(self, keys: Sequence[tuple[str, str, str]], now: datetime) -> None:
        """Only these bindings (resource key, namespace, name)."""
        if not keys:
            return
        clusters = self._clusters()
        for key in keys:
            resource, namespace, name = key
            binding = get_or_none(self.store, resource, name, namespace or None)
            if binding is None or (binding.get("spec") or {}).get("clusters"):
                self.waiting.discard(key)
                if binding is None:
                    continue
            else:
                self.waiting.add(key)
            with_retry(
                self.store,
                resource,
                binding,
                lambda b, r=resource: self.reconcile(r, b, clusters, now),
            )

    def _clusters(self) -> list[ClusterView]:
        clusters = []
        for obj in self.store.list(CLUSTERS)["items"]:
            try:
                clusters.append(read_cluster(obj))
            except DemandError as error:
                log.warning("scheduler: unreadable cluster %s: %s", meta(obj).get("name"), error)
        clusters.sort(key=lambda c: c.name)
        return clusters

    def run(self, now: datetime) -> None:
        clusters = self._clusters()
        for resource in (RB, CRB):
            for binding in self.store.list(resource)["items"]:
                with_retry(
                    self.store,
                    resource,
                    binding,
                    lambda b, r=resource: self.reconcile(r, b, clusters, now),
                )

    def reconcile(
        self,
        resource: str,
        binding: dict[str, Any],
        clusters: Sequence[ClusterView],
        now: datetime,
    ) -> None:
        if deleting(binding):
            return
        m = meta(binding)
        name, namespace = m["name"], m.get("namespace")
        spec = binding.get("spec") or {}
        if spec.get("schedulerName", "") not in SCHEDULER_NAMES:
            return
        if (spec.get("suspension") or {}).get("scheduling") is True:
            return
        if spec.get("clusters"):
            if not condition_status(binding, "Scheduled"):  # placed, but the status write failed
                message = "Binding has been scheduled successfully."
                self._status(resource, binding, "True", "Success", message, "", now)
            return
        try:
            view = read_binding(binding)
        except DemandError as error:
            log.warning("scheduler: unreadable binding %s/%s: %s", namespace, name, error)
            return
        chosen, term, message = choose(clusters, view, self._demand(binding, view))
        if chosen is None:
            self._status(resource, binding, "False", "NoClusterFit", message, term, now)
            return
        target: dict[str, Any] = {"name": chosen}
        if view.replicas:
            target["replicas"] = view.replicas
        patch = {
            "metadata": {"resourceVersion": meta(binding)["resourceVersion"]},
            "spec": {"clusters": [target]},
        }
        placed = self.store.patch(resource, name, patch, namespace=namespace)
        self._status(
            resource,
            placed,
            "True",
            "Success",
            "Binding has been scheduled successfully.",
            term,
            now,
        )

    def _demand(self, binding: Mapping[str, Any], view: BindingView) -> Resources:
        ref = view.resource
        template = None
        rt = self.store.registry.for_kind(ref.api_version, ref.kind)
        if rt is not None:
            template = get_or_none(self.store, rt, ref.name, ref.namespace or None)
        try:
            workload = read_workload(template) if template is not None else None
        except DemandError:
            workload = None
        if workload is not None:
            return workload.total
        per_replica = view.replica_requirements or Resources()
        return per_replica.scale(max(view.replicas, 1))

    def _status(
        self,
        resource: str,
        binding: dict[str, Any],
        state: str,
        reason: str,
        message: str,
        term: str,
        now: datetime,
    ) -> None:
        status = dict(binding.get("status") or {})
        before = dict(status)
        status["conditions"] = condition(
            status.get("conditions"), "Scheduled", state, reason, message, now
        )
        status["schedulerObservedGeneration"] = meta(binding).get("generation", 0)
        if term:
            status["schedulerObservedAffinityName"] = term
        if state == "True":
            status["lastScheduledTime"] = now_rfc3339(now)
        if status == before:
            return
        binding["status"] = status
        self.store.update_status(resource, binding)
