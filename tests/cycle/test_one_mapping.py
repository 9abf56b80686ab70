"""One mapping: the webhook and ``fleetgate inspect`` map a template with the cycle's own
evaluation (``map_template``), so a job is never put in one queue at admission and another in
the cycle."""

from __future__ import annotations

import datetime as dt

from engine.cycle import JobCache, map_template
from engine.cycle.jobs.reading import classify
from engine.fleet.files import read_objects
from engine.fleet.snapshot import build_snapshot
from engine.policy.policyset import load_policy_set
from tests.conftest import REPO

NOW = dt.datetime(2025, 3, 10, 10, tzinfo=dt.UTC)


def test_a_template_maps_as_the_cycle_maps_its_job():
    policies = load_policy_set([REPO / "policies"])
    objects, problems = read_objects([REPO / "examples" / "fleet-snapshot.yaml"])
    assert not problems
    snapshot = build_snapshot(objects)
    read = classify(snapshot, policies, JobCache(), NOW)
    jobs = [*read.pending, *read.admitted]
    assert len(jobs) >= 8
    queues = set()
    for job in jobs:
        workload = snapshot.workload_for(job.binding)
        assert workload is not None
        value = JobCache().priority_value(snapshot, workload.priority_class_name)
        assert value is not None
        assert map_template(policies, workload, value, NOW) == job.mapped
        queues.add(job.mapped.queue)
    assert len(queues) >= 3  # the sample exercises several queue rules
