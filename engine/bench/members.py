"""Synthetic member clusters: realistic node shapes, node-level usage, resource models.

A ``Member`` is the working state of one cluster while a synthetic fleet is generated (free
capacity per node); ``Member.view`` freezes it into the ``ClusterView`` a cycle reads, with
``allocated`` and ``allocatableModelings`` computed from the same nodes.
"""

from __future__ import annotations

import bisect
import datetime as dt
import functools
import random
from collections import Counter
from collections.abc import Sequence
from fractions import Fraction

from engine.fleet.frozen import FrozenDict
from engine.fleet.model import (
    ClusterView,
    PlacementView,
    ResourceModel,
    Taint,
    affinity_allows,
    tolerates,
)
from engine.resources import PODS, Resources

GPU = "nvidia.com/gpu"
MODEL = "gpu.fleetgate.io/model"
CAPACITY = "fleetgate.io/capacity-type"
MI = 2**20
INFINITE = 2**63 - 1  # Karmada's "no upper bound" for the last grade of a resource model
PODS_PER_NODE = 110

Pod = tuple[int, int, int]  # per-pod request: cpu millicores, memory MiB, GPUs
DAEMONS: Pod = (2000, 8 * 1024, 0)  # the daemonset pods every node runs

BASE_APIS = (
    ("v1", "Pod"),
    ("v1", "Service"),
    ("v1", "ConfigMap"),
    ("apps/v1", "Deployment"),
    ("apps/v1", "StatefulSet"),
    ("batch/v1", "Job"),
    ("scheduling.k8s.io/v1", "PriorityClass"),
)
KUBEFLOW = (
    ("kubeflow.org/v1", "PyTorchJob"),
    ("kubeflow.org/v1", "TFJob"),
    ("kubeflow.org/v2beta1", "MPIJob"),
)
VOLCANO = (("batch.volcano.sh/v1alpha1", "Job"), ("scheduling.volcano.sh/v1beta1", "PodGroup"))
RAY = (("ray.io/v1", "RayCluster"), ("ray.io/v1", "RayJob"))
SPARK = (("sparkoperator.k8s.io/v1beta2", "SparkApplication"),)
PLACES = (
    ("aws", "us-east-1", ("us-east-1a", "us-east-1b")),
    ("aws", "us-west-2", ("us-west-2a",)),
    ("gcp", "us-central1", ("us-central1-a", "us-central1-c")),
    ("azure", "eastus", ("eastus-1",)),
)
# Grade minimums per resource (cpu millicores, memory MiB, GPUs); a grade's max is the next
# grade's min, the last one's is INFINITE. GPU members grade GPUs [0,1) [1,2) [2,4) [4,8) [8,∞).
GPU_GRADES = ((0, 8000, 16000, 32000, 64000), (0, 65536, 131072, 262144, 524288), (0, 1, 2, 4, 8))
CPU_GRADES = ((0, 4000, 16000, 32000), (0, 16384, 65536, 131072), ())
_UNITS = (("cpu", Fraction(1, 1000)), ("memory", Fraction(MI)), (GPU, Fraction(1)))


