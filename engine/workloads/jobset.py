"""JobSet: ``jobset.x-k8s.io/v1alpha2`` JobSet (kubernetes-sigs/jobset).

One role per ``spec.replicatedJobs[]`` entry, named by its ``name``: ``replicas`` (default 1)
Jobs, each running as many pods at once as its template's Job controller keeps active:
``parallelism`` (default 1), but never more than ``completions`` when that is smaller (the Job
controller does not start more pods than completions remain). Kueue counts a replicated job the
same way (``podsCountPerReplica`` in its jobset integration). Completions above parallelism only
make the Job run longer, not wider, so they do not change the demand.

Gang minimum: every pod. A JobSet is placed as a whole (its Jobs talk to each other through the
headless service), so it is never resizable. Priority class: the first replicated job whose pod
template names one. Queue: none in the spec; Kueue's label is read by the queue mapping.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.workloads.common import template_role, unique_name, workload
from engine.workloads.model import DemandError, Role, Workload
from engine.workloads.pods import expect_int, expect_list, expect_mapping


def job_pods(job_spec: Mapping[str, Any], path: str) -> int:
    """Pods a Job runs at once: parallelism (default 1), capped by completions when set."""
    parallelism = expect_int(job_spec.get("parallelism"), f"{path}.parallelism", 1)
    completions = job_spec.get("completions")
    if completions is None:
        return parallelism
    return min(parallelism, expect_int(completions, f"{path}.completions"))


def read_jobset(obj: Mapping[str, Any]) -> Workload:
    spec = expect_mapping(obj.get("spec"), "spec")
    replicated = expect_list(spec.get("replicatedJobs"), "spec.replicatedJobs")
    if not replicated:
        raise DemandError("spec.replicatedJobs", "required: at least one replicated job")
    roles: list[Role] = []
    names: set[str] = set()
    priority = None
    for i, raw in enumerate(replicated):
        where = f"spec.replicatedJobs[{i}]"
        entry = expect_mapping(raw, where)
        name = unique_name(entry, "name", where, names, "replicated job")
        jobs = expect_int(entry.get("replicas"), f"{where}.replicas", 1)
        job_template = expect_mapping(entry.get("template"), f"{where}.template")
        job_spec = expect_mapping(job_template.get("spec"), f"{where}.template.spec")
        if "template" not in job_spec:
            raise DemandError(f"{where}.template.spec.template", "required")
        pods = jobs * job_pods(job_spec, f"{where}.template.spec")
        role = template_role(name, pods, job_spec["template"], f"{where}.template.spec")
        roles.append(role)
        pod_template = expect_mapping(job_spec["template"], f"{where}.template.spec.template")
        pod_spec = pod_template.get("spec") or {}  # a mapping: template_role checked it
        priority = priority or pod_spec.get("priorityClassName")
    return workload(
        obj,
        roles,
        min_member=sum(role.replicas for role in roles),
        resizable=False,
        priority_class_name=str(priority) if priority else None,
    )


READERS = {("jobset.x-k8s.io/v1alpha2", "JobSet"): read_jobset}
