"""Volcano Job (``batch.volcano.sh/v1alpha1``), read the way Volcano's admission webhooks see it.

* Roles are ``spec.tasks[]`` in manifest order. A task without ``name`` is named
  ``default<index>`` (the mutating webhook's default). ``replicas`` is a plain int32 that no
  webhook defaults: absent means 0 pods, not 1.
* A task's ``minAvailable`` (default: its replicas) is its own gang minimum (Role.min_available)
  and may not exceed its replicas.
* Gang minimum: ``spec.minAvailable`` when set and non-zero, else the sum over tasks of each
  task's ``minAvailable`` (or its replicas when unset) -- the mutating webhook's default, which
  equals the sum of replicas only when no task sets its own minimum. ``spec.minAvailable: 0``
  counts as unset, as in Volcano (the field is a plain int).
* Queue hint ``spec.queue``; priority class ``spec.priorityClassName``. Not resizable.
* A pod template without ``priorityClassName`` gets the job's (the job controller's
  ``createJobPod``), which matters for Koordinator batch pods (``engine.workloads.colocation``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from engine.workloads.common import template_role, workload
from engine.workloads.model import DemandError, Role, Workload
from engine.workloads.pods import expect_int, expect_list, expect_mapping


def read_volcano_job(obj: Mapping[str, Any]) -> Workload:
    spec = expect_mapping(obj.get("spec"), "spec")
    tasks = expect_list(spec.get("tasks"), "spec.tasks")
    if not tasks:
        raise DemandError("spec.tasks", "required: at least one task")
    priority_class = _string(spec.get("priorityClassName"), "spec.priorityClassName")
    roles: list[Role] = []
    seen: set[str] = set()
    for index, raw in enumerate(tasks):
        path = f"spec.tasks[{index}]"
        task = expect_mapping(raw, path)
        name = task.get("name")
        if name is None or name == "":
            name = f"default{index}"
        if not isinstance(name, str):
            raise DemandError(f"{path}.name", f"expected a string, got {name!r}")
        if name in seen:
            raise DemandError(f"{path}.name", f"duplicate task name {name!r}")
        seen.add(name)
        role = template_role(
            name,
            task.get("replicas"),
            task.get("template"),
            path,
            default_replicas=0,
            fallback_priority_class=priority_class,
        )
        task_min = expect_int(task.get("minAvailable"), f"{path}.minAvailable", role.replicas)
        if task_min > role.replicas:
            message = f"{task_min} is more than the task's {role.replicas} replicas"
            raise DemandError(f"{path}.minAvailable", message)
        roles.append(dataclasses.replace(role, min_available=task_min))
    pods = sum(role.replicas for role in roles)
    min_member = expect_int(spec.get("minAvailable"), "spec.minAvailable", default=0)
    if min_member == 0:
        min_member = sum(role.min_available or 0 for role in roles)
    elif min_member > pods:
        raise DemandError(
            "spec.minAvailable", f"gang minimum {min_member} is more than the job's {pods} pods"
        )
    return workload(
        obj,
        roles,
        min_member=min_member,
        resizable=False,
        priority_class_name=priority_class,
        queue=_string(spec.get("queue"), "spec.queue"),
    )


def _string(value: Any, path: str) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise DemandError(path, f"expected a string, got {value!r}")
    return value


READERS = {("batch.volcano.sh/v1alpha1", "Job"): read_volcano_job}
