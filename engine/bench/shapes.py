"""Synthetic job shapes: kinds, roles and per-pod requests, before a job gets a queue or names.

The mix (by share of jobs): PyTorchJob 30% (a third single pods of 1–8 GPUs, the rest master +
workers gangs of 2–16 × 8 GPUs), MPIJob 10% (launcher + 2–16 × 8-GPU workers), Volcano Job 12%
(1–8 tasks of 1–8 GPUs), RayJob 10% (head, 1–4 GPU workers, submitter), SparkApplication 13%
(driver + 2–32 executors, CPU only), batch/v1 Job 17% (a quarter on 1–4 GPUs, resizable) and
Deployment 8% (half on one GPU each, resizable). A fifth of GPU jobs ask for a GPU model.
"""

from __future__ import annotations

import bisect
import dataclasses
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

from engine.bench.members import Pod

GPU_TRAINING = "gpu-training"
GPU_SERVING = "gpu-serving"
CPU_BATCH = "cpu-batch"

T = TypeVar("T")

_KINDS = ("pytorch", "mpi", "vcjob", "ray", "spark", "batch", "serve")
_KIND_CUM = (30, 40, 52, 62, 75, 92, 100)
_PYTORCH_GANG_CUM = (5, 9, 11, 12)  # sizes 2, 4, 8, 16
_MPI_GANG_CUM = (4, 8, 10, 11)


@dataclass(frozen=True, slots=True)
class Draft:
    """A job's shape. ``policy`` names the ClusterPropagationPolicy that claims it."""

    api_version: str
    kind: str
    stem: str  # the start of the job's name
    roles: tuple[tuple[str, int, Pod, int | None], ...]  # name, replicas, pod, role minimum
    min_member: int
    resizable: bool
    policy: str
    model: str | None = None  # the gpu.fleetgate.io/model the job asks for

    @property
    def pods(self) -> list[Pod]:
        return [pod for _, replicas, pod, _ in self.roles for _ in range(replicas)]

    @property
    def native(self) -> bool:
        """A Kubernetes kind whose replicas Karmada's interpreter fills into the binding."""
        return self.api_version in ("batch/v1", "apps/v1")


def draw(rng: random.Random, models: Sequence[str]) -> Draft:
    kind = pick(rng, _KINDS, _KIND_CUM)
    model = rng.choice(models) if models and rng.random() < 0.2 else None
    if kind == "pytorch":
        if rng.random() < 0.35:
            roles = [("Worker", 1, _gpu_pod(rng, rng.choice((1, 2, 4, 8, 8, 8))), None)]
        else:
            pod, size = _gpu_pod(rng, 8), pick(rng, (2, 4, 8, 16), _PYTORCH_GANG_CUM)
            roles = [("Master", 1, pod, None), ("Worker", size - 1, pod, None)]
        return _gang("kubeflow.org/v1", "PyTorchJob", kind, roles, model)
    if kind == "mpi":
        size = pick(rng, (2, 4, 8, 16), _MPI_GANG_CUM)
        roles = [("Launcher", 1, _cpu_pod(2, 4), None), ("Worker", size, _gpu_pod(rng, 8), None)]
        return _gang("kubeflow.org/v2beta1", "MPIJob", kind, roles, model)
    if kind == "vcjob":
        tasks = rng.choice((1, 2, 4, 8))
        roles = [("worker", tasks, _gpu_pod(rng, rng.choice((1, 2, 4, 8))), None)]
        return _gang("batch.volcano.sh/v1alpha1", "Job", kind, roles, model)
    if kind == "ray":
        workers = rng.choice((1, 2, 4))
        roles = [
            ("head", 1, _cpu_pod(4, 4), 1),
            ("gpu", workers, _gpu_pod(rng, rng.choice((1, 2, 4, 8))), workers),
            ("submitter", 1, (500, 200, 0), 0),
        ]
        # KubeRay's gang is the head and the workers; the submitter pod comes after.
        draft = _gang("ray.io/v1", "RayJob", kind, roles, model)
        return dataclasses.replace(draft, min_member=1 + workers)
    if kind == "spark":
        cores = rng.choice((2, 4, 8))
        executor = (cores * 1000, cores * rng.choice((2, 3)) * 1024 + 1024, 0)  # + overhead
        roles = [("driver", 1, (2000, 8 * 1024, 0), None)]
        roles.append(("executor", rng.randint(2, 32), executor, None))
        api = "sparkoperator.k8s.io/v1beta2"
        return dataclasses.replace(_gang(api, "SparkApplication", kind, roles), policy=CPU_BATCH)
    if kind == "batch":
        gpus = rng.random() < 0.25
        pod = (
            _gpu_pod(rng, rng.choice((1, 2, 4))) if gpus else _cpu_pod(rng.choice((1, 2, 4, 8)), 4)
        )
        replicas = rng.randint(1, 16)
        api, kind_name, minimum, policy = "batch/v1", "Job", replicas, GPU_TRAINING
    else:
        gpus = rng.random() < 0.5
        pod = _gpu_pod(rng, 1) if gpus else _cpu_pod(rng.choice((1, 2, 4)), 2)
        replicas = rng.randint(1, 8)
        api, kind_name, minimum, policy = "apps/v1", "Deployment", 1, GPU_SERVING
    roles_ = (("pod", replicas, pod, None),)
    if not gpus:
        return Draft(api, kind_name, kind, roles_, minimum, True, CPU_BATCH)
    return Draft(api, kind_name, kind, roles_, minimum, True, policy, model)


def pick(rng: random.Random, items: Sequence[T], cum_weights: Sequence[float]) -> T:
    """``rng.choices(items, cum_weights=cum_weights)[0]`` without its per-call overhead."""
    return items[bisect.bisect(cum_weights, rng.random() * cum_weights[-1])]


def _gpu_pod(rng: random.Random, gpus: int) -> Pod:
    """Per GPU 6–11 cpu and 60–120Gi: an 8-GPU pod fits every GPU node shape whole."""
    return (gpus * rng.choice((6, 8, 11)) * 1000, gpus * rng.choice((60, 90, 120)) * 1024, gpus)


def _cpu_pod(cores: int, gib_per_core: int) -> Pod:
    return (cores * 1000, cores * gib_per_core * 1024, 0)


def _gang(
    api: str,
    kind: str,
    stem: str,
    roles: list[tuple[str, int, Pod, int | None]],
    model: str | None = None,
) -> Draft:
    pods = sum(replicas for _, replicas, _, _ in roles)
    return Draft(api, kind, stem, tuple(roles), pods, False, GPU_TRAINING, model)
