"""core/v1 Events on a binding (and on its template: ``reconciler.recorder``), the way
``kubectl describe`` lists them."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from engine import annotations as ann
from engine import untrusted
from engine.enforce import EventSpec

COMPONENT = "fleetgate"
EVENT_MESSAGE_LIMIT = 1024  # what kube-apiserver's event validation allows in a note


def event_body(
    binding: Mapping[str, Any], spec: EventSpec, now: dt.datetime, suffix: str
) -> dict[str, Any]:
    """A core/v1 Event about ``binding`` (its uid and resourceVersion as written)."""
    meta = binding.get("metadata") or {}
    involved = {
        "apiVersion": binding.get("apiVersion", "work.karmada.io/v1alpha2"),
        "kind": binding.get("kind", "ResourceBinding"),
        "name": meta.get("name", ""),
        "uid": meta.get("uid", ""),
        "resourceVersion": str(meta.get("resourceVersion", "")),
    }
    if meta.get("namespace"):
        involved["namespace"] = meta["namespace"]
    return event_for(involved, spec, now, suffix)


def event_for(
    involved: Mapping[str, Any], spec: EventSpec, now: dt.datetime, suffix: str
) -> dict[str, Any]:
    """A core/v1 Event about the object ``involved`` refers to; named like client-go's
    recorder names them, ``<object name>.<suffix>``. A cluster-scoped object's Event goes to
    ``default``, as client-go does."""
    namespace = involved.get("namespace") or "default"
    stamp = ann.format_time(now)
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "name": f"{involved.get('name') or 'object'}.{suffix}",
            "namespace": namespace,
        },
        "involvedObject": dict(involved),
        "reason": spec.reason,
        "message": untrusted.echo(spec.message, EVENT_MESSAGE_LIMIT - 40),
        "type": spec.type,
        "source": {"component": COMPONENT},
        "reportingComponent": COMPONENT,
        "reportingInstance": COMPONENT,
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }
