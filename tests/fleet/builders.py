"""Karmada objects for fleet tests, named by shape: ``cluster("gpu-east", gpus=32)``."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

PP_ID_LABEL = "propagationpolicy.karmada.io/permanent-id"
CPP_ID_LABEL = "clusterpropagationpolicy.karmada.io/permanent-id"

Obj = dict[str, Any]


def cluster(
    name: str,
    *,
    gpus: int = 0,
    cpu: str = "256",
    memory: str = "1Ti",
    used: Mapping[str, str] | None = None,
    pending: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
    provider: str = "aws",
    region: str = "us-east-1",
    zones: Sequence[str] = ("us-east-1a",),
    taints: Sequence[Mapping[str, str]] = (),
    apis: Mapping[str, Sequence[str]] | None = None,
    ready: bool = True,
    models: Sequence[Mapping[str, Any]] = (),
    modelings: Sequence[tuple[int, int]] = (),
) -> Obj:
    allocatable = {"cpu": cpu, "memory": memory, "pods": "440"}
    if gpus:
        allocatable["nvidia.com/gpu"] = str(gpus)
    spec: Obj = {"syncMode": "Push", "apiEndpoint": f"https://{name}:6443", "provider": provider}
    if region:
        spec["region"] = region
    if zones:
        spec["zones"] = list(zones)
    if taints:
        spec["taints"] = [dict(t) for t in taints]
    if models:
        spec["resourceModels"] = [copy.deepcopy(dict(m)) for m in models]
    status: Obj = {
        "kubernetesVersion": "v1.30.4",
        "conditions": [
            {
                "type": "Ready",
                "status": "True" if ready else "False",
                "reason": "ClusterReady" if ready else "ClusterNotReachable",
                "message": "",
                "lastTransitionTime": "2025-03-09T22:14:03Z",
            }
        ],
        "resourceSummary": {
            "allocatable": allocatable,
            "allocated": dict(used or {}),
            "allocating": dict(pending or {}),
        },
    }
    if modelings:
        status["resourceSummary"]["allocatableModelings"] = [
            {"grade": g, "count": c} for g, c in modelings
        ]
    if apis is not None:
        status["apiEnablements"] = [
            {"groupVersion": gv, "resources": [{"name": k.lower() + "s", "kind": k} for k in kinds]}
            for gv, kinds in apis.items()
        ]
    return {
        "apiVersion": "cluster.karmada.io/v1alpha1",
        "kind": "Cluster",
        "metadata": {"name": name, "labels": dict(labels or {}), "resourceVersion": "10"},
        "spec": spec,
        "status": status,
    }


def policy(
    name: str,
    namespace: str = "research",
    *,
    placement: Mapping[str, Any] | None = None,
    kinds: Sequence[tuple[str, str]] = (("kubeflow.org/v1", "PyTorchJob"),),
    priority: int = 0,
    cluster_scoped: bool = False,
) -> Obj:
    kind = "ClusterPropagationPolicy" if cluster_scoped else "PropagationPolicy"
    label = CPP_ID_LABEL if cluster_scoped else PP_ID_LABEL
    metadata: Obj = {"name": name, "labels": {label: f"id-{name}"}}
    if not cluster_scoped:
        metadata["namespace"] = namespace
    return {
        "apiVersion": "policy.karmada.io/v1alpha1",
        "kind": kind,
        "metadata": metadata,
        "spec": {
            "resourceSelectors": [{"apiVersion": a, "kind": k} for a, k in kinds],
            "placement": copy.deepcopy(dict(placement or {})),
            "priority": priority,
        },
    }


def pytorch_job(
    name: str, namespace: str = "research", *, workers: int = 2, gpus: int = 8, queue: str = ""
) -> Obj:
    labels = {"fleetgate.io/queue": queue} if queue else {}
    pod = {
        "spec": {
            "containers": [
                {
                    "name": "pytorch",
                    "image": "pytorch:2.4",
                    "resources": {
                        "requests": {"cpu": "8", "memory": "64Gi"},
                        "limits": {"nvidia.com/gpu": str(gpus)},
                    },
                }
            ]
        }
    }
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}", "labels": labels},
        "spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": workers, "template": pod}}},
    }


def custom_job(name: str, namespace: str = "research") -> Obj:
    """A template of a kind fleetgate has no reader for."""
    return {
        "apiVersion": "example.com/v1",
        "kind": "TrainingRun",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{name}",
            "labels": {"fleetgate.io/queue": "research-training"},
            "creationTimestamp": "2025-03-10T09:00:00Z",
        },
        "spec": {"steps": 1000},
    }


def binding_for(
    job: Mapping[str, Any],
    *,
    clusters: Sequence[str | tuple[str, int]] = (),
    replicas: int | None = None,
    requests: Mapping[str, str] | None = None,
    components: Sequence[Mapping[str, Any]] = (),
    suspended: bool = True,
    applied: Mapping[str, bool] | None = None,
    policy_id: str = "id-research-jobs",
    placement: Mapping[str, Any] | None = None,
) -> Obj:
    meta = job["metadata"]
    name = f"{meta['name']}-{job['kind'].lower()}"
    spec: Obj = {
        "resource": {
            "apiVersion": job["apiVersion"],
            "kind": job["kind"],
            "namespace": meta["namespace"],
            "name": meta["name"],
            "uid": meta.get("uid", ""),
        },
        "suspension": {"scheduling": suspended},
    }
    if placement is not None:
        spec["placement"] = copy.deepcopy(dict(placement))
    if clusters:
        spec["clusters"] = [
            {"name": c} if isinstance(c, str) else {"name": c[0], "replicas": c[1]}
            for c in clusters
        ]
    if replicas is not None:
        spec["replicas"] = replicas
    if requests is not None:
        spec["replicaRequirements"] = {"resourceRequest": dict(requests)}
    if components:
        spec["components"] = [copy.deepcopy(dict(c)) for c in components]
    status: Obj = {}
    if applied:
        status["aggregatedStatus"] = [
            {"clusterName": c, "applied": ok, "health": "Healthy" if ok else "Unknown"}
            for c, ok in applied.items()
        ]
        status["schedulerObservedGeneration"] = 2
        status["conditions"] = [
            {
                "type": "Scheduled",
                "status": "True",
                "reason": "BindingScheduled",
                "message": "",
                "lastTransitionTime": "2025-03-10T09:01:00Z",
            }
        ]
    return {
        "apiVersion": "work.karmada.io/v1alpha2",
        "kind": "ResourceBinding",
        "metadata": {
            "name": name,
            "namespace": meta["namespace"],
            "uid": f"uid-{name}",
            "generation": 2 if clusters else 1,
            "creationTimestamp": "2025-03-10T09:00:05Z",
            "labels": {PP_ID_LABEL: policy_id, "fleetgate.io/managed": "true"},
            "ownerReferences": [
                {
                    "apiVersion": job["apiVersion"],
                    "kind": job["kind"],
                    "name": meta["name"],
                    "uid": meta.get("uid", ""),
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": spec,
        "status": status,
    }


def component(name: str, replicas: int, requests: Mapping[str, str]) -> Obj:
    return {
        "name": name,
        "replicas": replicas,
        "replicaRequirements": {"resourceRequest": dict(requests)},
    }


def priority_class(name: str, value: int, *, default: bool = False) -> Obj:
    obj: Obj = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
    }
    if default:
        obj["globalDefault"] = True
    return obj


def as_list(objects: Sequence[Mapping[str, Any]]) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "List",
        "metadata": {"resourceVersion": ""},
        "items": list(objects),
    }


def small_fleet() -> list[Obj]:
    """Two GPU clusters, a policy, a class, a running PyTorchJob and a pending custom job."""
    running = pytorch_job("llama", queue="research-training")
    pending = custom_job("sweep")
    return [
        cluster("gpu-east", gpus=32, labels={"gpu.fleetgate.io/model": "h100"}),
        cluster("gpu-west", gpus=32, labels={"gpu.fleetgate.io/model": "a100"}, provider="gcp"),
        policy("research-jobs"),
        priority_class("standard", 500, default=True),
        running,
        binding_for(running, clusters=["gpu-east"], applied={"gpu-east": True}),
        pending,
        binding_for(pending, replicas=2, requests={"cpu": "4", "nvidia.com/gpu": "8"}),
    ]
