"""``work.karmada.io`` ResourceBinding and ClusterResourceBinding → BindingView.

Reads v1alpha2 (the storage version); v1alpha1 objects have the same fields used here.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from engine.fleet.fields import (
    expect_bool,
    expect_int,
    expect_list,
    expect_mapping,
    expect_str,
    metadata,
    timestamp,
)
from engine.fleet.frozen import FrozenDict
from engine.fleet.model import BindingView, Component, ObjectRef
from engine.fleet.propagation import PERMANENT_ID_LABELS, read_placement
from engine.resources import Resources
from engine.workloads.model import DemandError
from engine.workloads.pods import amounts

BINDING_KINDS = ("ResourceBinding", "ClusterResourceBinding")
HEALTH = ("Healthy", "Unhealthy", "Unknown")


def read_binding(obj: Mapping[str, Any]) -> BindingView:
    kind = str(obj.get("kind", ""))
    if kind not in BINDING_KINDS:
        raise DemandError("kind", f"not a binding kind: {kind!r}")
    meta = metadata(obj)
    namespace = meta.namespace if kind == "ResourceBinding" else ""
    spec = expect_mapping(obj.get("spec"), "spec")
    status = expect_mapping(obj.get("status"), "status")
    requirements = spec.get("replicaRequirements")
    policy_kind, permanent_id = _policy(meta.labels)
    placement = spec.get("placement")
    applied, health, finished, failed = _aggregated(status)
    return BindingView(
        namespace=namespace,
        name=meta.name,
        uid=meta.uid,
        kind=kind,
        resource=_resource(spec.get("resource"), namespace),
        policy_kind=policy_kind,
        policy_permanent_id=permanent_id,
        suspended_scheduling=expect_bool(
            expect_mapping(spec.get("suspension"), "spec.suspension").get("scheduling"),
            "spec.suspension.scheduling",
        ),
        clusters=_clusters(spec),
        replicas=expect_int(spec.get("replicas"), "spec.replicas", default=0),
        replica_requirements=_requests(requirements, "spec.replicaRequirements"),
        priority_class_name=expect_str(
            expect_mapping(requirements, "spec.replicaRequirements").get("priorityClassName"),
            "spec.replicaRequirements.priorityClassName",
        ),
        components=tuple(
            _component(c, f"spec.components[{i}]")
            for i, c in enumerate(expect_list(spec.get("components"), "spec.components"))
        ),
        placement=None if placement is None else read_placement(placement, "spec.placement"),
        applied=applied,
        health=health,
        finished=finished,
        failed=failed,
        conditions=_conditions(status),
        generation=meta.generation,
        scheduler_observed_generation=expect_int(
            status.get("schedulerObservedGeneration"),
            "status.schedulerObservedGeneration",
            default=0,
        ),
        labels=meta.labels,
        annotations=meta.annotations,
        created_at=meta.created_at,
        scheduled_at=_scheduled_at(status),
    )


def _policy(labels: Mapping[str, str]) -> tuple[str, str]:
    """A namespaced binding may be claimed by a PropagationPolicy or a ClusterPropagationPolicy."""
    for kind, label in PERMANENT_ID_LABELS.items():
        if labels.get(label):
            return kind, labels[label]
    return "", ""


def _resource(raw: Any, namespace: str) -> ObjectRef:
    path = "spec.resource"
    if raw is None:
        raise DemandError(path, "required")
    ref = expect_mapping(raw, path)
    return ObjectRef(
        api_version=expect_str(ref.get("apiVersion"), f"{path}.apiVersion", required=True),
        kind=expect_str(ref.get("kind"), f"{path}.kind", required=True),
        namespace=expect_str(ref.get("namespace"), f"{path}.namespace") or namespace,
        name=expect_str(ref.get("name"), f"{path}.name", required=True),
        uid=expect_str(ref.get("uid"), f"{path}.uid"),
    )


def _requests(raw: Any, path: str) -> Resources | None:
    """``resourceRequest`` of a ReplicaRequirements; None when Karmada gave none."""
    request = expect_mapping(raw, path).get("resourceRequest")
    return None if request is None else Resources(amounts(request, f"{path}.resourceRequest"))


def _clusters(spec: Mapping[str, Any]) -> tuple[tuple[str, int], ...]:
    result = []
    for i, raw in enumerate(expect_list(spec.get("clusters"), "spec.clusters")):
        path = f"spec.clusters[{i}]"
        target = expect_mapping(raw, path)
        result.append(
            (
                expect_str(target.get("name"), f"{path}.name", required=True),
                expect_int(target.get("replicas"), f"{path}.replicas", default=0),
            )
        )
    return tuple(result)


def _component(raw: Any, path: str) -> Component:
    entry = expect_mapping(raw, path)
    requirements = entry.get("replicaRequirements")
    return Component(
        name=expect_str(entry.get("name"), f"{path}.name"),
        replicas=expect_int(entry.get("replicas"), f"{path}.replicas"),
        requests=_requests(requirements, f"{path}.replicaRequirements") or Resources(),
        priority_class_name=expect_str(
            expect_mapping(requirements, f"{path}.replicaRequirements").get("priorityClassName"),
            f"{path}.replicaRequirements.priorityClassName",
        ),
    )


def _aggregated(
    status: Mapping[str, Any],
) -> tuple[FrozenDict[str, bool], FrozenDict[str, str], frozenset[str], frozenset[str]]:
    applied: dict[str, bool] = {}
    health: dict[str, str] = {}
    finished: set[str] = set()
    failed: set[str] = set()
    for i, raw in enumerate(expect_list(status.get("aggregatedStatus"), "status.aggregatedStatus")):
        path = f"status.aggregatedStatus[{i}]"
        item = expect_mapping(raw, path)
        cluster = expect_str(item.get("clusterName"), f"{path}.clusterName", required=True)
        applied[cluster] = expect_bool(item.get("applied"), f"{path}.applied")
        state = expect_str(item.get("health"), f"{path}.health") or "Unknown"
        if state not in HEALTH:
            raise DemandError(f"{path}.health", f"must be one of {', '.join(HEALTH)}")
        health[cluster] = state
        outcome = job_outcome(item.get("status"))
        if outcome is not None:
            finished.add(cluster)
            if outcome == FAILED:
                failed.add(cluster)
    return FrozenDict(applied), FrozenDict(health), frozenset(finished), frozenset(failed)


# How the job kinds fleetgate knows report a terminal state in the status Karmada aggregates,
# and whether it is a success: batch/v1 Job (Complete/Failed), Kubeflow and MPIJob
# (Succeeded/Failed), JobSet (Completed/Failed).
SUCCEEDED, FAILED = "Succeeded", "Failed"
TERMINAL_CONDITIONS = {
    "Complete": SUCCEEDED,
    "Completed": SUCCEEDED,
    "Succeeded": SUCCEEDED,
    "Failed": FAILED,
}
TERMINAL_STATES: dict[tuple[str, ...], dict[str, str]] = {
    ("state", "phase"): {  # Volcano
        "Completed": SUCCEEDED,
        "Failed": FAILED,
        "Terminated": FAILED,
        "Aborted": FAILED,
    },
    ("applicationState", "state"): {"COMPLETED": SUCCEEDED, "FAILED": FAILED},  # Spark operator
    ("jobDeploymentStatus",): {"Complete": SUCCEEDED, "Failed": FAILED},  # KubeRay RayJob
}


def is_finished(job_status: Any) -> bool:
    """Whether a member's job status (``aggregatedStatus[].status``) says the job has ended.

    A terminal condition (batch/v1 Job, Kubeflow, JobSet, MPIJob) or a terminal state field
    (Volcano, Spark, Ray). Anything unreadable counts as still running: its usage stays counted.
    """
    return job_outcome(job_status) is not None


def job_outcome(job_status: Any) -> str | None:
    """``SUCCEEDED`` or ``FAILED`` when a member's job status is terminal, else None.

    A ``Failed`` condition wins over a success condition; a RayJob whose deployment is
    ``Complete`` failed when its ``jobStatus`` is ``FAILED`` (or ``STOPPED``).
    """
    if not isinstance(job_status, Mapping):
        return None
    conditions = job_status.get("conditions")
    found: str | None = None
    for condition in conditions if isinstance(conditions, list) else []:
        if (
            isinstance(condition, Mapping)
            and isinstance(kind := condition.get("type"), str)  # a list here is not hashable
            and kind in TERMINAL_CONDITIONS
            and condition.get("status") == "True"
        ):
            found = FAILED if found == FAILED else TERMINAL_CONDITIONS[kind]
    if found is not None:
        return found
    for path, states in TERMINAL_STATES.items():
        value: Any = job_status
        for key in path:
            value = value.get(key) if isinstance(value, Mapping) else None
        if isinstance(value, str) and value in states:
            if path == ("jobDeploymentStatus",) and job_status.get("jobStatus") in RAY_FAILED:
                return FAILED
            return states[value]
    return None


RAY_FAILED = frozenset({"FAILED", "STOPPED"})


def _scheduled_at(status: Mapping[str, Any]) -> dt.datetime | None:
    """When the binding was placed: its ``Scheduled=True`` condition's lastTransitionTime, else
    ``status.lastScheduledTime``."""
    for i, raw in enumerate(expect_list(status.get("conditions"), "status.conditions")):
        item = expect_mapping(raw, f"status.conditions[{i}]")
        if item.get("type") == "Scheduled" and item.get("status") == "True":
            since = timestamp(
                item.get("lastTransitionTime"), f"status.conditions[{i}].lastTransitionTime"
            )
            if since is not None:
                return since
    return timestamp(status.get("lastScheduledTime"), "status.lastScheduledTime")


def _conditions(status: Mapping[str, Any]) -> FrozenDict[str, str]:
    result: dict[str, str] = {}
    for i, raw in enumerate(expect_list(status.get("conditions"), "status.conditions")):
        path = f"status.conditions[{i}]"
        item = expect_mapping(raw, path)
        result[expect_str(item.get("type"), f"{path}.type", required=True)] = expect_str(
            item.get("status"), f"{path}.status", required=True
        )
    return FrozenDict(result)
