"""MPIJob of kubeflow/mpi-operator v2 (``kubeflow.org/v2beta1``).

Read the way mpi-operator defaults, validates and gang-schedules it:

* ``spec.mpiReplicaSpecs`` holds ``Launcher`` (required, exactly 1 replica, default 1) and an
  optional ``Worker``. Names are case-sensitive. mpi-operator defaults a missing Worker
  ``replicas`` to 0 and then rejects it (a Worker must have at least 1 replica), so fleetgate
  reports the missing count instead of guessing.
* Pods: 1 launcher + the workers. ``runLauncherAsWorker: true`` only lists the launcher in the
  hostfile so it runs ranks too; it adds no pod and does not change the gang minimum (and it is
  what makes a launcher-only job useful).
* Gang minimum: ``runPolicy.schedulingPolicy.minAvailable`` if set, else workers + 1 (the
  PodGroup minMember mpi-operator writes, ``calculateMinAvailable``).
* Queue hint ``runPolicy.schedulingPolicy.queue``. Priority class:
  ``schedulingPolicy.priorityClass``, else the Launcher's then the Worker's pod template
  ``priorityClassName`` (mpi-operator's ``calculatePriorityClassName``).
* Roles in the order Launcher, Worker (also their sorted order).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.workloads.common import workload
from engine.workloads.kubeflow import (
    check_min_member,
    optional_string,
    replica_role,
    replica_specs,
    run_policy_hints,
)
from engine.workloads.model import DemandError, Workload
from engine.workloads.pods import expect_mapping

BASE = "spec.mpiReplicaSpecs"


def read_mpijob(obj: Mapping[str, Any]) -> Workload:
    spec = expect_mapping(obj.get("spec"), "spec")
    types = ("Launcher", "Worker")
    specs = replica_specs(spec.get("mpiReplicaSpecs"), BASE, types, camel_case=False)
    if "Launcher" not in specs:
        raise DemandError(f"{BASE}.Launcher", "required")
    launcher_spec = specs["Launcher"][1]
    launcher = replica_role("Launcher", launcher_spec, f"{BASE}.Launcher", 1)
    if launcher.replicas != 1:
        raise DemandError(f"{BASE}.Launcher.replicas", "must be 1")
    roles = [launcher]
    worker_spec: Mapping[str, Any] = {}
    if "Worker" in specs:
        worker_spec = specs["Worker"][1]
        if worker_spec.get("replicas") is None:
            raise DemandError(
                f"{BASE}.Worker.replicas",
                "required: mpi-operator defaults it to 0 and then rejects a Worker with 0 replicas",
            )
        worker = replica_role("Worker", worker_spec, f"{BASE}.Worker", 0)
        if worker.replicas < 1:
            raise DemandError(f"{BASE}.Worker.replicas", "must be at least 1")
        roles.append(worker)
    as_worker = spec.get("runLauncherAsWorker")
    if as_worker is not None and not isinstance(as_worker, bool):
        raise DemandError("spec.runLauncherAsWorker", f"expected true or false, got {as_worker!r}")
    workers = sum(role.replicas for role in roles if role.name == "Worker")
    hints = run_policy_hints(spec.get("runPolicy"), "spec.runPolicy", default_min=workers + 1)
    check_min_member(hints.min_member, workers + 1, hints.min_member_path)
    priority_class = hints.priority_class or _template_priority_class(
        launcher_spec, f"{BASE}.Launcher"
    )
    if priority_class is None and worker_spec:
        priority_class = _template_priority_class(worker_spec, f"{BASE}.Worker")
    return workload(
        obj,
        roles,
        min_member=hints.min_member,
        resizable=False,
        priority_class_name=priority_class,
        queue=hints.queue,
    )


def _template_priority_class(replica_spec: Mapping[str, Any], path: str) -> str | None:
    template = expect_mapping(replica_spec.get("template"), f"{path}.template")
    pod_spec = expect_mapping(template.get("spec"), f"{path}.template.spec")
    where = f"{path}.template.spec.priorityClassName"
    return optional_string(pod_spec.get("priorityClassName"), where)


READERS = {("kubeflow.org/v2beta1", "MPIJob"): read_mpijob}
