"""A seeded synthetic fleet for ``fleetgate bench``: member clusters, a queue tree and jobs.

Pure: every value comes from ``random.Random(seed)`` and the ``now`` passed in; no I/O, no clock.
Values are built directly, not through Karmada YAML, so 50,000 jobs build in seconds.

Members are GPU clusters (16–64 nodes × 8 H100 or A100) and CPU clusters (50–200 nodes × 64 cpu,
some tainted spot); about 5% are NotReady (``engine.bench.members``). Pending jobs
(``engine.bench.shapes``) are managed, suspended ResourceBindings without clusters, spread over
the leaf queues (``engine.bench.policies``) with a Zipf skew. Running jobs, 10–20% as many as
pending ones where capacity allows, are admitted, applied and healthy on one Ready member and
packed onto its nodes, so each member's ``allocated`` includes them.
"""

from __future__ import annotations

import bisect
import dataclasses
import datetime as dt
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from engine import annotations as notes
from engine.bench import policies as pol
from engine.bench import shapes
from engine.bench.members import MODEL, Member, resources
from engine.fleet.frozen import FrozenDict
from engine.fleet.model import BindingView, ObjectKey, ObjectRef, PropagationView, Snapshot
from engine.workloads.model import Role, Workload

QUEUE = "fleetgate.io/queue"
CPP_ID = "clusterpropagationpolicy.karmada.io/permanent-id"
CPP_NAME = "clusterpropagationpolicy.karmada.io/name"
RB_ID = "resourcebinding.karmada.io/permanent-id"

_PRIORITIES = (None, "low", "normal", "high", "critical")  # None: the global default, normal
_PRIORITY_CUM = (35, 55, 70, 95, 100)
_EMPTY: FrozenDict[str, Any] = FrozenDict()


@dataclass(frozen=True)
class SyntheticFleet:
    snapshot: Snapshot
    policy_documents: tuple[dict[str, Any], ...]  # Queue docs, then one SchedulingPolicy


@dataclass(frozen=True, slots=True)
class _Context:
    """What a new job is drawn against."""

    leaves: tuple[tuple[str, str], ...]  # (queue, tenant); the tenant is the job's namespace
    cum_weights: tuple[float, ...]  # how busy each leaf is
    policies: Mapping[str, PropagationView]
    models: tuple[str, ...]  # GPU models in the fleet


