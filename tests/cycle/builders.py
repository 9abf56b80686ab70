"""Fleets by shape for the cycle tests: clusters of N identical nodes, jobs of N identical pods.

Values are built directly (no YAML objects), so a scenario says only what matters to it:

    clusters:
      - {name: east, nodes: 4, node: {nvidia.com/gpu: 8, cpu: 64, memory: 512Gi}, used: 2}
    jobs:
      - {name: a, queue: q, pods: 2, pod: {nvidia.com/gpu: 8}, priority: 10, at: 1}

``used`` nodes are fully allocated; ``at`` is the enqueue time in minutes after the epoch of
the scenario; ``admitted: east`` makes a job that already runs there (its pods count in the
cluster's allocated and its queue's usage); ``adopted: true`` drops fleetgate's admission
annotations from such a job (placed before fleetgate was installed, or its annotations lost:
its Scheduled condition gives the time); ``backoffUntil`` (RFC 3339) and ``attempts`` mark a
requeued job; ``namespace`` (default ``team``) with the scenario's ``namespaces`` (name → its
labels; a namespace not listed has only its name label) for queues' ``namespaceSelector``;
``nominated: east`` marks a preemptor whose victims were taken on east.
Dependencies: ``after`` (the ``fleetgate.io/after`` text) and ``sameClusterAs``
go on the template; ``finished: succeeded`` or ``finished: failed`` marks an admitted job's
clusters as reporting that end (it then holds nothing); ``managed: false`` makes a binding
fleetgate does not manage.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

from engine import annotations as ann
from engine.fleet.affinity import (
    ClusterAffinity,
    LabelSelector,
    PlacementView,
    Taint,
    Toleration,
)
from engine.fleet.frozen import FrozenDict
from engine.fleet.model import (
    NAME_LABEL,
    BindingView,
    ClusterView,
    NamespaceView,
    ObjectRef,
    PriorityClassView,
    ResourceModel,
    Snapshot,
)
from engine.quantity import parse_quantity
from engine.resources import Resources
from engine.workloads.model import Role, Workload

EPOCH = dt.datetime(2025, 3, 10, 8, 0, tzinfo=dt.UTC)
NOW = EPOCH + dt.timedelta(hours=2)
KINDS = {
    "PyTorchJob": "kubeflow.org/v1",
    "MPIJob": "kubeflow.org/v2beta1",
    "Job": "batch/v1",
    "Deployment": "apps/v1",
    "RayJob": "ray.io/v1",
    "SparkApplication": "sparkoperator.k8s.io/v1beta2",
}
RESIZABLE = {"Job", "Deployment"}
INF = Fraction(10**12)


def res(amounts: Mapping[str, Any] | None) -> Resources:
    return Resources({k: parse_quantity(v) for k, v in (amounts or {}).items()})


def cluster(spec: Mapping[str, Any], running: Sequence[tuple[int, Resources]] = ()) -> ClusterView:
    """``nodes`` × ``node``; ``used`` whole nodes allocated; running jobs' pods allocated too."""
    nodes = int(spec.get("nodes", 1))
    node = res(spec.get("node", {"cpu": 64, "memory": "512Gi"})) + {"pods": 110}
    used_nodes = int(spec.get("used", 0))
    allocated = node.scale(used_nodes) + res(spec.get("allocated"))
    per_node_free = [node] * (nodes - used_nodes)
    # largest pods first, whatever order the jobs were listed in: the same fleet for any order
    ordered = sorted(running, key=lambda item: sorted(item[1].items()), reverse=True)
    for count, pod in ordered:
        allocated = allocated + pod.scale(count)
        for _ in range(count):  # first fit, as the member's scheduler would
            for i, free in enumerate(per_node_free):
                if all(free.get_amount(r) >= v for r, v in pod.items()):
                    per_node_free[i] = Resources(
                        {r: free.get_amount(r) - pod.get_amount(r) for r in free}
                    )
                    break
    models, modelings = _models(node, per_node_free, used_nodes, spec.get("models", True))
    labels = dict(spec.get("labels", {}))
    apis = spec.get("apis")
    return ClusterView(
        name=spec["name"],
        labels=FrozenDict(labels),
        provider=spec.get("provider", ""),
        region=spec.get("region", ""),
        zones=tuple(spec.get("zones", ())),
        taints=tuple(
            Taint(t["key"], t.get("value", ""), t.get("effect", "NoSchedule"))
            for t in spec.get("taints", ())
        ),
        ready=bool(spec.get("ready", True)),
        ready_changed_at=EPOCH,
        api_enablements=frozenset((KINDS[k], k) for k in apis) if apis is not None else frozenset(),
        allocatable=node.scale(nodes),
        allocated=allocated,
        allocating=Resources(),
        resource_models=models,
        allocatable_modelings=modelings,
    )


