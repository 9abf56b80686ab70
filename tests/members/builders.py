"""Member-model builders named by shape: ``gpu_member(nodes=2)``, ``gang("a", pods=2, gpus=8)``."""

from __future__ import annotations

import datetime as dt
from fractions import Fraction

from engine.members import ClusterSpec, JobSpec, MemberCluster, NodeGroup, PodGroup
from engine.resources import Resources

T0 = dt.datetime(2025, 3, 10, 9, 0, tzinfo=dt.UTC)
GPU = "nvidia.com/gpu"
GI = 2**30


def at(minutes: float) -> dt.datetime:
    return T0 + dt.timedelta(minutes=minutes)


def gpu_member(name: str = "gpu", *, nodes: int = 2, gpus: int = 8, cpu: int = 96) -> MemberCluster:
    shape = {"cpu": cpu, "memory": 1024 * GI, GPU: gpus}
    return MemberCluster(ClusterSpec(name, nodes=(NodeGroup.of(nodes, shape),)), T0)


def pods(count: int, *, gpus: int = 0, cpu: float = 1, memory_gi: int = 4) -> PodGroup:
    requests = {"cpu": Fraction(cpu), "memory": memory_gi * GI, GPU: gpus}
    return PodGroup("worker", count, Resources(requests))


def job(
    key: str,
    *,
    pods_: int = 1,
    gpus: int = 0,
    cpu: float = 1,
    gang: bool = True,
    minutes: float = 10,
    min_member: int = 0,
) -> JobSpec:
    group = pods(pods_, gpus=gpus, cpu=cpu)
    return JobSpec(key, (group,), dt.timedelta(minutes=minutes), gang, min_member)
