"""Simulated member clusters: one model for the sandbox and the simulator.

Pure: no I/O besides ``load_fleet`` reading its file, no threads, no clock (every call that
moves time takes ``now``, a timezone-aware ``datetime``). Deterministic: nodes in fleet-file
order, jobs by submission, pods by group and index.

Fleet files (``engine.members.fleetfile``)::

    fleet = load_fleet("examples/fleet.yaml")   # FleetSpec; FleetFileError lists every problem
    fleet.clusters, fleet.job_duration, fleet.status_period

Members (``engine.members.model``)::

    members = Fleet(fleet, now)                  # or MemberCluster(cluster_spec, now)
    job = JobSpec.from_template(key, template, duration)   # engine.workloads reads its demand
    job = JobSpec(key, (PodGroup("worker", 4, Resources({...})),), duration, gang=True)
    member = members["gpu-east"]
    member.submit(job, now)                      # pods Pending; MemberError if the key exists
    events = members.step(now)                   # or member.step(now): list[MemberEvent]
    member.job_state(key)                        # JobState | None: phase, pods bound/total, …
    member.fail(key, now, message)               # fault: Failed, pods freed; MemberEvent | None
    member.remove(key)                           # Work deleted: pods freed, job forgotten
    member.set_ready(False, now)                 # the Ready condition; jobs keep running
    member.next_finish() / members.next_finish() # next job end, for discrete-event stepping
    member.allocated(), member.allocating()      # kept up to date as pods bind and free
    member.allocatable_modelings(models)         # node count per grade; ``member.changes``
                                                 # counts the moves of all three

``step(now)``: 1. running jobs whose ``started_at + duration <= now`` succeed (finished at
exactly that time) and free their pods; 2. pending pods are bound to the fullest node that
fits, oldest job first (a gang's first ``min_member`` pods all together or none, other pods one
by one; a job that did not fit is retried only after some capacity was freed); 3. jobs with
``min_member`` pods bound start at ``now``. Pods that do not fit stay Pending, so
fragmentation is real.

Karmada's view (``engine.members.status``)::

    cluster_status(member, now, previous_status)  # status: resourceSummary, nodeSummary, …
    cluster_object(member, now, previous_cluster)  # the whole cluster.karmada.io Cluster
"""

from engine.members.fleet import Fleet
from engine.members.fleetfile import FleetFileError, load_fleet, parse_duration, parse_fleet
from engine.members.jobs import (
    EventType,
    JobSpec,
    JobState,
    MemberError,
    MemberEvent,
    Phase,
    PodGroup,
)
from engine.members.model import MemberCluster, NodeView
from engine.members.spec import ClusterSpec, FleetSpec, NodeGroup
from engine.members.status import cluster_object, cluster_status

__all__ = [
    "ClusterSpec",
    "EventType",
    "Fleet",
    "FleetFileError",
    "FleetSpec",
    "JobSpec",
    "JobState",
    "MemberCluster",
    "MemberError",
    "MemberEvent",
    "NodeGroup",
    "NodeView",
    "Phase",
    "PodGroup",
    "cluster_object",
    "cluster_status",
    "load_fleet",
    "parse_duration",
    "parse_fleet",
]