def _models(
    node: Resources, free_nodes: Sequence[Resources], used: int, enabled: bool
) -> tuple[tuple[ResourceModel, ...], tuple[tuple[int, int], ...]]:
    """One grade per distinct free node shape (plus grade 0 for full nodes), on the resources
    that matter for shape: cpu, memory and GPUs."""
    if not enabled:
        return (), ()
    shaped = [r for r in ("cpu", "memory", "nvidia.com/gpu") if r in node]
    shapes = sorted({tuple(f.get_amount(r) for r in shaped) for f in free_nodes})
    shapes = [s for s in shapes if any(s)]
    models = [ResourceModel(0, FrozenDict({r: (Fraction(0), Fraction(1)) for r in shaped}))]
    counts = [(0, used + sum(1 for f in free_nodes if not any(f.get_amount(r) for r in shaped)))]
    for grade, shape in enumerate(shapes, start=1):
        ranges = {r: (amount, INF) for r, amount in zip(shaped, shape, strict=True)}
        models.append(ResourceModel(grade, FrozenDict(ranges)))
        counts.append(
            (grade, sum(1 for f in free_nodes if tuple(f.get_amount(r) for r in shaped) == shape))
        )
    return tuple(models), tuple(c for c in counts if c[1])


def job(spec: Mapping[str, Any]) -> tuple[BindingView, Workload]:
    kind = spec.get("kind", "PyTorchJob")
    namespace = spec.get("namespace", "team")
    name = spec["name"]
    created = EPOCH + dt.timedelta(minutes=float(spec.get("at", 0)))
    uid = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{namespace}/{name}"))
    roles = tuple(
        Role(r.get("name", f"role{i}"), int(r.get("pods", 1)), res(r.get("pod")))
        for i, r in enumerate(
            spec.get("roles", [{"pods": spec.get("pods", 1), "pod": spec.get("pod")}])
        )
    )
    labels = {"fleetgate.io/queue": spec["queue"]} if "queue" in spec else {}
    labels.update(spec.get("labels", {}))
    workload = Workload(
        api_version=KINDS[kind],
        kind=kind,
        namespace=namespace,
        name=name,
        uid=uid,
        roles=roles,
        min_member=int(spec.get("minMember", sum(r.replicas for r in roles))),
        resizable=kind in RESIZABLE,
        priority_class_name=f"p{spec['priority']}" if "priority" in spec else None,
        labels=FrozenDict(labels),
        annotations=FrozenDict(
            {
                key: spec[field]
                for field, key in (("after", ann.AFTER), ("sameClusterAs", ann.SAME_CLUSTER_AS))
                if field in spec
            }
        ),
        created_at=created,
    )
    annotations: dict[str, str] = {ann.QUEUED_AT: ann.format_time(created)}
    clusters: tuple[tuple[str, int], ...] = ()
    applied: dict[str, bool] = {}
    scheduled_at: dt.datetime | None = None
    admitted = spec.get("admitted")
    if admitted:
        placed = admitted if isinstance(admitted, Mapping) else {admitted: workload.pods}
        clusters = tuple((c, int(n)) for c, n in placed.items())
        annotations[ann.ADMITTED_AT] = ann.format_time(created)
        annotations[ann.ADMITTED_TO] = ",".join(placed)
        applied = {c: not spec.get("inFlight", False) for c in placed}
        if spec.get("inFlight"):
            annotations[ann.ADMITTED_AT] = ann.format_time(NOW - dt.timedelta(minutes=1))
        if spec.get("adopted"):  # placed before fleetgate, or its annotations lost
            scheduled_at = dt.datetime.fromisoformat(annotations.pop(ann.ADMITTED_AT))
            del annotations[ann.ADMITTED_TO]
    if "backoffUntil" in spec:
        annotations[ann.BACKOFF_UNTIL] = spec["backoffUntil"]
    if "attempts" in spec:
        annotations[ann.ATTEMPTS] = str(spec["attempts"])
    if "preemptions" in spec:  # how often the job was preempted already
        annotations[ann.PREEMPTIONS] = str(spec["preemptions"])
    if "gaveUp" in spec:  # the reconciler gave the job up after maxAttempts
        annotations[ann.GAVE_UP] = spec["gaveUp"]
    if "nominated" in spec:  # a preemption it made nominated it to this cluster
        annotations[ann.NOMINATED_CLUSTER] = spec["nominated"]
    binding = BindingView(
        namespace=namespace,
        name=f"{name}-{kind.lower()}",
        uid=str(uuid.uuid5(uuid.NAMESPACE_URL, f"rb/{namespace}/{name}")),
        kind="ResourceBinding",
        resource=ObjectRef(KINDS[kind], kind, namespace, name, uid),
        policy_kind="",
        policy_permanent_id="",
        suspended_scheduling=True,
        clusters=clusters,
        replicas=0,
        replica_requirements=None,
        priority_class_name="",
        components=(),
        placement=_placement(spec.get("placement")),
        applied=FrozenDict(applied),
        health=FrozenDict(dict.fromkeys(applied, "Healthy")),
        finished=frozenset(n for n, _ in clusters) if spec.get("finished") else frozenset(),
        failed=frozenset(n for n, _ in clusters if spec.get("finished") == "failed"),
        conditions=FrozenDict(),
        generation=1,
        scheduler_observed_generation=0,
        labels=FrozenDict({ann.MANAGED: "true"} if spec.get("managed", True) else {}),
        annotations=FrozenDict(annotations),
        created_at=created,
        scheduled_at=scheduled_at,
    )
    return binding, workload


