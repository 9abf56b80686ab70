"""Kubeflow training-operator jobs (``kubeflow.org/v1``): PyTorch, TF, XGBoost, Paddle, JAX, MPI.

Every kind is a map of replica type → ReplicaSpec (``replicas``, ``template``) plus a shared
``runPolicy``. What the operator does with them, and what is read here:

* Replica types are matched case-insensitively and renamed to their canonical spelling
  (``worker`` → ``Worker``), as training-operator's defaulting does; the legacy MPIJob is the
  exception and needs the exact spelling. An unknown type is an error.
* ``replicas`` defaults to 1, except the legacy MPIJob's Worker, which defaults to 0.
* Roles are sorted by replica type name (``Chief``, ``Evaluator``, ``Master``, ``PS``,
  ``Worker``): the same order whatever the manifest's, and the order the API server returns
  (Go writes map keys sorted).
* Gang minimum: ``runPolicy.schedulingPolicy.minAvailable`` if set, else every pod of every
  replica type; training-operator's PodGroup minMember is exactly that.
* A PyTorchJob's ``elasticPolicy`` is checked but does not lower the gang minimum: the operator
  never copies ``minReplicas`` into the PodGroup, which still asks for every replica. Set
  ``schedulingPolicy.minAvailable`` for an elastic gang.
* Queue hint ``runPolicy.schedulingPolicy.queue``; priority class
  ``runPolicy.schedulingPolicy.priorityClass`` (what the operator puts on the PodGroup).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from engine.workloads.common import template_role, workload
from engine.workloads.model import DemandError, Role, Workload
from engine.workloads.pods import expect_int, expect_mapping

API_VERSION = "kubeflow.org/v1"


@dataclass(frozen=True, slots=True)
class _Kind:
    field: str  # spec.<field> holds the replica specs
    types: tuple[str, ...]  # canonical replica type names
    default_replicas: Mapping[str, int]  # per type, when not 1
    single: tuple[str, ...] = ()  # types whose replicas, when given, must be 1
    camel_case: bool = True  # replica type names are matched case-insensitively
    one_of: tuple[str, ...] = ()  # at most one of these types may be present


KINDS: dict[str, _Kind] = {
    "PyTorchJob": _Kind("pytorchReplicaSpecs", ("Master", "Worker"), {}, single=("Master",)),
    "TFJob": _Kind(
        "tfReplicaSpecs",
        ("Chief", "Evaluator", "Master", "PS", "Worker"),
        {},
        one_of=("Chief", "Master"),
    ),
    "XGBoostJob": _Kind("xgbReplicaSpecs", ("Master", "Worker"), {}),
    "PaddleJob": _Kind("paddleReplicaSpecs", ("Master", "Worker"), {}),
    "JAXJob": _Kind("jaxReplicaSpecs", ("Worker",), {}),
    "MPIJob": _Kind(
        "mpiReplicaSpecs",
        ("Launcher", "Worker"),
        {"Worker": 0},
        single=("Launcher",),
        camel_case=False,
    ),
}


def read_training_job(obj: Mapping[str, Any]) -> Workload:
    """The demand of any training-operator job kind (chosen by ``obj["kind"]``)."""
    kind = KINDS[str(obj.get("kind"))]
    spec = expect_mapping(obj.get("spec"), "spec")
    base = f"spec.{kind.field}"
    specs = replica_specs(spec.get(kind.field), base, kind.types, camel_case=kind.camel_case)
    if not specs:
        raise DemandError(base, "required: at least one replica type")
    present = [t for t in kind.one_of if t in specs]
    if len(present) > 1:
        raise DemandError(f"{base}.{present[1]}", f"only one of {' or '.join(kind.one_of)}")
    if "Launcher" in kind.types and "Launcher" not in specs:
        raise DemandError(f"{base}.Launcher", "required")
    roles = []
    for name in sorted(specs):
        key, replica_spec = specs[name]
        path = f"{base}.{key}"
        role = replica_role(name, replica_spec, path, kind.default_replicas.get(name, 1))
        if name in kind.single and role.replicas != 1:
            raise DemandError(f"{path}.replicas", f"{name} must have exactly 1 replica")
        roles.append(role)
    if obj.get("kind") == "PyTorchJob":
        check_elastic_policy(spec.get("elasticPolicy"), "spec.elasticPolicy")
    pods = sum(role.replicas for role in roles)
    hints = run_policy_hints(spec.get("runPolicy"), "spec.runPolicy", default_min=pods)
    check_min_member(hints.min_member, pods, hints.min_member_path)
    return workload(
        obj,
        roles,
        min_member=hints.min_member,
        resizable=False,
        priority_class_name=hints.priority_class,
        queue=hints.queue,
    )


READERS = {(API_VERSION, kind): read_training_job for kind in KINDS}


# ---- pieces shared with engine.workloads.mpi -------------------------------------------------


def replica_specs(
    raw: Any, path: str, types: tuple[str, ...], *, camel_case: bool
) -> dict[str, tuple[str, Mapping[str, Any]]]:
    """Canonical replica type → (the key as written, its ReplicaSpec)."""
    result: dict[str, tuple[str, Mapping[str, Any]]] = {}
    for key, value in expect_mapping(raw, path).items():
        key = str(key)
        matches = [t for t in types if (t.lower() == key.lower() if camel_case else t == key)]
        if not matches:
            raise DemandError(
                f"{path}.{key}", f"unknown replica type {key!r}; expected one of {', '.join(types)}"
            )
        name = matches[0]
        if name in result:
            raise DemandError(f"{path}.{key}", f"replica type {name} given twice")
        result[name] = (key, expect_mapping(value, f"{path}.{key}"))
    return result


def replica_role(name: str, spec: Mapping[str, Any], path: str, default_replicas: int) -> Role:
    """A role from one ReplicaSpec; its pod template must have at least one container."""
    return template_role(
        name, spec.get("replicas"), spec.get("template"), path, default_replicas=default_replicas
    )


@dataclass(frozen=True, slots=True)
class RunPolicyHints:
    min_member: int
    min_member_path: str  # where min_member came from, for errors
    queue: str | None
    priority_class: str | None


def run_policy_hints(raw: Any, path: str, *, default_min: int) -> RunPolicyHints:
    """Gang minimum, queue and priority class from a Kubeflow ``runPolicy``."""
    policy = expect_mapping(raw, path)
    where = f"{path}.schedulingPolicy"
    scheduling = expect_mapping(policy.get("schedulingPolicy"), where)
    min_available = scheduling.get("minAvailable")
    return RunPolicyHints(
        min_member=expect_int(min_available, f"{where}.minAvailable", default=default_min),
        min_member_path=f"{where}.minAvailable" if min_available is not None else "",
        queue=optional_string(scheduling.get("queue"), f"{where}.queue"),
        priority_class=optional_string(scheduling.get("priorityClass"), f"{where}.priorityClass"),
    )


def check_min_member(min_member: int, pods: int, path: str) -> None:
    if min_member > pods:
        raise DemandError(path, f"gang minimum {min_member} is more than the job's {pods} pods")


def optional_string(value: Any, path: str) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise DemandError(path, f"expected a string, got {value!r}")
    return value


def check_elastic_policy(raw: Any, path: str) -> None:
    """Read ``elasticPolicy`` for its shape only: it never changes the PodGroup's minMember."""
    policy = expect_mapping(raw, path)
    low = policy.get("minReplicas")
    high = policy.get("maxReplicas")
    low_n = expect_int(low, f"{path}.minReplicas", default=0)
    high_n = expect_int(high, f"{path}.maxReplicas", default=0)
    if low is not None and high is not None and low_n > high_n:
        raise DemandError(f"{path}.minReplicas", f"{low_n} is more than maxReplicas {high_n}")
