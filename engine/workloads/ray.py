"""KubeRay: ``ray.io/v1`` RayCluster and RayJob (ray-project/kuberay ``ray-operator``).

RayCluster roles: ``head`` (one pod) and one role per worker group, named by ``groupName``. A
group runs ``replicas × numOfHosts`` pods, ``replicas`` clamped the way KubeRay's
``GetWorkerGroupDesiredReplicas`` clamps it: a suspended group runs none; absent or below
``minReplicas`` → ``minReplicas``; above ``maxReplicas`` → ``maxReplicas``. CRD defaults:
``replicas`` 0, ``minReplicas`` 0, ``maxReplicas`` 2147483647, ``numOfHosts`` 1.

With ``enableInTreeAutoscaling: true`` KubeRay adds an autoscaler container to the head pod:
``autoscalerOptions.resources`` if given, else requests cpu 500m, memory 512Mi
(``BuildAutoscalerContainer``). It is counted, because the head pod really asks for it (KubeRay's
own PodGroup sizing reads only the template and misses it).

Gang minimum (KubeRay's Volcano integration, ``calculatePodGroupParams``): without autoscaling,
every pod (head + desired workers); with autoscaling, head + Σ ``minReplicas × numOfHosts`` of
the groups that are not suspended. Never resizable: a Ray cluster lives in one cluster.

RayJob: the cluster of ``spec.rayClusterSpec`` plus, in ``submissionMode: K8sJobMode`` (the
default), a ``submitter`` pod, a Kubernetes Job of one pod from ``spec.submitterPodTemplate`` or
KubeRay's default (``GetDefaultSubmitterContainer``: requests cpu 500m, memory 200Mi). Kueue
counts it as its own PodSet. It is left out of the gang minimum, as KubeRay's Volcano
integration leaves it out (it waits for the cluster; a gang that waited for it would deadlock).
``SidecarMode`` puts the default submitter container into the head pod instead; ``HTTPMode`` and
``InteractiveMode`` add no pod. With ``spec.clusterSelector`` the job runs on an existing
cluster and needs only its submitter.

Koordinator batch pods (``engine.workloads.colocation``) are decided per pod template; the
autoscaler and SidecarMode submitter containers are rewritten with the head pod they join. The
default K8sJobMode submitter pod names no priority class and keeps cpu/memory.

Hints: queue from the label ``volcano.sh/queue-name`` (what KubeRay's Volcano integration reads);
priority class from the label ``ray.io/priority-class-name``, else the head pod's
``priorityClassName``.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from engine.resources import Resources
from engine.workloads.colocation import batch_resources
from engine.workloads.common import template_role, unique_name, workload
from engine.workloads.model import DemandError, Role, Workload
from engine.workloads.pods import (
    container_requests,
    expect_int,
    expect_list,
    expect_mapping,
    pod_is_batch,
    pod_requests,
)

MAX_REPLICAS = 2**31 - 1  # CRD default of maxReplicas
AUTOSCALER_REQUESTS = Resources({"cpu": Fraction(1, 2), "memory": 512 * 2**20})
SUBMITTER_REQUESTS = Resources({"cpu": Fraction(1, 2), "memory": 200 * 2**20})
QUEUE_LABEL = "volcano.sh/queue-name"
PRIORITY_LABEL = "ray.io/priority-class-name"
SUBMISSION_MODES = ("K8sJobMode", "HTTPMode", "InteractiveMode", "SidecarMode")


def cluster_roles(
    cluster: Any, path: str, *, extra_head: Resources | None = None
) -> tuple[list[Role], int]:
    """Roles of a RayClusterSpec at ``path`` and its gang minimum."""
    spec = expect_mapping(cluster, path)
    autoscaling = _bool(spec.get("enableInTreeAutoscaling"), f"{path}.enableInTreeAutoscaling")
    head_path = f"{path}.headGroupSpec"
    head_group = expect_mapping(spec.get("headGroupSpec"), head_path)
    if "template" not in head_group:
        raise DemandError(f"{head_path}.template", "required")
    head = template_role("head", 1, head_group["template"], head_path)
    head_spec = expect_mapping(head_group["template"], f"{head_path}.template").get("spec")
    batch = pod_is_batch(expect_mapping(head_spec, f"{head_path}.template.spec"))
    requests = head.requests
    if autoscaling:
        options = expect_mapping(spec.get("autoscalerOptions"), f"{path}.autoscalerOptions")
        if options.get("resources") is not None:
            where = f"{path}.autoscalerOptions"
            requests = requests + container_requests(options, where, batch=batch)
        else:
            requests = requests + _in_pod(AUTOSCALER_REQUESTS, batch)
    if extra_head:
        requests = requests + _in_pod(extra_head, batch)
    roles = [Role("head", 1, requests, min_available=1)]
    gang = 1
    names: set[str] = set()
    groups = expect_list(spec.get("workerGroupSpecs"), f"{path}.workerGroupSpecs")
    for i, raw in enumerate(groups):
        where = f"{path}.workerGroupSpecs[{i}]"
        group = expect_mapping(raw, where)
        name = unique_name(group, "groupName", where, names, "worker group")
        if "template" not in group:
            raise DemandError(f"{where}.template", "required")
        minimum = expect_int(group.get("minReplicas"), f"{where}.minReplicas", 0)
        maximum = expect_int(group.get("maxReplicas"), f"{where}.maxReplicas", MAX_REPLICAS)
        if minimum > maximum:  # KubeRay's validation rejects it too
            raise DemandError(
                f"{where}.minReplicas", f"{minimum} is more than maxReplicas {maximum}"
            )
        hosts = expect_int(group.get("numOfHosts"), f"{where}.numOfHosts", 1, minimum=1)
        asked = group.get("replicas")
        replicas = None if asked is None else expect_int(asked, f"{where}.replicas")
        suspended = _bool(group.get("suspend"), f"{where}.suspend")
        desired = _desired(replicas, minimum, maximum, suspended)
        role = template_role(name, desired * hosts, group["template"], where)
        group_min = 0 if suspended else minimum * hosts
        roles.append(Role(name, role.replicas, role.requests, min_available=group_min))
        gang += group_min if autoscaling else role.replicas
    return roles, gang


def _in_pod(container: Resources, batch: bool) -> Resources:
    """A container KubeRay adds to a pod: Koordinator rewrites it with the rest of a batch pod."""
    return batch_resources(container) if batch else container


def _desired(replicas: int | None, minimum: int, maximum: int, suspended: bool) -> int:
    """KubeRay's GetWorkerGroupDesiredReplicas, before the numOfHosts multiplication."""
    if suspended:
        return 0
    if replicas is None or replicas < minimum:
        return minimum
    return min(replicas, maximum)