def _placement(spec: Mapping[str, Any] | None) -> PlacementView | None:
    if spec is None:
        return None
    affinity = None
    if "clusters" in spec or "labels" in spec:
        selector = LabelSelector(FrozenDict(spec["labels"])) if "labels" in spec else None
        affinity = ClusterAffinity(tuple(spec.get("clusters", ())), (), selector)
    tolerations = tuple(
        Toleration(t["key"], t.get("operator", "Equal"), t.get("value", ""), t.get("effect", ""))
        for t in spec.get("tolerations", ())
    )
    return PlacementView(affinity=affinity, tolerations=tolerations)


def snapshot(scenario: Mapping[str, Any]) -> Snapshot:
    jobs = [job(spec) for spec in scenario.get("jobs", ())]
    running: dict[str, list[tuple[int, Resources]]] = {}
    for (binding, workload), spec in zip(jobs, scenario.get("jobs", ()), strict=True):
        if spec.get("inFlight") or spec.get("finished"):
            continue  # admitted, but the cluster's status does not show it yet, or it ended
        for name, count in binding.clusters:
            for role in workload.roles:
                n = count if workload.resizable else role.replicas
                running.setdefault(name, []).append((n, role.requests + {"pods": 1}))
    clusters = tuple(
        sorted(
            (cluster(c, running.get(c["name"], ())) for c in scenario.get("clusters", ())),
            key=lambda c: c.name,
        )
    )
    priorities = sorted({int(s["priority"]) for s in scenario.get("jobs", ()) if "priority" in s})
    return Snapshot(
        clusters=clusters,
        bindings=tuple(sorted((b for b, _ in jobs), key=lambda b: (b.namespace, b.name))),
        workloads=FrozenDict({b.resource.key: w for b, w in jobs}),
        policies=(),
        priority_classes=tuple(PriorityClassView(f"p{p}", p, False) for p in priorities),
        namespaces=FrozenDict(
            {
                name: NamespaceView(name, FrozenDict({**(labels or {}), NAME_LABEL: name}))
                for name, labels in (scenario.get("namespaces") or {}).items()
            }
        ),
    )
