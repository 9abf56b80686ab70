"""The reconciler's Prometheus metrics after real passes (``Reconciler.run_once``) over
examples/fleet-snapshot.yaml, compared with what ``fleetgate dry-run -o json`` says of the same
snapshot, policies and time."""

from __future__ import annotations

import copy
import datetime as dt
import json
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from engine import annotations as ann
from fleetgate.cli import main as fleetgate
from reconciler.apply import Outcome
from reconciler.metrics import ReconcilerMetrics
from tests.reconciler.snapshot_world import (
    NOW,
    NOW_TEXT,
    POLICIES,
    SNAPSHOT,
    reconciler,
    snapshot_objects,
)
from tests.waiting import eventually


def dry_run(capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    argv = ["dry-run", "--policies", str(POLICIES), "--snapshot", str(SNAPSHOT)]
    assert fleetgate([*argv, "--now", NOW_TEXT, "-o", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def value(metrics: ReconcilerMetrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def samples(metrics: ReconcilerMetrics, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    """Every sample of ``name``, keyed by its sorted labels, as a scraper parses the text."""
    text = metrics.exposition().decode()
    return {
        tuple(sorted(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == name
    }


def edited(kind: str, name: str, edit: Callable[[dict[str, Any]], None]) -> list[Any]:
    """The example snapshot's objects with ``edit`` applied to the ``kind`` named ``name``."""
    (source, listing), *rest = snapshot_objects()
    listing = copy.deepcopy(listing)
    found = [o for o in listing["items"] if (o["kind"], o["metadata"]["name"]) == (kind, name)]
    assert len(found) == 1, (kind, name)
    edit(found[0])
    return [(source, listing), *rest]


def with_pretrain_priority(class_name: str) -> list[Any]:
    """llama-pretrain (admitted, research-training) at another PriorityClass: at ``standard``
    (500), llama-finetune (1000) preempts it."""

    def edit(job: dict[str, Any]) -> None:
        for role in job["spec"]["pytorchReplicaSpecs"].values():
            role["template"]["spec"]["priorityClassName"] = class_name
        job["spec"]["runPolicy"]["schedulingPolicy"]["priorityClass"] = class_name

    return edited("PyTorchJob", "llama-pretrain", edit)


def test_gauges_say_what_dry_run_says_of_the_same_snapshot(
    capsys: pytest.CaptureFixture[str],
) -> None:
    expected = dry_run(capsys)
    rec, _ = reconciler()
    metrics = ReconcilerMetrics().attach(rec)
    rec.run_once(NOW)

    pending = Counter(
        (d["queue"], d["reason"]) for d in expected["decisions"] if d["action"] == "Pending"
    )
    assert pending  # the example has jobs waiting (WaitingForQuota, BlockedByHead)
    got = samples(metrics, "fleetgate_pending_jobs")
    assert got == {(("queue", q), ("reason", r)): n for (q, r), n in pending.items()}
    for queue in expected["queues"]:
        name = queue["name"]
        assert value(metrics, "fleetgate_admitted_active_jobs", queue=name) == queue["admitted"]
        assert value(metrics, "fleetgate_queue_weighted_share", queue=name) == pytest.approx(
            queue["share"], abs=1e-6
        )
        for metric, field in (
            ("fleetgate_queue_resource_usage", "usage"),
            ("fleetgate_queue_nominal_quota", "guarantee"),
            ("fleetgate_queue_max_quota", "max"),
        ):
            for resource, amount in queue[field].items():
                got_amount = value(metrics, metric, queue=name, resource=resource)
                assert got_amount == pytest.approx(float(amount)), (metric, name, resource)
    assert value(metrics, "fleetgate_reconcile_last_pass_timestamp_seconds") == NOW.timestamp()
    assert value(metrics, "fleetgate_reconcile_pass_duration_seconds_count") == 1


def test_an_admission_is_counted_once_however_many_passes_decide_it_again(
    capsys: pytest.CaptureFixture[str],
) -> None:
    admits = Counter(d["queue"] for d in dry_run(capsys)["decisions"] if d["action"] == "Admit")
    assert admits
    rec, _ = reconciler()
    metrics = ReconcilerMetrics().attach(rec)
    first = rec.run_once(NOW)
    second = rec.run_once(NOW)  # the same snapshot: the same Admit decisions, already written

    assert first.applied > 0 and second.applied == 0 and second.unchanged == first.applied
    for queue, count in admits.items():
        assert value(metrics, "fleetgate_admitted_jobs_total", queue=queue) == count
        assert value(metrics, "fleetgate_admission_wait_time_seconds_count", queue=queue) == count
    assert value(metrics, "fleetgate_reconcile_writes_total", outcome="unchanged") == (
        second.unchanged
    )
    assert value(metrics, "fleetgate_reconcile_pass_duration_seconds_count") == 2


def test_decisions_whose_writes_did_not_go_through_are_not_counted() -> None:
    rec, applier = reconciler()
    applier.answer = Outcome.CONFLICT  # every write met a 409: nothing was admitted
    metrics = ReconcilerMetrics().attach(rec)
    summary = rec.run_once(NOW)

    assert summary.conflicts > 0
    assert samples(metrics, "fleetgate_admitted_jobs_total") == {}
    assert value(metrics, "fleetgate_reconcile_writes_total", outcome="conflicts") == (
        summary.conflicts
    )
    assert samples(metrics, "fleetgate_pending_jobs")  # the gauges describe the pass anyway


def test_the_wait_time_runs_from_queued_at_to_the_pass_that_admits() -> None:
    queued = NOW - dt.timedelta(seconds=600)  # requeued: later than the binding's creation

    def requeued(binding: dict[str, Any]) -> None:
        created = ann.parse_time(binding["metadata"]["creationTimestamp"])
        assert created is not None and created < queued
        binding["metadata"].setdefault("annotations", {})[ann.QUEUED_AT] = ann.format_time(queued)

    rec, _ = reconciler(edited("ResourceBinding", "summarize-backfill-job", requeued))
    metrics = ReconcilerMetrics().attach(rec)
    rec.run_once(NOW)

    labels = {"queue": "prod-inference"}
    assert value(metrics, "fleetgate_admission_wait_time_seconds_sum", **labels) == 600
    bucket = "fleetgate_admission_wait_time_seconds_bucket"
    assert value(metrics, bucket, le="512.0", **labels) == 0
    assert value(metrics, bucket, le="1024.0", **labels) == 1


def test_a_preemption_counts_for_the_preempting_queue_and_evicts_the_victim() -> None:
    rec, _ = reconciler(with_pretrain_priority("standard"))
    metrics = ReconcilerMetrics().attach(rec)
    rec.run_once(NOW)
    victims = [d for d in rec.last_result.decisions if d.action == "Preempt"]
    assert [d.binding for d in victims] == ["research/llama-pretrain-pytorchjob"]

    assert samples(metrics, "fleetgate_preempted_jobs_total") == {
        (("preempting_queue", "research-training"), ("reason", "InQueue")): 1.0
    }
    assert samples(metrics, "fleetgate_evicted_jobs_total") == {
        (("queue", "research-training"), ("reason", "Preempted")): 1.0
    }
    pending = samples(metrics, "fleetgate_pending_jobs")
    assert pending[(("queue", "research-training"), ("reason", "Preempting"))] == 1

    rec.run_once(NOW)  # decided again, already written: not a second preemption
    assert value(
        metrics, "fleetgate_preempted_jobs_total", preempting_queue="research-training",
        reason="InQueue",
    ) == 1  # fmt: skip


def test_gauges_follow_the_latest_pass_only() -> None:
    rec, _ = reconciler(with_pretrain_priority("standard"))
    metrics = ReconcilerMetrics().attach(rec)
    rec.run_once(NOW)
    key = (("queue", "research-training"), ("reason", "Preempting"))
    assert key in samples(metrics, "fleetgate_pending_jobs")

    rec.informers.objects = rec.informers.__class__(snapshot_objects()).objects
    rec.run_once(NOW)  # llama-pretrain back at its own priority: nobody to preempt
    pending = samples(metrics, "fleetgate_pending_jobs")
    assert key not in pending
    assert pending[(("queue", "research-training"), ("reason", "WaitingForQuota"))] == 1


def test_evicted_counts_by_queue_and_reason_in_its_own_registry() -> None:
    one, other = ReconcilerMetrics(), ReconcilerMetrics()
    one.evicted("research-training", "StartupTimeout")
    one.evicted("research-training", "StartupTimeout")
    one.evicted("analytics", "FailedOnMember")
    assert samples(one, "fleetgate_evicted_jobs_total") == {
        (("queue", "research-training"), ("reason", "StartupTimeout")): 2.0,
        (("queue", "analytics"), ("reason", "FailedOnMember")): 1.0,
    }
    assert samples(other, "fleetgate_evicted_jobs_total") == {}


def test_attaching_twice_observes_once_and_a_failing_observer_does_not_stop_the_pass() -> None:
    rec, _ = reconciler()
    metrics = ReconcilerMetrics()
    seen: list[int] = []

    def broken(*_: object) -> None:
        raise RuntimeError("observer bug")

    rec.observers.append(broken)
    metrics.attach(rec).attach(rec)
    rec.observers.append(lambda result, summary: seen.append(summary.decisions))
    summary = rec.run_once(NOW)

    assert seen == [summary.decisions] and summary.decisions > 0
    assert value(metrics, "fleetgate_reconcile_pass_duration_seconds_count") == 1


def test_a_job_the_lifecycle_reclaims_is_evicted_once_under_its_queue() -> None:
    def not_ready(cluster: dict[str, Any]) -> None:  # NotReady for 2 h, past the 5 min grace
        ready = next(c for c in cluster["status"]["conditions"] if c["type"] == "Ready")
        ready.update(
            status="False", lastTransitionTime=ann.format_time(NOW - dt.timedelta(hours=2))
        )

    rec, _ = reconciler(edited("Cluster", "cpu-spot", not_ready))
    metrics = ReconcilerMetrics().attach(rec)
    first = rec.run_once(NOW)
    assert ("analytics/nightly-etl-sparkapplication", "ClusterNotReady") in first.applied_to
    rec.run_once(NOW)  # reviewed again on the same snapshot: already written, not counted

    assert samples(metrics, "fleetgate_evicted_jobs_total") == {
        (("queue", "analytics"), ("reason", "ClusterNotReady")): 1.0
    }


def test_a_job_that_failed_on_its_member_is_evicted_under_its_queue() -> None:
    # catches: a finished (failed) job no longer reads as admitted, so its queue was "" here
    def failed(binding: dict[str, Any]) -> None:
        (item,) = binding["status"]["aggregatedStatus"]
        item["health"] = "Unhealthy"
        item["status"]["conditions"] = [
            {"type": "Running", "status": "False"},
            {"type": "Failed", "status": "True", "message": "NCCL timeout on rank 3"},
        ]

    rec, _ = reconciler(edited("ResourceBinding", "llama-pretrain-pytorchjob", failed))
    metrics = ReconcilerMetrics().attach(rec)
    first = rec.run_once(NOW)
    assert ("research/llama-pretrain-pytorchjob", "FailedOnMember") in first.applied_to
    assert samples(metrics, "fleetgate_evicted_jobs_total") == {
        (("queue", "research-training"), ("reason", "FailedOnMember")): 1.0
    }


def test_the_oldest_pending_job_of_each_queue_and_reason_gives_its_queued_at() -> None:
    rec, _ = reconciler()
    metrics = ReconcilerMetrics().attach(rec)
    rec.run_once(NOW)
    name = "fleetgate_oldest_pending_job_timestamp_seconds"
    training = {"queue": "research-training"}
    queued = {  # as the example's bindings say (fleetgate.io/queued-at)
        "WaitingForQuota": dt.datetime(2025, 3, 10, 9, 10, tzinfo=dt.UTC),  # llama-finetune
        "BlockedByHead": dt.datetime(2025, 3, 10, 9, 20, tzinfo=dt.UTC),  # resnet-ablation
    }
    assert samples(metrics, name) == {
        (("queue", "research-training"), ("reason", reason)): at.timestamp()
        for reason, at in queued.items()
    }

    earlier = NOW - dt.timedelta(hours=7)

    def waited_longer(binding: dict[str, Any]) -> None:
        binding["metadata"]["annotations"][ann.QUEUED_AT] = ann.format_time(earlier)

    rec.informers.objects = rec.informers.__class__(
        edited("ResourceBinding", "resnet-ablation-pytorchjob", waited_longer)
    ).objects
    rec.run_once(NOW)
    assert value(metrics, name, reason="BlockedByHead", **training) == earlier.timestamp()
    assert value(metrics, name, reason="WaitingForQuota", **training) == (
        queued["WaitingForQuota"].timestamp()
    )


def test_a_follower_says_so_and_reports_no_pass_of_its_own() -> None:
    rec, _ = reconciler()
    leads = [True]
    rec.gate = lambda: leads[0]
    metrics = ReconcilerMetrics().attach(rec)
    assert value(metrics, "fleetgate_reconcile_leader") == 1
    rec.run_once(NOW)
    assert samples(metrics, "fleetgate_pending_jobs")
    assert value(metrics, "fleetgate_reconcile_last_pass_timestamp_seconds") == NOW.timestamp()

    leads[0] = False  # lost the Lease: its last pass is stale, not the fleet's state
    assert value(metrics, "fleetgate_reconcile_leader") == 0
    for gauge in (
        "fleetgate_pending_jobs",
        "fleetgate_oldest_pending_job_timestamp_seconds",
        "fleetgate_queue_resource_usage",
        "fleetgate_reconcile_last_pass_timestamp_seconds",
    ):
        assert samples(metrics, gauge) == {}, gauge
    assert samples(metrics, "fleetgate_admitted_jobs_total")  # counters stay: they only grow

    leads[0] = True
    assert value(metrics, "fleetgate_reconcile_leader") == 1
    assert samples(metrics, "fleetgate_pending_jobs")


def test_leader_election_off_counts_as_leading_and_before_attach_nothing_is_said() -> None:
    metrics = ReconcilerMetrics()
    assert samples(metrics, "fleetgate_reconcile_leader") == {}
    assert samples(metrics, "fleetgate_reconcile_pass_failures_total") == {}
    rec, _ = reconciler()
    assert rec.gate is None
    metrics.attach(rec)
    assert value(metrics, "fleetgate_reconcile_leader") == 1
    assert value(metrics, "fleetgate_reconcile_pass_failures_total") == 0


class BrokenPolicies:
    """A policy source whose every read fails: each pass raises before it writes."""

    @property
    def current(self) -> Any:
        raise RuntimeError("policy source broken")


def test_a_pass_that_fails_is_counted_and_retried() -> None:
    rec, _ = reconciler()
    rec.policies = BrokenPolicies()
    metrics = ReconcilerMetrics().attach(rec)
    failed = "fleetgate_reconcile_pass_failures_total"
    rec.start()
    try:
        eventually(lambda: (value(metrics, failed) or 0) >= 1)
        rec.wake()  # as an informer event does: the next pass fails too
        eventually(lambda: (value(metrics, failed) or 0) >= 2)
    finally:
        rec.stop()
    assert rec.passes == 0
    assert value(metrics, failed) == rec.failed_passes