class Member:
    """One member cluster: identity, and free capacity per node as [cpu, memory, GPUs, pods].

    Nodes are filed in buckets by their free scarce resource (GPUs, or whole cores on CPU
    members) so that placing a pod is a best fit: the fullest node it fits on.
    """

    def __init__(self, name: str, labels: dict[str, str], node: Pod, count: int) -> None:
        self.name, self.labels, self.node = name, FrozenDict(labels), node
        self.provider, self.region, self.zones = PLACES[0]
        self.taints: tuple[Taint, ...] = ()
        self.ready, self.ready_changed_at = True, dt.datetime(2025, 1, 1, tzinfo=dt.UTC)
        self.apis: frozenset[tuple[str, str]] = frozenset()
        self.free = [[node[0], node[1], node[2], PODS_PER_NODE] for _ in range(count)]
        self.buckets: dict[int, dict[int, None]] = {}
        for i in range(count):
            self._file(i)
        self.used = self.cap = 0  # scarce resource in use, and how far running jobs may fill it

    @classmethod
    def draw(cls, rng: random.Random, index: int, now: dt.datetime) -> Member:
        """Member ``index``: 0 is a GPU member, 1 a CPU member, the rest 60% GPU."""
        apis = set(BASE_APIS)
        if index == 0 or (index != 1 and rng.random() < 0.6):
            model = rng.choice(("h100", "a100"))
            node = (rng.choice((96, 128, 192)) * 1000, rng.choice((1024, 1536, 2048)) * 1024, 8)
            labels = {CAPACITY: "on-demand", MODEL: model}
            member = cls(f"gpu-{model}-{index:03d}", labels, node, rng.randint(16, 64))
            apis.update(KUBEFLOW)
            optional = ((VOLCANO, 0.8), (RAY, 0.7))
        else:
            spot = rng.random() < 0.4
            name = f"cpu-{'spot-' if spot else ''}{index:03d}"
            labels = {CAPACITY: "spot" if spot else "on-demand"}
            member = cls(name, labels, (64000, 256 * 1024, 0), rng.randint(50, 200))
            member.taints = (Taint(CAPACITY, "spot", "NoSchedule"),) if spot else ()
            apis.update(SPARK)
            optional = ((VOLCANO, 0.5), (RAY, 0.5))
        for extra, chance in optional:
            if rng.random() < chance:
                apis.update(extra)
        member.apis = frozenset(apis)
        member.provider, member.region, member.zones = rng.choice(PLACES)
        member.ready = index < 2 or rng.random() >= 0.05
        ago = rng.randint(3600, 30 * 86400) if member.ready else rng.randint(60, 1800)
        member.ready_changed_at = now - dt.timedelta(seconds=ago)
        member._fill_external(rng)
        return member

    def _fill_external(self, rng: random.Random) -> None:
        """Daemonsets on every node, then non-fleetgate pods on 10–40% of the scarce resource;
        running fleetgate jobs may later fill the member to 55–85%."""
        for i in range(len(self.free)):
            self._put(i, DAEMONS)
        total = len(self.free) * self._scarce(self.node)
        target, used = rng.uniform(0.10, 0.40) * total, 0
        for _ in range(8 * len(self.free)):
            if used >= target:
                break
            unit = rng.choice((1, 2, 4, 8))
            gpu_pod = (unit * 10000, unit * 100 * 1024, unit)
            pod = gpu_pod if self.node[2] else (unit * 2000, unit * 6 * 1024, 0)
            if self._put(rng.randrange(len(self.free)), pod):
                used += self._scarce(pod)
        self.used = total - sum(self._scarce(f) for f in self.free)
        self.cap = max(self.used, int(rng.uniform(0.55, 0.85) * total))

    def admits(self, api_version: str, kind: str, model: str | None, to: PlacementView) -> bool:
        """Serves the kind, matches the placement's affinity and tolerations, has the model."""
        return (
            (api_version, kind) in self.apis
            and affinity_allows(to.affinity, self)
            and tolerates(to.tolerations, self.taints)
            and (model is None or self.labels.get(MODEL) == model)
        )

    def place(self, pods: Sequence[Pod]) -> bool:
        """All pods on nodes of this member within its cap, or none (and nothing changes)."""
        demand = sum(self._scarce(pod) for pod in pods)
        if self.used + demand > self.cap:
            return False
        taken: list[tuple[int, Pod]] = []
        for pod in pods:
            node = self._take(pod)
            if node is None:
                for i, done in taken:
                    self._shift(i, done, 1)
                return False
            taken.append((node, pod))
        self.used += demand
        return True

    def view(self) -> ClusterView:
        n, (cpu, memory, gpus) = len(self.free), self.node
        used = [sum(self.node[k] - f[k] for f in self.free) for k in range(3)]
        pods = sum(PODS_PER_NODE - f[3] for f in self.free)
        grades = GPU_GRADES if gpus else CPU_GRADES
        counts = Counter(_grade(f, grades) for f in self.free)
        return ClusterView(
            name=self.name,
            labels=self.labels,
            provider=self.provider,
            region=self.region,
            zones=self.zones,
            taints=self.taints,
            ready=self.ready,
            ready_changed_at=self.ready_changed_at,
            api_enablements=self.apis,
            allocatable=resources(n * cpu, n * memory, n * gpus, n * PODS_PER_NODE),
            allocated=resources(used[0], used[1], used[2], pods),
            allocating=Resources(),
            resource_models=resource_models(grades),
            allocatable_modelings=tuple((g, counts[g]) for g in range(len(grades[0]))),
        )

    def _scarce(self, amounts: Sequence[int]) -> int:
        return amounts[2] if self.node[2] else amounts[0]

    def _key(self, i: int) -> int:
        return self.free[i][2] if self.node[2] else self.free[i][0] // 1000

    def _file(self, i: int) -> None:
        self.buckets.setdefault(self._key(i), {})[i] = None

    def _shift(self, i: int, pod: Pod, sign: int) -> None:
        del self.buckets[self._key(i)][i]
        free = self.free[i]
        for k in range(3):
            free[k] += sign * pod[k]
        free[3] += sign
        self._file(i)

    def _put(self, i: int, pod: Pod) -> bool:
        free = self.free[i]
        if free[0] < pod[0] or free[1] < pod[1] or free[2] < pod[2] or free[3] < 1:
            return False
        self._shift(i, pod, -1)
        return True

    def _take(self, pod: Pod) -> int | None:
        top = self.node[2] if self.node[2] else self.node[0] // 1000
        for key in range(pod[2] if self.node[2] else pod[0] // 1000, top + 1):
            for i in self.buckets.get(key, ()):
                if self._put(i, pod):
                    return i  # the bucket changed: stop iterating it at once
        return None


@functools.cache
def resources(cpu_milli: int, memory_mib: int, gpus: int, pods: int = 0) -> Resources:
    return Resources(
        {"cpu": Fraction(cpu_milli, 1000), "memory": memory_mib * MI, GPU: gpus, PODS: pods}
    )


@functools.cache
def resource_models(grades: tuple[tuple[int, ...], ...]) -> tuple[ResourceModel, ...]:
    models = []
    for grade in range(len(grades[0])):
        ranges = {}
        for (name, unit), mins in zip(_UNITS, grades, strict=True):
            if mins:
                top = mins[grade + 1] * unit if grade + 1 < len(mins) else Fraction(INFINITE)
                ranges[name] = (mins[grade] * unit, top)
        models.append(ResourceModel(grade, FrozenDict(ranges)))
    return tuple(models)


def _grade(free: Sequence[int], grades: tuple[tuple[int, ...], ...]) -> int:
    """Karmada's node grade: the lowest of the grades each resource's free amount falls in."""
    return min(bisect.bisect_right(mins, free[k]) - 1 for k, mins in enumerate(grades) if mins)
