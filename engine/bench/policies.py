"""Synthetic policies: the Queue tree and SchedulingPolicy documents, the Karmada propagation
policies that claim the jobs, and the PriorityClasses.

The queue documents are YAML-ready dicts that ``engine.policy.policyset.load_policy_set`` accepts.
Tenants (top-level queues, one per namespace) share 60–80% of the Ready fleet's GPUs, cpu and
memory as guarantees; each tenant's children split 85–100% of their parent's guarantee.
"""

from __future__ import annotations

import math
import random
import uuid
from collections.abc import Sequence
from typing import Any

from engine.bench.members import CAPACITY, GPU, KUBEFLOW, MODEL, RAY, SPARK, VOLCANO
from engine.bench.shapes import CPU_BATCH, GPU_SERVING, GPU_TRAINING
from engine.fleet.frozen import FrozenDict
from engine.fleet.model import (
    ClusterAffinity,
    LabelSelector,
    PlacementView,
    PriorityClassView,
    PropagationView,
    Requirement,
    ResourceSelector,
    SpreadConstraint,
    Toleration,
)

POLICY_API = "fleetgate.io/v1alpha1"
ACCELERATOR = "fleetgate.io/accelerator"  # label on GPU Jobs and Deployments
CPP = "ClusterPropagationPolicy"

PRIORITY_CLASSES = (  # sorted by name, as Snapshot keeps them
    PriorityClassView("critical", 10000, False),
    PriorityClassView("high", 1000, False),
    PriorityClassView("low", 0, False),
    PriorityClassView("normal", 100, True),
)
_TENANTS = ("prod", "research", "vision", "speech", "analytics", "platform", "ads", "search")
_TENANTS += ("robotics", "genomics", "recsys", "finance")
_LEAVES = ("training", "experiments", "inference", "eval", "data", "batch", "sweeps", "adhoc")


