"""A member job's status as its operator reports it, and Karmada's health of it.

One function per family maps the member's :class:`engine.members.JobState` to the
``status`` the operator writes on the object in the member cluster; that is what Karmada collects
into ``Work.status.manifestStatuses[].status``, the binding's ``aggregatedStatus[].status`` and,
through the resource interpreter's AggregateStatus, the template's ``status``.
``engine.fleet.bindings.is_finished`` reads these shapes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from engine.members import JobState, Phase
from sandbox.meta import now_rfc3339

PENDING, RUNNING, SUCCEEDED, FAILED = Phase.PENDING, Phase.RUNNING, Phase.SUCCEEDED, Phase.FAILED
HEALTHY, UNHEALTHY, UNKNOWN = "Healthy", "Unhealthy", "Unknown"
# kinds that serve rather than finish: they run until removed
SERVICE_KINDS = frozenset({"Deployment", "ReplicaSet", "StatefulSet", "RayCluster", "Pod"})


def health(state: JobState | None) -> str:
    """Karmada's InterpretHealth for a job: Healthy once running, Unhealthy when it failed."""
    if state is None or state.phase == PENDING:
        return UNKNOWN
    return UNHEALTHY if state.phase == FAILED else HEALTHY


def operator_status(api_version: str, kind: str, state: JobState) -> dict[str, Any]:
    """The ``status`` of a ``kind`` object whose pods are in ``state`` on its member."""
    group = api_version.rpartition("/")[0]
    if group == "kubeflow.org":
        return _kubeflow(kind, state)
    writer = _WRITERS.get((group, kind))
    return writer(state) if writer else _kubeflow(kind, state)


def _time(state: JobState, which: str) -> str | None:
    moment = state.started_at if which == "start" else state.finished_at
    return now_rfc3339(moment) if moment else None


def _condition(kind: str, reason: str, message: str, when: str | None) -> dict[str, Any]:
    return {
        "type": kind,
        "status": "True",
        "reason": reason,
        "message": message,
        "lastUpdateTime": when,
        "lastTransitionTime": when,
    }


def _kubeflow(kind: str, state: JobState) -> dict[str, Any]:
    """training-operator conditions: Created, then Running, then Succeeded or Failed (Running
    turns False)."""
    created = _condition(
        "Created", f"{kind}Created", f"{kind} is created.", now_rfc3339(state.submitted_at)
    )
    conditions = [created]
    if state.phase in (RUNNING, SUCCEEDED, FAILED) and state.started_at:
        running = _condition(
            "Running", f"{kind}Running", f"{kind} is running.", _time(state, "start")
        )
        if state.phase != RUNNING:
            running = running | {"status": "False", "lastTransitionTime": _time(state, "end")}
        conditions.append(running)
    if state.phase == SUCCEEDED:
        conditions.append(
            _condition("Succeeded", f"{kind}Succeeded", f"{kind} completed.", _time(state, "end"))
        )
    elif state.phase == FAILED:
        message = state.message or f"{kind} failed."
        conditions.append(_condition("Failed", f"{kind}Failed", message, _time(state, "end")))
    status: dict[str, Any] = {"conditions": conditions}
    if state.started_at:
        status["startTime"] = _time(state, "start")
    if state.finished_at:
        status["completionTime"] = _time(state, "end")
    return status


def _volcano(state: JobState) -> dict[str, Any]:
    phase = {PENDING: "Pending", RUNNING: "Running", SUCCEEDED: "Completed", FAILED: "Failed"}
    counts = {RUNNING: "running", SUCCEEDED: "succeeded", FAILED: "failed"}
    status: dict[str, Any] = {
        "state": {
            "phase": phase[state.phase],
            "lastTransitionTime": now_rfc3339(
                state.finished_at or state.started_at or state.submitted_at
            ),
        },
    }
    if state.phase == PENDING:
        status["pending"] = state.pods_total - state.pods_bound
        status["running"] = state.pods_bound
    else:
        status[counts[state.phase]] = state.pods_total
    return status


