"""The simulator's record of one trace job while it runs, and the scripted faults."""

from __future__ import annotations

import csv
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from engine import annotations as ann
from engine.errors import FleetgateError
from engine.fleet.model import BindingView
from engine.members import parse_duration
from engine.workloads.model import Workload
from simulate import objects
from simulate.results import GPU, JobRecord
from simulate.trace import TraceJob

FAULT_ACTIONS = ("cluster-down", "cluster-up", "fail-job")


class FaultError(FleetgateError):
    """A fault script that cannot be read."""


class Fault(NamedTuple):
    """At ``at`` seconds: ``cluster-down``/``cluster-up`` a cluster, or ``fail-job`` a job (by
    its trace name) on every cluster it runs on."""

    at: float
    action: str
    target: str
    message: str = ""


def read_faults(path: Path | str) -> tuple[Fault, ...]:
    """A CSV with columns ``at,action,target[,message]``; ``at`` in seconds or as a duration
    (``90m``, ``2h``). Errors name FILE:LINE."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise FaultError(f"{path}: {err.strerror or err}") from None
    reader = csv.DictReader(line for line in text.splitlines() if not line.startswith("#"))
    faults, problems = [], []
    for row in reader:
        place = f"{path}:{reader.line_num}"
        when_text = (row.get("at") or "").strip()
        try:
            when = float(when_text)
        except ValueError:
            span = parse_duration(when_text)
            when = span.total_seconds() if span is not None else -1.0
        action = (row.get("action") or "").strip()
        target = (row.get("target") or "").strip()
        if when < 0:
            problems.append(f"{place}: at {when_text!r}: not seconds or a duration like 90m")
        elif action not in FAULT_ACTIONS:
            problems.append(f"{place}: action {action!r}: expected {', '.join(FAULT_ACTIONS)}")
        elif not target:
            problems.append(f"{place}: target: required")
        else:
            faults.append(Fault(when, action, target, (row.get("message") or "").strip()))
    if problems:
        raise FaultError("\n".join(problems))
    return tuple(sorted(faults))


@dataclass(frozen=True, slots=True)
class Options:
    until: float | None = None  # seconds; None: until every job ended or nothing can change
    seed: int = 1
    interval: float = 10.0  # the least simulated time between two ticks (cycles)
    label: str = "head"
    fail_rate: float = 0.0  # chance that a started job fails part-way (seeded)
    window_s: float = 3600.0  # fairness window
    samples: int = 400  # about this many Series samples over the run
    faults: tuple[Fault, ...] = ()


def live_jobs(jobs: Sequence[TraceJob]) -> tuple[list[LiveJob], dict[int, list[LiveJob]]]:
    """A LiveJob per trace job, and each one's predecessors (by ``id``); ``dependents`` counts
    the jobs that name each one in ``after``."""
    found: list[LiveJob] = []
    by_name: dict[str, LiveJob] = {}
    for tj in jobs:
        work = objects.workload(tj)
        job = LiveJob(
            tj, work, objects.pending_binding(tj, work), demand_of(tj), shape_of(tj),
            tj.queue, tj.namespace,
        )  # fmt: skip
        found.append(job)
        by_name[f"{tj.namespace}/{tj.name}"] = job
    predecessors: dict[int, list[LiveJob]] = {}
    for job in found:
        before = [by_name[a.rpartition(":")[2]] for a in job.trace.after]
        predecessors[id(job)] = before
        for p in before:
            p.dependents += 1
    return found, predecessors


@dataclass(slots=True)
class Part:
    """The job's Work on one member cluster."""

    key: str  # the member's job key
    cluster: str
    usage: tuple[float, ...]  # what its pods request: GPUs, cores, bytes
    started_at: float | None = None
    done: bool = False

    @property
    def gpus(self) -> float:
        return self.usage[0]


@dataclass(slots=True)
class LiveJob:
    trace: TraceJob
    work: Workload
    binding: BindingView
    demand: tuple[float, float, float]  # GPUs, cores, bytes
    shape: tuple[tuple[int, float, float, float], ...]  # per role: pods, gpu, cpu, memory
    queue: str  # as the policy maps it (the trace's until a cycle says)
    tenant: str
    state: str = "future"  # future | pending | admitted | succeeded | gave_up
    parts: dict[str, Part] = field(default_factory=dict)
    admitted_at: float | None = None
    started_at: float | None = None  # every part of the last admission running (None: not yet)
    admissions: int = 0
    finished_at: float | None = None
    failures: int = 0
    preemptions: int = 0
    preempted_gpu_s: float = 0.0  # GPU-seconds lost to preemptions
    held_s: float = 0.0  # seconds earlier admissions ran (before a requeue): not waiting
    dependents: int = 0  # trace jobs that name it in ``after`` and have not ended
    last_cluster: str | None = None
    in_snapshot: bool = False
    waiting: bool = False  # counted in Metrics.wait
    reason: str = ""  # of the last decision while it waited

    @property
    def ref(self) -> str:
        return f"{self.binding.namespace}/{self.binding.name}"

    @property
    def gpus(self) -> float:
        return self.demand[0]

    @property
    def nominated(self) -> str:
        """The cluster a preemption it made nominated it to (``""``: none)."""
        return self.binding.annotations.get(ann.NOMINATED_CLUSTER, "")

    def running_on(self, cluster: str) -> bool:
        """Whether its part on ``cluster`` started (what the member's status would say)."""
        part = self.parts.get(cluster)
        return part is not None and part.started_at is not None

    def started(self) -> float | None:
        """When every part of its last admission ran; None while it waits again after a
        requeue. The members' clock has microseconds: never before the admission."""
        if self.state == "pending" or self.started_at is None or self.admitted_at is None:
            return None
        return max(self.started_at, self.admitted_at)

    def record(self) -> JobRecord:
        state = {"admitted": "running", "future": "pending"}.get(self.state, self.state)
        return JobRecord(
            name=self.trace.name,
            queue=self.queue,
            tenant=self.tenant,
            kind=self.trace.kind,
            submitted=self.trace.submit,
            admitted=self.admitted_at,
            finished=self.finished_at,
            state=state,
            cluster=self.last_cluster,
            gpus=self.gpus,
            attempts=self.failures + self.preemptions,
            preemptions=self.preemptions,
            stage=self.trace.stage or None,
            reason=str(self.reason) if self.state == "pending" and self.reason else None,
            started=self.started(),
            preempted_gpu_s=self.preempted_gpu_s,
            held=self.held_s,
        )


def demand_of(job: TraceJob) -> tuple[float, float, float]:
    gpu = cpu = memory = 0.0
    for role in job.roles:
        gpu += float(role.requests.get_amount(GPU)) * role.replicas
        cpu += float(role.requests.get_amount("cpu")) * role.replicas
        memory += float(role.requests.get_amount("memory")) * role.replicas
    return gpu, cpu, memory


def shape_of(job: TraceJob) -> tuple[tuple[int, float, float, float], ...]:
    return tuple(
        (
            r.replicas,
            float(r.requests.get_amount(GPU)),
            float(r.requests.get_amount("cpu")),
            float(r.requests.get_amount("memory")),
        )
        for r in job.roles
    )