def _bool(raw: Any, path: str) -> bool:
    if raw is None:
        return False
    if not isinstance(raw, bool):
        raise DemandError(path, f"expected a boolean, got {raw!r}")
    return raw


def _hints(obj: Mapping[str, Any], cluster: Any, path: str) -> tuple[str | None, str | None]:
    """(queue, priority class) of a RayCluster or RayJob whose cluster spec is already read."""
    metadata = expect_mapping(obj.get("metadata"), "metadata")
    labels = expect_mapping(metadata.get("labels"), "metadata.labels")
    priority = labels.get(PRIORITY_LABEL)
    if not priority and cluster is not None:
        template = expect_mapping(cluster, path)["headGroupSpec"]["template"]
        pod_spec = expect_mapping(template, f"{path}.headGroupSpec.template").get("spec") or {}
        priority = pod_spec.get("priorityClassName")
    queue = labels.get(QUEUE_LABEL)
    return (str(queue) if queue else None, str(priority) if priority else None)


def read_ray_cluster(obj: Mapping[str, Any]) -> Workload:
    roles, gang = cluster_roles(obj.get("spec"), "spec")
    queue, priority = _hints(obj, obj.get("spec"), "spec")
    return workload(
        obj, roles, min_member=gang, resizable=False, priority_class_name=priority, queue=queue
    )


def read_ray_job(obj: Mapping[str, Any]) -> Workload:
    spec = expect_mapping(obj.get("spec"), "spec")
    mode = spec.get("submissionMode", "K8sJobMode")
    if mode not in SUBMISSION_MODES:
        raise DemandError(
            "spec.submissionMode", f"expected one of {', '.join(SUBMISSION_MODES)}, got {mode!r}"
        )
    roles: list[Role] = []
    gang = 0
    cluster = None
    if expect_mapping(spec.get("clusterSelector"), "spec.clusterSelector"):
        if mode == "SidecarMode":
            raise DemandError("spec.clusterSelector", "not supported with SidecarMode")
    else:
        cluster = spec.get("rayClusterSpec")
        if cluster is None:
            raise DemandError("spec.rayClusterSpec", "required when spec.clusterSelector is unset")
        sidecar = SUBMITTER_REQUESTS if mode == "SidecarMode" else None
        roles, gang = cluster_roles(cluster, "spec.rayClusterSpec", extra_head=sidecar)
    if mode == "K8sJobMode":
        template = spec.get("submitterPodTemplate")
        if template is None:
            requests = SUBMITTER_REQUESTS
        else:
            pod = expect_mapping(template, "spec.submitterPodTemplate")
            requests = pod_requests(pod.get("spec"), "spec.submitterPodTemplate.spec")
        roles.append(Role("submitter", 1, requests, min_available=0))
        if cluster is None:
            gang = 1  # an existing cluster: the submitter is the whole job
    queue, priority = _hints(obj, cluster, "spec.rayClusterSpec")
    return workload(
        obj, roles, min_member=gang, resizable=False, priority_class_name=priority, queue=queue
    )


READERS = {("ray.io/v1", "RayCluster"): read_ray_cluster, ("ray.io/v1", "RayJob"): read_ray_job}
