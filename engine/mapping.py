"""A job's queue, tenant and priority, by the SchedulingPolicy's CEL.

Order: ``queue`` first; ``tenant`` and ``priority`` then see ``job.queue`` set to the mapped queue.
In all three, ``job.priority`` is the value of the job's PriorityClass. A failed evaluation is
returned as a value (it becomes the reason PolicyEvalError), never raised.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from engine.policy import cel
from engine.policy.model import Expression, SchedulingPolicy
from engine.workloads.model import Workload


@dataclass(frozen=True, slots=True)
class MappedJob:
    queue: str | None
    tenant: str | None
    priority: int | None
    error: str | None = None  # "spec.queue: <message>" when an expression failed

    @property
    def ok(self) -> bool:
        return self.error is None


def job_values(
    workload: Workload,
    template: Mapping[str, Any] | None = None,
    *,
    priority: int = 0,
    queue: str = "",
    tenant: str = "",
) -> dict[str, Any]:
    """The CEL ``job`` variable of a workload (plain values; cel.activation converts them)."""
    return {
        "apiVersion": workload.api_version,
        "kind": workload.kind,
        "namespace": workload.namespace,
        "name": workload.name,
        "uid": workload.uid,
        "labels": dict(workload.labels),
        "annotations": dict(workload.annotations),
        "queue": queue,
        "specQueue": workload.queue or "",
        "tenant": tenant,
        "priority": priority,
        "priorityClassName": workload.priority_class_name or "",
        "components": [
            {"name": r.name, "replicas": r.replicas, "requests": r.requests.to_floats()}
            for r in workload.roles
        ],
        "total": workload.total.to_floats(),
        "minMember": workload.min_member,
        "resizable": workload.resizable,
        "createdAt": workload.created_at or dt.datetime(1970, 1, 1, tzinfo=dt.UTC),
        "object": dict(template or {}),
    }


def map_job(
    policy: SchedulingPolicy,
    workload: Workload,
    template: Mapping[str, Any] | None,
    *,
    priority_class_value: int,
    now: dt.datetime,
) -> MappedJob:
    values = job_values(workload, template, priority=priority_class_value)
    queue = _evaluate(policy.queue, values, now)
    if isinstance(queue, cel.CelError):
        return MappedJob(None, None, None, f"{policy.queue.path}: {queue}")
    values["queue"] = queue
    tenant = _evaluate(policy.tenant, values, now)
    if isinstance(tenant, cel.CelError):
        return MappedJob(queue, None, None, f"{policy.tenant.path}: {tenant}")
    priority = _evaluate(policy.priority, values, now)
    if isinstance(priority, cel.CelError):
        return MappedJob(queue, tenant, None, f"{policy.priority.path}: {priority}")
    return MappedJob(queue, tenant, priority)


def _evaluate(expression: Expression, job: dict[str, Any], now: dt.datetime) -> Any:
    return expression.program.evaluate(cel.activation(cel.MAPPING_VARS, job=job, now=now))
