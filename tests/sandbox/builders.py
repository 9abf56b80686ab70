"""Object builders for the sandbox tests, named by shape."""

from __future__ import annotations

from typing import Any

WORK = ("work.karmada.io", "v1alpha2")
RB_PLURAL = "resourcebindings"


def binding(name: str, namespace: str = "default", **spec: Any) -> dict[str, Any]:
    """A ResourceBinding for PyTorchJob ``name``; extra keyword arguments go into spec."""
    return {
        "apiVersion": "work.karmada.io/v1alpha2",
        "kind": "ResourceBinding",
        "metadata": {"name": f"{name}-pytorchjob", "namespace": namespace},
        "spec": {
            "resource": {
                "apiVersion": "kubeflow.org/v1",
                "kind": "PyTorchJob",
                "name": name,
                "namespace": namespace,
            },
            **spec,
        },
    }


def pytorchjob(name: str, namespace: str = "default", gpus: int = 8) -> dict[str, Any]:
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "pytorchReplicaSpecs": {
                "Master": {
                    "replicas": 1,
                    "template": {
                        "spec": {
                            "containers": [
                                {
                                    "name": "pytorch",
                                    "image": "pytorch",
                                    "resources": {"limits": {"nvidia.com/gpu": gpus}},
                                }
                            ]
                        }
                    },
                }
            }
        },
    }


def cluster(name: str, **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "cluster.karmada.io/v1alpha1",
        "kind": "Cluster",
        "metadata": {"name": name, "labels": labels},
        "spec": {"syncMode": "Push"},
    }


def owner_ref(owner: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "blockOwnerDeletion": True,
    }