def synthetic_fleet(
    *, jobs: int, clusters: int, queues: int, seed: int, now: dt.datetime
) -> SyntheticFleet:
    """``jobs`` pending jobs on ``clusters`` members under ``queues`` queues; same input, same
    fleet. Running jobs come on top: 10–20% as many as pending ones, as far as capacity allows."""
    if jobs < 0 or clusters < 1 or queues < 1:
        raise ValueError(
            f"need jobs ≥ 0, clusters ≥ 1, queues ≥ 1; got {jobs}, {clusters}, {queues}"
        )
    rng = random.Random(seed)
    members = [Member.draw(rng, i, now) for i in range(clusters)]
    ready = [m for m in members if m.ready]
    capacity = [sum(len(m.free) * m.node[k] for m in ready) // unit for k, unit in _CAPACITY]
    documents, leaves = pol.queue_tree(rng, queues, capacity)
    ranks = list(range(len(leaves)))
    rng.shuffle(ranks)
    busy = [1 / (rank + 1) ** 1.1 for rank in ranks]  # Zipf: a few leaves hold most jobs
    policies = pol.propagation_policies(rng)
    models = tuple(sorted({m.labels[MODEL] for m in members if MODEL in m.labels}))
    ctx = _Context(tuple(leaves), tuple(_cumulative(busy)), policies, models)
    jobs_by_key: dict[ObjectKey, tuple[BindingView, Workload]] = {}
    for index in range(jobs):
        draft = shapes.draw(rng, models)
        created = now - dt.timedelta(seconds=rng.randint(60, 6 * 3600))
        pair = _job(rng, ctx, draft, f"{draft.stem}-{index:05d}", created, None)
        jobs_by_key[pair[0].resource.key] = pair
    eligible: dict[tuple[str, str, str, str | None], list[Member]] = {}
    target = round(jobs * rng.uniform(0.10, 0.20))
    for index in range(3 * target):  # running jobs: tries stop at the target or when full
        draft = shapes.draw(rng, models)
        key = (draft.policy, draft.api_version, draft.kind, draft.model)
        if key not in eligible:
            placement = policies[draft.policy].placement
            eligible[key] = [m for m in ready if m.admits(*key[1:], placement)]
        cluster = _place(rng, eligible[key], draft)
        if cluster is None:
            continue
        created = now - dt.timedelta(seconds=rng.randint(3600, 48 * 3600))
        admitted = (cluster, created + dt.timedelta(seconds=rng.randint(10, 600)))
        pair = _job(rng, ctx, draft, f"{draft.stem}-r{index:05d}", created, admitted)
        jobs_by_key[pair[0].resource.key] = pair
        if len(jobs_by_key) == jobs + target:
            break
    snapshot = Snapshot(
        clusters=tuple(sorted((m.view() for m in members), key=lambda c: c.name)),
        bindings=tuple(sorted((b for b, _ in jobs_by_key.values()), key=_binding_order)),
        workloads=FrozenDict({key: w for key, (_, w) in jobs_by_key.items()}),
        policies=tuple(sorted(policies.values(), key=lambda p: (p.kind, p.namespace, p.name))),
        priority_classes=pol.PRIORITY_CLASSES,
    )
    return SyntheticFleet(snapshot, (*documents, pol.scheduling_policy()))


def arrival(
    fleet: SyntheticFleet, index: int, seed: int, now: dt.datetime
) -> tuple[BindingView, Workload]:
    """One more pending job, named ``<stem>-a<index>`` (unique in the fleet), created by ``now``.

    Drawn like the fleet's pending jobs, onto a leaf queue chosen uniformly.
    """
    rng = random.Random(f"arrival:{seed}:{index}")
    queues = [d for d in fleet.policy_documents if d["kind"] == "Queue"]
    parents = {d["metadata"]["name"]: d["spec"].get("parent") for d in queues}
    leaves = [(name, _root(name, parents)) for name in parents if name not in parents.values()]
    models = sorted({c.labels[MODEL] for c in fleet.snapshot.clusters if MODEL in c.labels})
    policies = {p.name: p for p in fleet.snapshot.policies}
    cum_weights = tuple(float(i) for i in range(1, len(leaves) + 1))
    ctx = _Context(tuple(leaves), cum_weights, policies, tuple(models))
    draft = shapes.draw(rng, ctx.models)
    created = now - dt.timedelta(seconds=rng.randint(0, 60))
    return _job(rng, ctx, draft, f"{draft.stem}-a{index:05d}", created, None)


def with_arrival(snapshot: Snapshot, binding: BindingView, workload: Workload) -> Snapshot:
    """``snapshot`` with one more binding and its workload, keeping the documented orders. The
    workloads map says that its one new key is what changed, as a ``LiveSnapshot``'s does
    (``FrozenDict.changed_since``): what the JobCache keeps by template is then not compared
    template by template (15,000 of them) for the one that came."""
    bindings = list(snapshot.bindings)
    bisect.insort(bindings, binding, key=_binding_order)
    key = binding.resource.key
    items = {**snapshot.workloads.to_dict(), key: workload}
    workloads = FrozenDict.in_order(sorted(items), items, (snapshot.workloads, {key}))
    return dataclasses.replace(snapshot, bindings=tuple(bindings), workloads=workloads)


_CAPACITY = ((2, 1), (0, 1000), (1, 1024))  # (node field, unit): GPUs, cpu cores, memory GiB


def _place(rng: random.Random, members: Sequence[Member], draft: shapes.Draft) -> str | None:
    """Up to three eligible members at random; the first that fits the whole gang takes it."""
    pods = draft.pods
    for member in rng.sample(members, min(3, len(members))):
        if member.place(pods):
            return member.name
    return None


def _job(
    rng: random.Random,
    ctx: _Context,
    draft: shapes.Draft,
    name: str,
    created: dt.datetime,
    admitted: tuple[str, dt.datetime] | None,  # (cluster, when)
) -> tuple[BindingView, Workload]:
    """The template's Workload and its ResourceBinding, as Karmada and fleetgate write them."""
    queue, namespace = shapes.pick(rng, ctx.leaves, ctx.cum_weights)
    priority = shapes.pick(rng, _PRIORITIES, _PRIORITY_CUM)
    policy = ctx.policies[draft.policy]
    labels = {QUEUE: queue, CPP_ID: policy.permanent_id}
    if draft.model:
        labels[MODEL] = draft.model
    if draft.native and draft.policy != shapes.CPU_BATCH:
        labels[pol.ACCELERATOR] = "nvidia"
    roles = tuple(Role(n, count, resources(*pod), least) for n, count, pod, least in draft.roles)
    template = ObjectRef(draft.api_version, draft.kind, namespace, name, pol.new_uid(rng))
    work = Workload(
        api_version=draft.api_version,
        kind=draft.kind,
        namespace=namespace,
        name=name,
        uid=template.uid,
        roles=roles,
        min_member=draft.min_member,
        resizable=draft.resizable,
        priority_class_name=priority,
        labels=labels,
        annotations={CPP_NAME: policy.name},
        created_at=created,
    )
    annotations = {CPP_NAME: policy.name, notes.QUEUED_AT: notes.format_time(created)}
    applied, health, conditions, clusters = _EMPTY, _EMPTY, _EMPTY, ()
    if admitted:
        cluster, at = admitted
        annotations |= {notes.ADMITTED_AT: notes.format_time(at), notes.ADMITTED_TO: cluster}
        annotations[notes.POLICY_VERSION] = "bench"
        clusters = ((cluster, work.pods if draft.native else 0),)
        applied, health = FrozenDict({cluster: True}), FrozenDict({cluster: "Healthy"})
        conditions = FrozenDict({"Scheduled": "True", "FullyApplied": "True"})
    binding = BindingView(
        namespace=namespace,
        name=f"{name}-{draft.kind.lower()}",
        uid=pol.new_uid(rng),
        kind="ResourceBinding",
        resource=template,
        policy_kind=pol.CPP,
        policy_permanent_id=policy.permanent_id,
        suspended_scheduling=True,
        clusters=clusters,
        replicas=work.pods if draft.native else 0,
        replica_requirements=roles[0].requests if draft.native else None,
        priority_class_name=(priority or "") if draft.native else "",
        components=(),
        placement=policy.placement,
        applied=applied,
        health=health,
        finished=frozenset(),
        conditions=conditions,
        generation=2 if admitted else 1,
        scheduler_observed_generation=2 if admitted else 0,
        labels=FrozenDict(
            {notes.MANAGED: "true", CPP_ID: policy.permanent_id, RB_ID: pol.new_uid(rng)}
        ),
        annotations=FrozenDict(annotations),
        created_at=created,
    )
    return binding, work


def _binding_order(binding: BindingView) -> tuple[str, str, str]:
    return (binding.namespace, binding.name, binding.kind)


def _cumulative(weights: Sequence[float]) -> list[float]:
    total, result = 0.0, []
    for weight in weights:
        total += weight
        result.append(total)
    return result


def _root(name: str, parents: Mapping[str, str | None]) -> str:
    parent = parents.get(name)
    while parent:
        name, parent = parent, parents.get(parent)
    return name
