"""``v1 Namespace`` → NamespaceView: the labels a queue's ``namespaceSelector`` is matched on."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.fleet.fields import metadata
from engine.fleet.frozen import FrozenDict
from engine.fleet.model import NAME_LABEL, NamespaceView


def read_namespace(obj: Mapping[str, Any]) -> NamespaceView:
    """The Namespace's labels, with ``kubernetes.io/metadata.name`` as the API server sets it
    on every Namespace (since Kubernetes 1.21)."""
    meta = metadata(obj)
    return NamespaceView(meta.name, FrozenDict({**meta.labels, NAME_LABEL: meta.name}))
