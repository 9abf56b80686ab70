"""Volcano's HyperJob (``training.volcano.sh/v1alpha1``): one training run split into Volcano Jobs.

Facts from volcano-global's HyperJob user guide and controller design (January 2026):

* ``spec.replicatedJobs[]`` each have a ``name`` (unique in the HyperJob), ``replicas`` (the
  number of child Volcano Jobs stamped from it, default 1), optional ``clusterNames`` and a
  ``templateSpec`` (a Volcano Job spec).
* Child ``i`` of replicated job ``r`` is the Volcano Job ``{hyperjob}-{r}-{i}`` in the HyperJob's
  namespace, labelled ``volcano.sh/hyperjob-name`` and ``volcano.sh/replicatedjob-name``; each
  child has its own PropagationPolicy of the same name whose ``clusterAffinity.clusterNames``
  are the replicated job's ``clusterNames`` (a hard filter, when given) and whose spread
  constraint puts the child on exactly one cluster.
* ``spec.minAvailable`` is the number of children that must run; volcano-global reserves it and
  does not enforce it. ``status.splitCount`` is the number of children the controller created.

fleetgate does not schedule the HyperJob object (Karmada never binds it): its children are the
jobs, and the cycle admits them together (``engine.cycle.groups``). Here: reading the object,
for the size and minimum of the group and for ``fleetgate inspect`` (each child's demand from its
``templateSpec``, every task counted).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from engine.annotations import GROUP_SPREAD
from engine.resources import Resources
from engine.workloads.common import object_name
from engine.workloads.model import DemandError, Workload
from engine.workloads.pods import expect_int, expect_list, expect_mapping
from engine.workloads.volcano import read_volcano_job

API_VERSION = "training.volcano.sh/v1alpha1"
KIND = "HyperJob"
NAME_LABEL = "volcano.sh/hyperjob-name"
"""On each child Volcano Job: the name of its HyperJob (same namespace)."""
REPLICATED_JOB_LABEL = "volcano.sh/replicatedjob-name"
"""On each child Volcano Job: the replicated job it was stamped from."""
CHILD_API_VERSION = "batch.volcano.sh/v1alpha1"
MAX_CHILDREN = 10_000
"""More children than this is taken for hostile input (``inspect`` lists every child)."""


@dataclass(frozen=True, slots=True)
class ReplicatedJob:
    name: str
    replicas: int
    cluster_names: tuple[str, ...]
    child: Workload  # the demand of one child (its name is that of child 0)


@dataclass(frozen=True, slots=True)
class HyperJob:
    namespace: str
    name: str
    replicated_jobs: tuple[ReplicatedJob, ...]
    min_available: int | None  # spec.minAvailable; None when unset or 0
    split_count: int | None  # status.splitCount, when reported
    spread: str = ""  # the HyperJob's fleetgate.io/group-spread annotation, if any

    @property
    def size(self) -> int:
        """The children the HyperJob stamps out: the sum of ``replicatedJobs[].replicas``."""
        return sum(r.replicas for r in self.replicated_jobs)

    @property
    def ref(self) -> str:
        return f"{KIND}/{self.namespace}/{self.name}" if self.namespace else f"{KIND}/{self.name}"

    def children(self) -> list[Workload]:
        """One Workload per child Volcano Job, named and labelled as the controller does."""
        found = []
        for r in self.replicated_jobs:
            for i in range(r.replicas):
                name = child_name(self.name, r.name, i)
                found.append(_renamed(r.child, name))
        return found


def is_hyperjob(obj: Mapping[str, Any]) -> bool:
    return obj.get("apiVersion") == API_VERSION and obj.get("kind") == KIND


def child_name(hyperjob: str, replicated_job: str, index: int) -> str:
    return f"{hyperjob}-{replicated_job}-{index}"


def read_hyperjob(obj: Mapping[str, Any]) -> HyperJob:
    """The HyperJob's replicated jobs and their children's demand; DemandError names the field."""
    metadata = expect_mapping(obj.get("metadata"), "metadata")
    name = object_name(metadata)
    namespace = str(metadata.get("namespace") or "")
    spec = expect_mapping(obj.get("spec"), "spec")
    items = expect_list(spec.get("replicatedJobs"), "spec.replicatedJobs")
    if not items:
        raise DemandError("spec.replicatedJobs", "required: at least one replicated job")
    replicated: list[ReplicatedJob] = []
    seen: set[str] = set()
    for index, raw in enumerate(items):
        path = f"spec.replicatedJobs[{index}]"
        item = expect_mapping(raw, path)
        rj_name = item.get("name")
        if not isinstance(rj_name, str) or not rj_name:
            raise DemandError(f"{path}.name", "required")
        if rj_name in seen:
            raise DemandError(f"{path}.name", f"duplicate replicated job {rj_name!r}")
        seen.add(rj_name)
        replicas = expect_int(item.get("replicas"), f"{path}.replicas", default=1)
        clusters = expect_list(item.get("clusterNames"), f"{path}.clusterNames")
        if not all(isinstance(c, str) and c for c in clusters):
            raise DemandError(f"{path}.clusterNames", "expected a list of cluster names")
        labels = {NAME_LABEL: name, REPLICATED_JOB_LABEL: rj_name}
        child = _child(item.get("templateSpec"), f"{path}.templateSpec", namespace, labels)
        child = _renamed(child, child_name(name, rj_name, 0))
        replicated.append(ReplicatedJob(rj_name, replicas, tuple(clusters), child))
    minimum = expect_int(spec.get("minAvailable"), "spec.minAvailable", default=0)
    total = sum(r.replicas for r in replicated)
    if total > MAX_CHILDREN:
        message = f"{total} child jobs in all, more than the {MAX_CHILDREN} fleetgate reads"
        raise DemandError("spec.replicatedJobs", message)
    if minimum > total:
        message = f"{minimum} is more than the HyperJob's {total} jobs"
        raise DemandError("spec.minAvailable", message)
    status = obj.get("status")
    split = None
    if isinstance(status, Mapping) and status.get("splitCount") is not None:
        split = expect_int(status.get("splitCount"), "status.splitCount", default=0)
    annotations = metadata.get("annotations")
    spread = ""
    if isinstance(annotations, Mapping):
        spread = str(annotations.get(GROUP_SPREAD) or "")
    return HyperJob(namespace, name, tuple(replicated), minimum or None, split, spread)


def read_split_count(obj: Mapping[str, Any]) -> HyperJob | None:
    """A HyperJob whose spec cannot be read, with what its status says (``status.splitCount``,
    the children the controller created), when that and its name can be read."""
    try:
        metadata = expect_mapping(obj.get("metadata"), "metadata")
        name = object_name(metadata)
        status = expect_mapping(obj.get("status"), "status")
        split = expect_int(status.get("splitCount"), "status.splitCount", default=0)
    except DemandError:
        return None
    namespace = str(metadata.get("namespace") or "")
    return HyperJob(namespace, name, (), None, split) if split else None


def _child(template: Any, path: str, namespace: str, labels: Mapping[str, str]) -> Workload:
    if template is None:
        raise DemandError(path, "required")
    spec = expect_mapping(template, path)
    child = {
        "apiVersion": CHILD_API_VERSION,
        "kind": "Job",
        "metadata": {"name": "child", "namespace": namespace, "labels": dict(labels)},
        "spec": spec,
    }
    try:
        return read_volcano_job(child)
    except DemandError as err:  # the child's spec is the templateSpec: say where it is
        inner = err.path.removeprefix("spec")
        raise DemandError(f"{path}{inner}", err.message) from err


def _renamed(workload: Workload, name: str) -> Workload:
    return replace(workload, name=name)


def to_json(found: HyperJob) -> dict[str, Any]:
    """The ``fleetgate inspect -o json`` shape of a HyperJob: its group and its children."""
    total = Resources.sum(child.total for child in found.children())
    return {
        "namespace": found.namespace,
        "name": found.name,
        "size": found.size,
        "minAvailable": found.min_available or found.size,
        "replicatedJobs": [
            {
                "name": r.name,
                "replicas": r.replicas,
                "clusterNames": list(r.cluster_names),
                "children": [child_name(found.name, r.name, i) for i in range(r.replicas)],
            }
            for r in found.replicated_jobs
        ],
        "total": total.to_json(),
    }


def summary(found: HyperJob) -> str:
    """One line for ``fleetgate inspect``'s table."""
    parts = []
    for r in found.replicated_jobs:
        where = f" on {', '.join(r.cluster_names)}" if r.cluster_names else ""
        parts.append(f"{r.name} x{r.replicas}{where}")
    minimum = found.min_available or found.size
    return (
        f"{found.ref}: {found.size} Volcano Jobs ({'; '.join(parts)}), admitted together "
        f"by fleetgate, at least {minimum} at once"
    )