def _spark(state: JobState) -> dict[str, Any]:
    name = {PENDING: "SUBMITTED", RUNNING: "RUNNING", SUCCEEDED: "COMPLETED", FAILED: "FAILED"}
    status: dict[str, Any] = {"applicationState": {"state": name[state.phase]}}
    if state.message and state.phase == FAILED:
        status["applicationState"]["errorMessage"] = state.message
    if state.started_at:
        status["lastSubmissionAttemptTime"] = _time(state, "start")
    if state.finished_at:
        status["terminationTime"] = _time(state, "end")
    return status


def _rayjob(state: JobState) -> dict[str, Any]:
    deployment = {
        PENDING: "Initializing",
        RUNNING: "Running",
        SUCCEEDED: "Complete",
        FAILED: "Failed",
    }
    job = {PENDING: "PENDING", RUNNING: "RUNNING", SUCCEEDED: "SUCCEEDED", FAILED: "FAILED"}
    status: dict[str, Any] = {
        "jobDeploymentStatus": deployment[state.phase],
        "jobStatus": job[state.phase],
    }
    if state.started_at:
        status["startTime"] = _time(state, "start")
    if state.finished_at:
        status["endTime"] = _time(state, "end")
    if state.message and state.phase == FAILED:
        status["message"] = state.message
    return status


def _raycluster(state: JobState) -> dict[str, Any]:
    if state.phase == PENDING:
        return {"desiredWorkerReplicas": state.pods_total}
    return {
        "state": "ready" if state.phase != FAILED else "failed",
        "readyWorkerReplicas": state.pods_bound if state.phase == RUNNING else 0,
    }


def _batch_job(state: JobState) -> dict[str, Any]:
    status: dict[str, Any] = {}
    if state.started_at:
        status["startTime"] = _time(state, "start")
    if state.phase == RUNNING:
        status["active"] = state.pods_bound
    elif state.phase == SUCCEEDED:
        status["succeeded"] = state.pods_total
        status["completionTime"] = _time(state, "end")
        status["conditions"] = [_probe("Complete", "CompletionsReached", _time(state, "end"))]
    elif state.phase == FAILED:
        status["failed"] = state.pods_total
        status["conditions"] = [_probe("Failed", "BackoffLimitExceeded", _time(state, "end"))]
    return status


def _jobset(state: JobState) -> dict[str, Any]:
    if state.phase == SUCCEEDED:
        return {"conditions": [_probe("Completed", "AllJobsCompleted", _time(state, "end"))]}
    if state.phase == FAILED:
        return {"conditions": [_probe("Failed", "FailedJobs", _time(state, "end"))]}
    return {}


def _probe(kind: str, reason: str, when: str | None) -> dict[str, Any]:
    return {
        "type": kind,
        "status": "True",
        "reason": reason,
        "message": "",
        "lastProbeTime": when,
        "lastTransitionTime": when,
    }


def _replicated(state: JobState) -> dict[str, Any]:
    """Deployment, ReplicaSet, StatefulSet: ready once the member runs the pods."""
    ready = state.pods_bound if state.phase == RUNNING else 0
    return {
        "replicas": state.pods_total,
        "readyReplicas": ready,
        "availableReplicas": ready,
        "updatedReplicas": state.pods_total,
    }


def _pod(state: JobState) -> dict[str, Any]:
    phase = {PENDING: "Pending", RUNNING: "Running", SUCCEEDED: "Succeeded", FAILED: "Failed"}
    return {"phase": phase[state.phase]}


_WRITERS: dict[tuple[str, str], Callable[[JobState], dict[str, Any]]] = {
    ("batch.volcano.sh", "Job"): _volcano,
    ("sparkoperator.k8s.io", "SparkApplication"): _spark,
    ("ray.io", "RayJob"): _rayjob,
    ("ray.io", "RayCluster"): _raycluster,
    ("batch", "Job"): _batch_job,
    ("jobset.x-k8s.io", "JobSet"): _jobset,
    ("apps", "Deployment"): _replicated,
    ("apps", "ReplicaSet"): _replicated,
    ("apps", "StatefulSet"): _replicated,
    ("", "Pod"): _pod,
}
