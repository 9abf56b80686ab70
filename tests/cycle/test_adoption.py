"""Bindings that are already placed are adopted: they hold quota and capacity, are never
admitted again and can be preempted, whatever annotations they carry (issue: brownfield fleets,
annotations lost to a ``kubectl apply`` or a restore).

The fleets here are real Karmada objects read by the snapshot builder, as a live fleet is.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest

from engine.cycle import run_cycle
from engine.cycle.jobs.cache import JobCache
from engine.cycle.jobs.model import AdmittedJob
from engine.cycle.jobs.reading import classify
from engine.fleet.snapshot import build_snapshot
from engine.policy.policyset import PolicySet
from tests.cycle.test_scenarios import decision_for, load_policies
from tests.fleet import builders as k

NOW = dt.datetime(2025, 3, 10, 10, 0, tzinfo=dt.UTC)
QUEUES = [{"kind": "Queue", "metadata": {"name": "research"}, "spec": {}}]


def running_elsewhere_placed(name: str, *, applied: bool, scheduled: str | None) -> k.Obj:
    """A binding Karmada placed on gpu-east without fleetgate: spec.clusters set, no
    ``fleetgate.io/admitted-at``, labelled managed (the webhook saw it at an UPDATE)."""
    template = k.pytorch_job(name, workers=1, gpus=8, queue="research")
    binding = k.binding_for(template, clusters=["gpu-east"])
    status: dict[str, Any] = {}
    if applied:
        status = {
            "schedulerObservedGeneration": 2,
            "conditions": [
                {
                    "type": "Scheduled",
                    "status": "True",
                    "reason": "Success",
                    "lastTransitionTime": scheduled,
                },
                {
                    "type": "FullyApplied",
                    "status": "True",
                    "reason": "FullyAppliedSuccess",
                    "lastTransitionTime": scheduled,
                },
            ],
            "aggregatedStatus": [{"clusterName": "gpu-east", "applied": True, "health": "Healthy"}],
        }
    elif scheduled is not None:
        status = {"lastScheduledTime": scheduled}
    binding["status"] = status
    return binding


def pending(name: str) -> list[k.Obj]:
    template = k.pytorch_job(name, workers=1, gpus=8, queue="research")
    binding = k.binding_for(template)
    binding["metadata"]["annotations"] = {"fleetgate.io/queued-at": "2025-03-10T09:30:00Z"}
    return [template, binding]


def fleet(*objects: k.Obj, allocated_gpus: int) -> list[tuple[str, k.Obj]]:
    used = {"nvidia.com/gpu": str(allocated_gpus), "cpu": str(allocated_gpus), "pods": "1"}
    east = k.cluster("gpu-east", gpus=16, used=used if allocated_gpus else None)
    return [("fleet.yaml", obj) for obj in (east, *objects)]


@pytest.fixture
def policies(tmp_path: Path) -> PolicySet:
    return load_policies(QUEUES, tmp_path)


def test_a_running_binding_without_admission_annotations_is_counted_once(policies):
    """gpu-east has 16 GPUs and its status counts the running job's 8 as allocated. The new
    8-GPU job fits only if the running one is counted once (not re-admitted on top)."""
    old = running_elsewhere_placed("old", applied=True, scheduled="2025-03-01T00:00:00Z")
    objects = fleet(
        k.pytorch_job("old", workers=1, gpus=8, queue="research"),
        old,
        *pending("fresh"),
        allocated_gpus=8,
    )
    result = run_cycle(build_snapshot(objects), policies, NOW)
    assert decision_for(result, "old") is None  # never admitted again
    fresh = decision_for(result, "fresh")
    assert fresh is not None and fresh.action == "Admit", fresh
    assert [c.name for c in fresh.clusters] == ["gpu-east"]
    research = next(q for q in result.queues if q.name == "research")
    assert research.admitted == 2  # the adopted job holds its quota beside the new one


def test_an_in_flight_adopted_binding_reserves_its_room(policies):
    """Placed two minutes ago, not applied yet: gpu-east's status still shows 16 GPUs free,
    so the adopted job's 8 are reserved: one new job fits, the second waits."""
    old = running_elsewhere_placed("old", applied=False, scheduled="2025-03-10T09:58:00Z")
    objects = fleet(
        k.pytorch_job("old", workers=1, gpus=8, queue="research"),
        old,
        *pending("first"),
        *pending("second"),
        allocated_gpus=0,
    )
    result = run_cycle(build_snapshot(objects), policies, NOW)
    assert decision_for(result, "old") is None
    actions = {name: decision_for(result, name).action for name in ("first", "second")}
    assert sorted(actions.values()) == ["Admit", "Pending"]


def adopted_job(snapshot, policies, now, cache) -> AdmittedJob:
    admitted = classify(snapshot, policies, cache, now).admitted
    (job,) = admitted
    return job


def test_an_adopted_binding_is_in_flight_since_it_was_scheduled(policies):
    old = running_elsewhere_placed("old", applied=False, scheduled="2025-03-10T09:58:00Z")
    template = k.pytorch_job("old", workers=1, gpus=8, queue="research")
    snapshot = build_snapshot(fleet(template, old, allocated_gpus=0))
    timeout = dt.timedelta(seconds=policies.scheduling.requeue.startup_timeout)
    scheduled = dt.datetime(2025, 3, 10, 9, 58, tzinfo=dt.UTC)
    job = adopted_job(snapshot, policies, NOW, JobCache())
    assert job.admitted_at == scheduled and job.in_flight == {"gpu-east"}
    late = adopted_job(snapshot, policies, scheduled + timeout, JobCache())
    assert late.in_flight == frozenset()  # past the startup timeout: no longer reserved


def test_an_adopted_binding_that_says_nothing_of_when_is_in_flight_since_first_seen(policies):
    old = running_elsewhere_placed("old", applied=False, scheduled=None)
    template = k.pytorch_job("old", workers=1, gpus=8, queue="research")
    snapshot = build_snapshot(fleet(template, old, allocated_gpus=0))
    timeout = dt.timedelta(seconds=policies.scheduling.requeue.startup_timeout)
    cache = JobCache()
    first = adopted_job(snapshot, policies, NOW, cache)
    assert first.admitted_at == NOW and first.in_flight == {"gpu-east"}
    later = adopted_job(snapshot, policies, NOW + timeout / 2, cache)
    assert later.admitted_at == NOW and later.in_flight == {"gpu-east"}
    expired = adopted_job(snapshot, policies, NOW + timeout, cache)
    assert expired.in_flight == frozenset()


def test_a_binding_waiting_for_readmission_is_pending_even_though_placed(policies):
    old = running_elsewhere_placed("old", applied=True, scheduled="2025-03-01T00:00:00Z")
    old["metadata"]["annotations"] = {"fleetgate.io/readmit": "2025-03-10T09:59:00Z"}
    template = k.pytorch_job("old", workers=1, gpus=8, queue="research")
    snapshot = build_snapshot(fleet(template, old, allocated_gpus=8))
    waiting, admitted, *_ = classify(snapshot, policies, JobCache(), NOW)
    assert [j.ref for j in waiting] == ["research/old-pytorchjob"] and admitted == []
