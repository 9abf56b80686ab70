"""The member clusters, as the sandbox's Karmada controllers drive them.

:class:`Member` is the small interface the controllers use; :class:`EngineMember` provides it
over the shared member model (``engine.members.MemberCluster``: nodes, pods bound first-fit,
gangs all or nothing, jobs that run for a duration), and ``engine.members.status`` gives the
Cluster object and its status as Karmada's cluster status controller reports them.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from engine.members import JobSpec, JobState, MemberCluster, cluster_object, cluster_status
from engine.workloads.model import Workload

# what "runs until removed" means for a kind that serves rather than finishes
FOREVER = timedelta(days=36500)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class Member(Protocol):
    """One member cluster, as the cluster, execution and status controllers drive it."""

    @property
    def name(self) -> str: ...

    def cluster(self) -> dict[str, Any]:
        """The Cluster object to create (its status is set apart, by ``cluster_status``)."""
        ...

    def cluster_status(self, now: datetime, previous: dict[str, Any] | None) -> dict[str, Any]:
        """``status`` as Karmada's cluster status controller collects it at ``now``."""
        ...

    def serves(self, api_version: str, kind: str) -> bool: ...

    def submit(
        self, job: str, workload: Workload, duration: timedelta | None, now: datetime
    ) -> None:
        """Start ``job`` unless the member has it; ``duration`` None: until removed."""
        ...

    def remove(self, job: str) -> None: ...

    def fail(self, job: str, now: datetime, message: str) -> None:
        """Fault: the job fails now (a no-op once it has finished)."""
        ...

    def set_ready(self, ready: bool, now: datetime) -> None:
        """Whether the member reports Ready (its jobs keep running either way)."""
        ...

    def job_state(self, job: str) -> JobState | None: ...

    def step(self, now: datetime) -> list[str]:
        """Advance to ``now``; the jobs that changed (started, finished)."""
        ...


class EngineMember:
    """:class:`Member` over an ``engine.members.MemberCluster`` (``model``)."""

    def __init__(self, model: MemberCluster) -> None:
        self.model = model

    @property
    def name(self) -> str:
        return self.model.name

    def cluster(self) -> dict[str, Any]:
        obj = cluster_object(self.model, _EPOCH)
        obj.pop("status", None)
        return obj

    def cluster_status(self, now: datetime, previous: dict[str, Any] | None) -> dict[str, Any]:
        return cluster_status(self.model, now, previous)

    def serves(self, api_version: str, kind: str) -> bool:
        return (api_version, kind) in self.model.spec.served

    def submit(
        self, job: str, workload: Workload, duration: timedelta | None, now: datetime
    ) -> None:
        if self.model.job_state(job) is None:
            spec = JobSpec.from_workload(job, workload, duration or FOREVER)
            self.model.submit(spec, now)

    def remove(self, job: str) -> None:
        self.model.remove(job)

    def fail(self, job: str, now: datetime, message: str) -> None:
        if self.model.job_state(job) is not None:
            self.model.fail(job, now, message)

    def set_ready(self, ready: bool, now: datetime) -> None:
        self.model.set_ready(ready, now)

    def job_state(self, job: str) -> JobState | None:
        return self.model.job_state(job)

    def step(self, now: datetime) -> list[str]:
        return [event.job for event in self.model.step(now)]
