"""Kubernetes built-ins: batch/v1 Job, apps/v1 Deployment, ReplicaSet, StatefulSet, and v1 Pod.

Every kind has one role, ``pod``.

* Job: ``pod`` runs ``parallelism`` pods (default 1), capped by ``completions`` when that
  is smaller, as the Job controller and Kueue count it. Gang minimum: every pod, unless Kueue's
  partial-admission annotation ``kueue.x-k8s.io/job-min-parallelism`` names a smaller minimum.
  Resizable: Karmada divides a Job's parallelism between clusters.
* Deployment, ReplicaSet, StatefulSet: ``spec.replicas`` pods (default 1).
  Gang minimum 1: the pods are independent. Resizable.
* Pod: one pod. Gang minimum 1; not resizable.

Queue: none in these specs (Kueue's ``kueue.x-k8s.io/queue-name`` label is read by the queue
mapping). Priority class: the pod template's ``priorityClassName``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.workloads.common import template_role, workload
from engine.workloads.jobset import job_pods
from engine.workloads.model import DemandError, Role, Workload
from engine.workloads.pods import expect_mapping, pod_requests

MIN_PARALLELISM = "kueue.x-k8s.io/job-min-parallelism"


def _template_priority(template: Any, path: str) -> str | None:
    pod_spec = expect_mapping(expect_mapping(template, path).get("spec"), f"{path}.spec")
    priority = pod_spec.get("priorityClassName")
    return str(priority) if priority else None


def _template(spec: Mapping[str, Any]) -> Any:
    if "template" not in spec:
        raise DemandError("spec.template", "required")
    return spec["template"]


def read_job(obj: Mapping[str, Any]) -> Workload:
    spec = expect_mapping(obj.get("spec"), "spec")
    template = _template(spec)
    role = template_role("pod", job_pods(spec, "spec"), template, "spec")
    minimum = role.replicas
    annotations = expect_mapping(
        expect_mapping(obj.get("metadata"), "metadata").get("annotations"), "metadata.annotations"
    )
    if MIN_PARALLELISM in annotations:
        where = f'metadata.annotations["{MIN_PARALLELISM}"]'
        raw = str(annotations[MIN_PARALLELISM]).strip()
        if not raw.isdigit() or not 0 < int(raw) <= role.replicas:
            raise DemandError(where, f"expected a whole number 1..{role.replicas}, got {raw!r}")
        minimum = int(raw)
    return workload(
        obj,
        [role],
        min_member=minimum,
        resizable=True,
        priority_class_name=_template_priority(template, "spec.template"),
    )


def _replicated(obj: Mapping[str, Any]) -> Workload:
    spec = expect_mapping(obj.get("spec"), "spec")
    template = _template(spec)
    role = template_role("pod", spec.get("replicas"), template, "spec")
    return workload(
        obj,
        [role],
        min_member=min(1, role.replicas),
        resizable=True,
        priority_class_name=_template_priority(template, "spec.template"),
    )


def read_pod(obj: Mapping[str, Any]) -> Workload:
    spec = expect_mapping(obj.get("spec"), "spec")
    role = Role("pod", 1, pod_requests(spec, "spec"))
    priority = spec.get("priorityClassName")
    return workload(
        obj,
        [role],
        min_member=1,
        resizable=False,
        priority_class_name=str(priority) if priority else None,
    )


READERS = {
    ("batch/v1", "Job"): read_job,
    **{("apps/v1", kind): _replicated for kind in ("Deployment", "ReplicaSet", "StatefulSet")},
    ("v1", "Pod"): read_pod,
}
