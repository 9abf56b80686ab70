"""Submitting job templates through the kubernetes client, as ``kubectl apply`` would."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import kubernetes
from kubernetes.client.exceptions import ApiException

# (group, kind) → plural, for the job kinds of the example templates
PLURALS = {
    ("kubeflow.org", "PyTorchJob"): "pytorchjobs",
    ("kubeflow.org", "MPIJob"): "mpijobs",
    ("batch.volcano.sh", "Job"): "jobs",
    ("ray.io", "RayJob"): "rayjobs",
    ("sparkoperator.k8s.io", "SparkApplication"): "sparkapplications",
}


def create(api: kubernetes.client.ApiClient, template: Mapping[str, Any]) -> str | None:
    """Create ``template``; None when the API server took it, else why not (the Status
    message, e.g. a denial by fleetgate's validating webhook)."""
    group, _, version = str(template["apiVersion"]).rpartition("/")
    kind = str(template["kind"])
    namespace = str(template["metadata"]["namespace"])
    try:
        if group == "batch" and kind == "Job":
            kubernetes.client.BatchV1Api(api).create_namespaced_job(namespace, dict(template))
        else:
            plural = PLURALS.get((group, kind))
            if plural is None:
                return f"{template['apiVersion']} {kind} is not a kind the demo submits"
            kubernetes.client.CustomObjectsApi(api).create_namespaced_custom_object(
                group, version, namespace, plural, dict(template)
            )
    except ApiException as error:
        return f"{error.status} {error.reason}: {_message(error)}"
    return None


def _message(error: ApiException) -> str:
    import json

    try:
        return str(json.loads(error.body or "{}").get("message") or "")
    except ValueError:
        return str(error.body or "")[:200]
