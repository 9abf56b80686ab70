"""Builders shared by the demand-reader tests."""

from __future__ import annotations

from typing import Any

from engine.quantity import parse_quantity
from engine.resources import Resources


def res(**amounts: str | int) -> Resources:
    """Resources from quantities; ``nvidia_com_gpu`` stands for ``nvidia.com/gpu``."""
    return Resources({k.replace("_com_", ".com/"): parse_quantity(v) for k, v in amounts.items()})


def container(requests: dict | None = None, limits: dict | None = None, **extra: Any) -> dict:
    resources = {}
    if requests is not None:
        resources["requests"] = requests
    if limits is not None:
        resources["limits"] = limits
    return {"name": "main", "image": "busybox", "resources": resources, **extra}


def replica(replicas: Any = None, *containers: dict, **pod: Any) -> dict:
    """A Kubeflow/MPI replica spec: replicas and a pod template."""
    body: dict[str, Any] = {
        "template": {"spec": {"containers": list(containers) or [container()], **pod}}
    }
    if replicas is not None:
        body["replicas"] = replicas
    return body