def queue_tree(
    rng: random.Random, count: int, capacity: Sequence[int]
) -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
    """``count`` Queue documents and the leaf queues as (queue, tenant).

    About √count/3 tenants (at least one, each with at least one child); a single queue is its
    own leaf. ``capacity`` is (GPUs, cpu cores, memory GiB) of the Ready members. The first
    tenant, ``prod``, has queue priority 100 and the second 10 when there are several.
    """
    tenants = max(1, min(round(math.sqrt(count) / 3), count // 2))
    children = [1 if count > 1 else 0] * tenants
    spread = [rng.uniform(1, 4) for _ in range(tenants)]
    for t in rng.choices(range(tenants), weights=spread, k=count - tenants - sum(children)):
        children[t] += 1
    fraction, weights = rng.uniform(0.6, 0.8), [rng.uniform(0.5, 2.0) for _ in range(tenants)]
    docs: list[dict[str, Any]] = []
    leaves: list[tuple[str, str]] = []
    for t in range(tenants):
        name = _numbered(_TENANTS, t)
        guarantee = [int(c * fraction * weights[t] / sum(weights)) for c in capacity]
        ceiling = _ceiling(rng, guarantee, None)
        spec: dict[str, Any] = {"description": f"Tenant {name}.", "weight": rng.randint(1, 4)}
        spec |= {"guarantee": _amounts(guarantee), "max": _amounts(ceiling)}
        if t < 2 and tenants > 1:
            spec["priority"] = 100 if t == 0 else 10
        if rng.random() < 0.3:
            spec["lendingLimit"] = {GPU: int(guarantee[0] * rng.uniform(0.3, 0.8))}
        if t == 0 or rng.random() < 0.5:
            spec["preemption"] = {"reclaim": "Any"}
        if not children[t]:
            spec["strategy"] = "BestEffortFIFO"
            leaves.append((name, name))
        docs.append(_queue_doc(name, spec))
        splits = [rng.uniform(0.2, 1.0) for _ in range(children[t])]
        part = rng.uniform(0.85, 1.0) / sum(splits) if splits else 0.0
        for j, split in enumerate(splits):
            leaf = f"{name}-{_numbered(_LEAVES, j)}"
            own = [int(g * split * part) for g in guarantee]
            child: dict[str, Any] = {"parent": name, "weight": rng.randint(1, 4)}
            child["strategy"] = rng.choice(("StrictFIFO", "BestEffortFIFO", "BestEffortFIFO"))
            child |= {"guarantee": _amounts(own), "max": _amounts(_ceiling(rng, own, ceiling))}
            if rng.random() < 0.25:
                child["borrowingLimit"] = {GPU: max(8, own[0] // 2)}
            if rng.random() < 0.4:
                child["preemption"] = {"withinQueue": "LowerPriority", "reclaim": "Any"}
            docs.append(_queue_doc(leaf, child))
            leaves.append((leaf, name))
    return docs, leaves


def scheduling_policy() -> dict[str, Any]:
    """Queue from the ``fleetgate.io/queue`` label and tenant = namespace (the defaults), fair
    sharing over GPUs, cpu and memory, two placement filters and one score."""
    gpu_filter = (
        '!("nvidia.com/gpu" in job.total) || job.total["nvidia.com/gpu"] == 0.0'
        ' || ("nvidia.com/gpu" in cluster.allocatable'
        ' && cluster.allocatable["nvidia.com/gpu"] > 0.0)'
    )
    model_filter = (
        '!("gpu.fleetgate.io/model" in job.labels) || ("gpu.fleetgate.io/model" in cluster.labels'
        ' && cluster.labels["gpu.fleetgate.io/model"] == job.labels["gpu.fleetgate.io/model"])'
    )
    h100_score = (
        '"nvidia.com/gpu" in job.total && job.total["nvidia.com/gpu"] >= 16.0'
        ' && "gpu.fleetgate.io/model" in cluster.labels'
        ' && cluster.labels["gpu.fleetgate.io/model"] == "h100" ? 1.0 : 0.0'
    )
    spec = {
        "description": "Bench fleet: queue from the fleetgate.io/queue label, tenant = namespace.",
        "fairSharing": {"enabled": True, "resources": [GPU, "cpu", "memory"]},
        "gang": {"admitOn": "All"},
        "placement": {
            "strategy": "BinPack",
            "filters": [
                {"name": "gpu-jobs-on-gpu-clusters", "expression": gpu_filter},
                {"name": "requested-gpu-model", "expression": model_filter},
            ],
            "scores": [{"name": "big-gangs-on-h100", "weight": 2, "expression": h100_score}],
        },
    }
    meta = {"name": "bench"}
    return {"apiVersion": POLICY_API, "kind": "SchedulingPolicy", "metadata": meta, "spec": spec}


def propagation_policies(rng: random.Random) -> dict[str, PropagationView]:
    """ClusterPropagationPolicies by name: GPU training (whole on one GPU member), GPU serving
    (any GPU members) and CPU batch (members without GPUs, spot tolerated)."""
    has_gpus = LabelSelector(FrozenDict(), (Requirement(MODEL, "Exists"),))
    no_gpus = LabelSelector(FrozenDict(), (Requirement(MODEL, "DoesNotExist"),))
    spot = (Toleration(CAPACITY, "Equal", "spot", "NoSchedule"),)
    one_cluster = (SpreadConstraint(spread_by_field="cluster", max_groups=1, min_groups=1),)
    gpu_label = LabelSelector(FrozenDict({ACCELERATOR: "nvidia"}))
    training = [ResourceSelector(a, k) for a, k in (*KUBEFLOW, VOLCANO[0], RAY[1])]
    training.append(ResourceSelector("batch/v1", "Job", label_selector=gpu_label))
    batch = [ResourceSelector(*SPARK[0]), ResourceSelector("batch/v1", "Job")]
    batch.append(ResourceSelector("apps/v1", "Deployment"))
    plans = (
        (
            CPU_BATCH,
            0,
            PlacementView(ClusterAffinity(label_selector=no_gpus), tolerations=spot),
            batch,
        ),
        (
            GPU_SERVING,
            10,
            PlacementView(ClusterAffinity(label_selector=has_gpus)),
            [ResourceSelector("apps/v1", "Deployment", label_selector=gpu_label)],
        ),
        (
            GPU_TRAINING,
            10,
            PlacementView(ClusterAffinity(label_selector=has_gpus), spread_constraints=one_cluster),
            training,
        ),
    )
    return {
        name: PropagationView(CPP, "", name, new_uid(rng), priority, placement, tuple(selectors))
        for name, priority, placement, selectors in plans
    }


def new_uid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def _ceiling(rng: random.Random, guarantee: list[int], limit: list[int] | None) -> list[int]:
    """1.5–3 × the guarantee, at least 8 GPUs / 64 cpu / 256Gi, within the parent's max."""
    factor = rng.uniform(1.5, 3.0)
    floors = (8, 64, 256)
    ceiling = [max(math.ceil(g * factor), f) for g, f in zip(guarantee, floors, strict=True)]
    if limit is None:
        return ceiling
    return [max(g, min(c, top)) for g, c, top in zip(guarantee, ceiling, limit, strict=True)]


def _amounts(values: Sequence[int]) -> dict[str, Any]:
    return {GPU: values[0], "cpu": values[1], "memory": f"{values[2]}Gi"}


def _queue_doc(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": POLICY_API, "kind": "Queue", "metadata": {"name": name}, "spec": spec}


def _numbered(words: Sequence[str], i: int) -> str:
    word = words[i % len(words)]
    return word if i < len(words) else f"{word}-{i // len(words)}"
