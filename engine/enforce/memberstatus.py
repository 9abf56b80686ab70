"""What a member's job status (``aggregatedStatus[].status`` of a binding, the status its
operator writes, as Karmada collects it) says about running and failing, per kind."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any


def status_says_running(api_version: str, kind: str, status: Any) -> bool | None:
    """What a job's ``status`` says about running, per kind; None: the kind gives no signal.

    Kubeflow kinds and MPIJob: condition ``Running=True``; Volcano: ``state.phase Running``;
    Spark: ``applicationState.state RUNNING``; RayJob: ``jobDeploymentStatus Running``;
    RayCluster: ``state ready``; batch/v1 Job: ``active`` or ``ready`` > 0; Deployment,
    ReplicaSet, StatefulSet: ``readyReplicas`` > 0; Pod: ``phase Running``.
    """
    group = api_version.rpartition("/")[0]
    s = status if isinstance(status, Mapping) else {}
    if group == "kubeflow.org":
        return any(
            isinstance(c, Mapping) and c.get("type") == "Running" and c.get("status") == "True"
            for c in s.get("conditions") or []
        )
    check = _RUNNING.get((group, kind))
    return None if check is None else check(s)


def _get(status: Mapping[str, Any], *path: str) -> Any:
    value: Any = status
    for key in path:
        value = value.get(key) if isinstance(value, Mapping) else None
    return value


def _positive(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


_RUNNING: dict[tuple[str, str], Callable[[Mapping[str, Any]], bool]] = {
    ("batch.volcano.sh", "Job"): lambda s: _get(s, "state", "phase") == "Running",
    ("sparkoperator.k8s.io", "SparkApplication"): lambda s: (
        _get(s, "applicationState", "state") == "RUNNING"
    ),
    ("ray.io", "RayJob"): lambda s: s.get("jobDeploymentStatus") == "Running",
    ("ray.io", "RayCluster"): lambda s: s.get("state") == "ready",
    ("batch", "Job"): lambda s: _positive(s.get("active")) or _positive(s.get("ready")),
    ("apps", "Deployment"): lambda s: _positive(s.get("readyReplicas")),
    ("apps", "ReplicaSet"): lambda s: _positive(s.get("readyReplicas")),
    ("apps", "StatefulSet"): lambda s: _positive(s.get("readyReplicas")),
    ("", "Pod"): lambda s: s.get("phase") == "Running",
}


def failure_detail(status: Any) -> str:
    """The member's own words about a failure, where its kind gives them; else ""."""
    if not isinstance(status, Mapping):
        return ""
    for condition in status.get("conditions") or []:
        if (
            isinstance(condition, Mapping)
            and condition.get("type") == "Failed"
            and condition.get("status") == "True"
        ):
            return str(condition.get("message") or condition.get("reason") or "")
    for path in (("applicationState", "errorMessage"), ("message",)):
        found = _get(status, *path)
        if isinstance(found, str) and found:
            return found
    return ""


def member_statuses(obj: Mapping[str, Any] | None) -> dict[str, Any]:
    """cluster → ``aggregatedStatus[].status`` of a binding object (malformed entries skipped;
    the snapshot reports them)."""
    found: dict[str, Any] = {}
    items = ((obj or {}).get("status") or {}).get("aggregatedStatus")
    for item in items if isinstance(items, list) else []:
        if isinstance(item, Mapping) and isinstance(item.get("clusterName"), str):
            found[item["clusterName"]] = item.get("status")
    return found
