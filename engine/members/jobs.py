"""The values a member cluster takes and gives about jobs: what is submitted, what it reports."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from engine.errors import FleetgateError
from engine.resources import PODS, Resources
from engine.workloads.model import Workload
from engine.workloads.registry import read_workload


class MemberError(FleetgateError):
    """A call the member model cannot honour: an unknown job, a job submitted twice."""


class Phase(StrEnum):
    PENDING = "Pending"
    """Submitted; not every pod the job needs to start is bound yet."""
    RUNNING = "Running"
    """Started: its pods (at least ``min_member``) are bound; finishes at start + duration."""
    SUCCEEDED = "Succeeded"
    """Ran for its whole duration; its pods are freed."""
    FAILED = "Failed"
    """Failed by ``MemberCluster.fail`` (fault injection); its pods are freed."""


class EventType(StrEnum):
    STARTED = "Started"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"


@dataclass(frozen=True, slots=True)
class PodGroup:
    """``replicas`` identical pods, each requesting ``requests`` (a role of the job)."""

    name: str
    replicas: int
    requests: Resources


@dataclass(frozen=True, slots=True)
class JobSpec:
    """A job as a member runs it.

    ``gang``: the first ``min_member`` pods bind together or not at all (Volcano / kube-batch
    PodGroup semantics); without it every pod binds on its own. Either way the job starts once
    ``min_member`` pods are bound, and runs for ``duration``.
    """

    key: str
    groups: tuple[PodGroup, ...]
    duration: dt.timedelta
    gang: bool = True
    min_member: int = 0  # 0: every pod

    @property
    def pods(self) -> int:
        return sum(g.replicas for g in self.groups)

    @property
    def needed(self) -> int:
        """Pods that must be bound before the job starts."""
        return min(self.min_member, self.pods) if self.min_member > 0 else self.pods

    @staticmethod
    def from_workload(key: str, workload: Workload, duration: dt.timedelta) -> JobSpec:
        """A template's demand as a job: one group per role; gang unless the kind is resizable
        (batch Job, Deployment…, whose pods the scheduler binds one by one)."""
        groups = tuple(PodGroup(r.name, r.replicas, r.requests) for r in workload.roles)
        return JobSpec(key, groups, duration, not workload.resizable, workload.min_member)

    @staticmethod
    def from_template(key: str, obj: Mapping[str, Any], duration: dt.timedelta) -> JobSpec:
        """A job template (PyTorchJob, Volcano Job, …) as a job; ``engine.workloads`` reads
        its demand. Raises MemberError for a kind fleetgate does not read, DemandError for a
        malformed template."""
        workload = read_workload(obj)
        if workload is None:
            raise MemberError(f"{obj.get('apiVersion')} {obj.get('kind')} is not a job kind")
        return JobSpec.from_workload(key, workload, duration)


@dataclass(frozen=True, slots=True)
class Pod:
    """One pod of a job: its group, its index in the group, its request (with ``pods: 1``)."""

    job: str
    group: str
    index: int
    requests: Resources

    @property
    def name(self) -> str:
        return f"{self.job}-{self.group}-{self.index}"


def pods_of(spec: JobSpec) -> tuple[Pod, ...]:
    """The job's pods in binding order: group by group, index by index."""
    pods: list[Pod] = []
    for group in spec.groups:
        requests = group.requests + {PODS: 1}  # one value for the group's identical pods
        pods.extend(Pod(spec.key, group.name, i, requests) for i in range(group.replicas))
    return tuple(pods)


@dataclass(frozen=True, slots=True)
class JobState:
    """What a member reports about one job."""

    key: str
    phase: Phase
    pods_bound: int
    pods_total: int
    submitted_at: dt.datetime
    started_at: dt.datetime | None = None
    finished_at: dt.datetime | None = None
    reason: str = ""
    message: str = ""


@dataclass(frozen=True, slots=True)
class MemberEvent:
    """A job's transition on a member, as ``step``, ``fail`` return it."""

    type: EventType
    cluster: str
    job: str
    at: dt.datetime
    reason: str = ""
    message: str = ""
