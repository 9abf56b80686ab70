# ruff: noqa: F811  (the fixtures imported below are used by name as test parameters)
"""Jobs that must wait, and the reconciler under change and faults, end to end: StrictFIFO
blocking, a gang that waits whole rather than split, a policy edit hot-reloaded mid-run, 409
conflicts and dropped watches during a run of many jobs, and the room of jobs that just started
while the Clusters' status lags. The harness of test_scheduling_e2e.py: the HTTPS sandbox,
fleetgate's real webhook, Karmada's controllers and the reconciler on a shared fake clock, the
real ``kubernetes`` client."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import pytest

from engine import annotations as ann
from engine.fleet.detector import binding_name
from engine.policy.reload import PolicyHolder, PolicyWatcher
from sandbox.faults import Faults
from sandbox.karmada.names import DURATION_ANNOTATION, work_name
from sandbox.server import Sandbox
from tests.reconciler.test_requeue_e2e import clock, core, custom, faults, karmada  # noqa: F401
from tests.reconciler.test_scheduling_e2e import (  # noqa: F401
    GPU_CLUSTERS,
    HIGH,
    NS,
    PP,
    B,
    admitted_by_queue,
    bound,
    bounded,
    conditions,
    finish_round,
    gpu_job,
    propagation,
    reconciler_over,
    running,
    step,
    works_on,
    write_policies,
)

# -- 3. StrictFIFO blocks, BestEffortFIFO lets a later job pass ---------------------------------


def fill_all_but_a_node_per_cluster(karmada, rec, custom, clock, long: str = "1h") -> list[str]:
    """Two 24-GPU gangs (3 nodes each) in queue HIGH, one per GPU cluster: one node of 8 GPUs
    left free in each. The first runs 5m, the second ``long``. Their clusters, in that order."""
    gpu_job(custom, "filler-short", HIGH, pods=3)
    gpu_job(custom, "filler-long", HIGH, pods=3, runs=long)
    assert admitted_by_queue(step(karmada, rec, custom)) == {"filler": 2}
    running(karmada, rec, custom, clock)
    where = [
        bound(custom, NS, binding_name("PyTorchJob", f"filler-{n}"))["spec"]["clusters"][0]["name"]
        for n in ("short", "long")
    ]
    assert sorted(where) == sorted(GPU_CLUSTERS), where  # BinPack: 8 GPUs left beside the first
    return where


@pytest.mark.parametrize("strategy", ["StrictFIFO", "BestEffortFIFO"])
def test_a_strict_fifo_head_that_does_not_fit_blocks_a_smaller_later_job(
    tmp_path,
    custom,
    karmada,
    reconciler_over,
    clock,
    strategy,
):
    # catches: StrictFIFO letting a later job pass its head (StrictFIFO case), or
    # BestEffortFIFO holding it behind (BestEffortFIFO case), the reason missing from the
    # binding, or the blocked queue never resuming once room frees
    policies = write_policies(tmp_path / "policies", {HIGH: {}, B: {"strategy": strategy}})
    rec = reconciler_over(policies)
    fill_all_but_a_node_per_cluster(karmada, rec, custom, clock)

    head = gpu_job(custom, "head", B, pods=2, priority_class="research-high")  # 16 GPUs
    small = gpu_job(custom, "small", B, pods=1)  # 8 GPUs: a free node would hold it
    step(karmada, rec, custom)
    notes = bound(custom, NS, head)["metadata"]["annotations"]
    assert notes[ann.PENDING].startswith("NoClusterFits: "), notes[ann.PENDING]
    later = bound(custom, NS, small)
    if strategy == "StrictFIFO":
        assert not later["spec"].get("clusters")
        assert later["metadata"]["annotations"][ann.PENDING].startswith("BlockedByHead: ")
        assert rec.last_result.decision(f"{NS}/{small}").position == 2
        step(karmada, rec, custom)  # still blocked on the next pass: nothing changed
        assert not bound(custom, NS, small)["spec"].get("clusters")
        # the short filler ends: its 3 nodes hold the head and the small job beside it; the
        # queue resumes, both admitted in one pass
        finish_round(karmada, clock)
        summary = step(karmada, rec, custom)
        admitted = sorted(r for r, w in summary.applied_to if w == "Admit")
        assert admitted == [f"{NS}/{head}", f"{NS}/{small}"], summary.applied_to
    else:
        assert len(later["spec"]["clusters"]) == 1
        assert ann.PENDING not in later["metadata"]["annotations"]
    assert bound(custom, NS, small)["spec"]["clusters"]


# -- 4. a gang waits whole rather than split ---------------------------------------------------


def batch_gang(custom, name: str, queue: str, pods: int, gpus: int = 8) -> str:
    """A batch/v1 Job of ``pods`` pods of ``gpus`` GPUs (resizable: Karmada could divide it)
    under a PropagationPolicy that lets it go to either GPU cluster, divided."""
    policy = propagation("gangs", NS, "batch/v1", "Job")
    del policy["spec"]["placement"]["spreadConstraints"]
    policy["spec"]["placement"]["replicaScheduling"] = {
        "replicaSchedulingType": "Divided",
        "replicaDivisionPreference": "Weighted",
    }
    custom.create_namespaced_custom_object(*PP, NS, "propagationpolicies", policy)
    container = {
        "name": "c",
        "image": "x",
        "resources": {
            "requests": {"cpu": "8", "memory": "64Gi"},
            "limits": {"memory": "64Gi", "nvidia.com/gpu": str(gpus)},
        },
    }
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": NS,
            "labels": {"fleetgate.io/queue": queue},
            "annotations": {DURATION_ANNOTATION: "5m"},
        },
        "spec": {
            "parallelism": pods,
            "completions": pods,
            "template": {"spec": {"restartPolicy": "Never", "containers": [container]}},
        },
    }
    custom.create_namespaced_custom_object("batch", "v1", NS, "jobs", job)
    return binding_name("Job", name)


def test_a_gang_larger_than_any_clusters_free_room_waits_whole_and_is_admitted_whole(
    tmp_path,
    custom,
    karmada,
    reconciler_over,
    clock,
):
    # catches: a gang split across clusters (allowSplit ignored, or a divided PropagationPolicy
    # taken as leave to split), partly bound while it waits, or never admitted once room frees
    policies = write_policies(tmp_path / "policies", {HIGH: {}, B: {}})
    rec = reconciler_over(policies)
    short, _ = fill_all_but_a_node_per_cluster(karmada, rec, custom, clock)

    gang = batch_gang(custom, "gang", B, pods=2)  # 16 GPUs: 8 are free on each cluster
    for _ in range(2):
        step(karmada, rec, custom)
        waiting = bound(custom, NS, gang)
        assert not waiting["spec"].get("clusters")  # never partly bound
        assert waiting["spec"]["suspension"]["scheduling"] is True
        assert waiting["metadata"]["annotations"][ann.PENDING].startswith("NoClusterFits: ")
    decided = rec.last_result.decision(f"{NS}/{gang}")
    assert decided is not None and decided.action == "Pending" and not decided.clusters
    assert all(work_name("Job", "gang", NS) not in works_on(custom, c) for c in GPU_CLUSTERS)

    finish_round(karmada, clock)  # the short filler ends: its cluster has room for all of it
    step(karmada, rec, custom)
    assert bound(custom, NS, gang)["spec"]["clusters"] == [{"name": short, "replicas": 2}]
    running(karmada, rec, custom, clock)
    assert work_name("Job", "gang", NS) in works_on(custom, short)


# -- 5. a policy edit hot-reloaded mid-run ------------------------------------------------------


def test_a_queue_max_edited_on_disk_is_reloaded_and_the_waiting_job_admitted(
    tmp_path,
    custom,
    karmada,
    reconciler_over,
    clock,
):
    # catches: an edit never picked up (no watch, or the reconciler keeping the set it started
    # with), the binding not saying which policy version decided it, or the old max still
    # applied after the reload
    directory = write_policies(tmp_path / "policies", {B: {"max": {"nvidia.com/gpu": 16}}})
    holder = PolicyHolder.for_paths([directory])
    assert holder.reload(), holder.status.errors
    before = holder.current.version
    rec = reconciler_over(holder)
    jobs = [gpu_job(custom, f"job-{i}", B) for i in range(3)]  # 8 GPUs each
    summary = step(karmada, rec, custom)
    assert summary.policy_version == before
    admitted = [r.rpartition("/")[2] for r, w in summary.applied_to if w == "Admit"]
    (third,) = set(jobs) - set(admitted)
    notes = bound(custom, NS, third)["metadata"]["annotations"]
    assert notes[ann.PENDING].startswith("WaitingForQuota: ")
    assert notes[ann.POLICY_VERSION] == before

    with PolicyWatcher(holder, [directory], debounce_ms=50, step_ms=20, settle=0.1):
        queues = directory / "queues.yaml"
        queues.write_text(queues.read_text().replace("nvidia.com/gpu: 16", "nvidia.com/gpu: 24"))
        deadline = time.monotonic() + 20
        while holder.current.version == before:
            assert time.monotonic() < deadline, f"the edit was not reloaded: {holder.status}"
            time.sleep(0.05)
    after = holder.current.version
    assert holder.status.healthy

    summary = step(karmada, rec, custom)
    assert summary.policy_version == after
    assert [r for r, w in summary.applied_to if w == "Admit"] == [f"{NS}/{third}"]
    notes = bound(custom, NS, third)["metadata"]["annotations"]
    assert notes[ann.POLICY_VERSION] == after != before
    assert ann.PENDING not in notes


# -- 6. 409 conflicts and dropped watches ------------------------------------------------------

JOBS = 24  # of 4 GPUs: 16 fit the fleet at once, the rest once the first ones end


def admissions(sandbox: Sandbox) -> Counter[str]:
    """Each binding's count of changes of ``spec.clusters`` from unset to set (and, keyed
    ``-name``, from set to unset), as the store commits them."""
    seen: Counter[str] = Counter()
    placed: dict[str, bool] = {}

    def record(resource: str, event: Any) -> None:
        if resource != "resourcebindings.work.karmada.io" or event.type == "DELETED":
            return
        name = event.object["metadata"]["name"]
        now = bool((event.object.get("spec") or {}).get("clusters"))
        if now != placed.get(name, False):
            seen[name if now else f"-{name}"] += 1
        placed[name] = now

    sandbox.store.add_listener(record)
    return seen


def test_every_job_is_admitted_exactly_once_through_conflicts_and_dropped_watches(
    sandbox,
    tmp_path,
    core,
    custom,
    karmada,
    reconciler_over,
    clock,
    faults: Faults,
):
    # catches: a 409 taken as success (a job never admitted), a write retried blindly or a
    # stale cache deciding again (admitted twice, or moved), a watch that never resumes after
    # a disconnect (the cache never catches up: synced() fails), a job lost
    placed = admissions(sandbox)
    policies = write_policies(tmp_path / "policies", {B: {}})
    names = [gpu_job(custom, f"job-{i:02}", B, gpus=4) for i in range(JOBS)]
    rec = reconciler_over(policies)
    # on the spec patches (admission, pending notes); 409s on the status patch that follows an
    # admission: test_a_conflicting_status_write_after_an_admission_is_repaired
    rule = faults.fail_requests(
        409, method="PATCH", path="/resourcebindings/[^/]+$", probability=0.3
    )

    conflicts = dropped = 0
    for _ in range(12):
        dropped += faults.drop_watches(abrupt=True)
        summary = step(karmada, rec, custom)
        conflicts += summary.conflicts
        running(karmada, rec, custom, clock)  # started, and the Clusters count their pods
        if all(placed[n] for n in names):
            break
        clock.advance(100)  # the first jobs end after 5m: room for the rest
    hits = next(r["hits"] for r in faults.describe()["rules"] if r["id"] == rule)
    faults.clear(rule)
    # the last admissions may come from the pass inside running(): let Karmada apply them and
    # report their status before looking at where each job runs
    karmada.run_once()
    karmada.run_once(clock.advance(10))
    assert hits > 0 and conflicts > 0 and dropped > 0, (hits, conflicts, dropped)

    assert {n: placed[n] for n in names} == dict.fromkeys(names, 1), placed  # once each
    assert not [k for k in placed if k.startswith("-")], placed  # never moved or undone
    for name in names:
        held = bound(custom, NS, name)
        assert len(held["spec"]["clusters"]) == 1
        assert conditions(held).get("Scheduled", {}).get("status") == "True", (name, held)
        notes = held["metadata"]["annotations"]
        assert notes[ann.ADMITTED_TO] == held["spec"]["clusters"][0]["name"]
        # none lost: it runs, or ran, where it was admitted
        (there,) = held["status"]["aggregatedStatus"]
        assert there["clusterName"] == notes[ann.ADMITTED_TO] and there["applied"], there
        states = {t for t, c in conditions(there).items() if c["status"] == "True"}
        assert states & {"Running", "Succeeded"}, (name, there)
        events = core.list_namespaced_event(NS, field_selector=f"involvedObject.name={name}")
        assert [e.reason for e in events.items].count("Admitted") == 1, name


def test_a_conflicting_status_write_after_an_admission_is_repaired(
    tmp_path,
    core,
    custom,
    karmada,
    reconciler_over,
    faults: Faults,
):
    # catches: an admission whose condition and Event are lost for good to 409s on the status
    # subresource (another writer, e.g. Karmada's status controller, updating the binding)
    name = gpu_job(custom, "first", B)
    rec = reconciler_over(write_policies(tmp_path / "policies", {B: {}}))
    faults.fail_requests(409, method="PATCH", path=f"/resourcebindings/{name}/status$", count=3)
    summary = step(karmada, rec, custom)
    assert bound(custom, NS, name)["spec"]["clusters"]  # the admission itself went through
    assert summary.conflicts == 1, summary
    for _ in range(3):  # later passes, the status path healthy again
        step(karmada, rec, custom)
    held = bound(custom, NS, name)
    assert conditions(held).get("Scheduled", {}).get("reason") == "FleetgateAdmitted", held
    events = core.list_namespaced_event(NS, field_selector=f"involvedObject.name={name}")
    assert [e.reason for e in events.items].count("Admitted") == 1


# -- the room of jobs that just started ---------------------------------------------------------


def test_a_job_that_just_started_keeps_its_room_until_the_cluster_status_counts_it(
    tmp_path,
    custom,
    karmada,
    reconciler_over,
    clock,
):
    # catches: over-commit in the window between a Work applied and the next Cluster status
    rec = reconciler_over(write_policies(tmp_path / "policies", {B: {}}))
    names = [gpu_job(custom, f"job-{i}", B) for i in range(9)]  # 8 GPUs each; 64 in the fleet
    assert len(admitted_by_queue(step(karmada, rec, custom))) == 1
    assert sum(1 for n in names if bound(custom, NS, n)["spec"].get("clusters")) == 8
    step(karmada, rec, custom)  # Works applied, jobs started; Clusters not refreshed yet
    placed = [n for n in names if bound(custom, NS, n)["spec"].get("clusters")]
    assert len(placed) == 8, f"{len(placed)} jobs of 8 GPUs placed on 64 GPUs"
