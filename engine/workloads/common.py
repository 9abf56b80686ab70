"""Pieces every job-kind reader uses: metadata, pod templates, the Workload value."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

from engine.workloads.model import DemandError, Role, Workload
from engine.workloads.pods import expect_int, expect_mapping, pod_requests


def template_role(
    name: str,
    replicas: Any,
    template: Any,
    path: str,
    default_replicas: int = 1,
    *,
    fallback_priority_class: str | None = None,
) -> Role:
    """A role from a replica count and a PodTemplateSpec at ``path`` (its ``spec`` is read).

    The pods' requests are Koordinator batch resources when the template's priority class (else
    ``fallback_priority_class``, the one the controller fills in) is Koordinator's batch class.
    """
    count = expect_int(replicas, f"{path}.replicas", default=default_replicas)
    if template is None:
        raise DemandError(f"{path}.template", "required")
    pod_template = expect_mapping(template, f"{path}.template")
    requests = pod_requests(
        pod_template.get("spec"),
        f"{path}.template.spec",
        fallback_priority_class=fallback_priority_class,
    )
    return Role(name=name, replicas=count, requests=requests)


def unique_name(entry: Mapping[str, Any], key: str, where: str, seen: set[str], what: str) -> str:
    """A required name, unique among its siblings (``seen`` collects them)."""
    name = entry.get(key)
    if not isinstance(name, str) or not name:
        raise DemandError(f"{where}.{key}", "required")
    if name in seen:
        raise DemandError(f"{where}.{key}", f"duplicate {what} {name!r}")
    seen.add(name)
    return name


GENERATED = "*"
"""Follows the ``generateName`` of an object whose name the API server has not chosen yet."""


def object_name(metadata: Mapping[str, Any]) -> str:
    """``metadata.name``, or for an object named by ``metadata.generateName`` the prefix and "*".

    Manifests for ``kubectl create`` (Kueue's samples, for one) give only ``generateName``, and
    an admission request to CREATE such an object carries no name yet: ``sample-job-`` is shown
    as ``sample-job-*``, which no real name can be.
    """
    name = metadata.get("name")
    if name is not None and name != "":
        if not isinstance(name, str):
            raise DemandError("metadata.name", f"expected a string, got {name!r}")
        return name
    prefix = metadata.get("generateName")
    if prefix is not None and prefix != "":
        if not isinstance(prefix, str):
            raise DemandError("metadata.generateName", f"expected a string, got {prefix!r}")
        return prefix + GENERATED
    raise DemandError("metadata.name", "required (or metadata.generateName)")


def workload(
    obj: Mapping[str, Any],
    roles: Sequence[Role],
    *,
    min_member: int,
    resizable: bool,
    priority_class_name: str | None = None,
    queue: str | None = None,
) -> Workload:
    """The Workload value for ``obj`` with the metadata every kind shares."""
    metadata = expect_mapping(obj.get("metadata"), "metadata")
    name = object_name(metadata)
    if min_member > sum(role.replicas for role in roles):
        pods = sum(role.replicas for role in roles)
        raise DemandError("", f"gang minimum {min_member} is more than the job's {pods} pods")
    return Workload(
        api_version=str(obj.get("apiVersion", "")),
        kind=str(obj.get("kind", "")),
        namespace=str(metadata.get("namespace") or ""),
        name=name,
        uid=str(metadata.get("uid") or ""),
        roles=tuple(roles),
        min_member=min_member,
        resizable=resizable,
        priority_class_name=priority_class_name or None,
        queue=queue or None,
        labels=_strings(metadata.get("labels"), "metadata.labels"),
        annotations=_strings(metadata.get("annotations"), "metadata.annotations"),
        created_at=_timestamp(metadata.get("creationTimestamp")),
    )


def _strings(raw: Any, path: str) -> dict[str, str]:
    return {str(k): str(v) for k, v in expect_mapping(raw, path).items()}


def _timestamp(raw: Any) -> dt.datetime | None:
    if isinstance(raw, dt.datetime):  # YAML loaders turn unquoted timestamps into datetimes
        return raw if raw.tzinfo else raw.replace(tzinfo=dt.UTC)
    if isinstance(raw, str) and raw:
        try:
            parsed = dt.datetime.fromisoformat(raw.replace("Z", "+00:00"))
        except ValueError as err:
            raise DemandError("metadata.creationTimestamp", f"not RFC 3339: {raw!r}") from err
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)
    return None
