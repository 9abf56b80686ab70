"""The seeded synthetic fleet of ``fleetgate bench``: valid policies, a consistent snapshot,
determinism, and arrivals for the incremental cycle."""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
from collections import Counter
from fractions import Fraction
from pathlib import Path

import pytest
import yaml

from engine import annotations as notes
from engine.bench.synthetic import SyntheticFleet, arrival, synthetic_fleet, with_arrival
from engine.fleet.model import Snapshot
from engine.policy.policyset import load_policy_set
from engine.quantity import parse_quantity
from engine.resources import PODS

NOW = dt.datetime(2025, 3, 10, 10, 0, tzinfo=dt.UTC)
GPU = "nvidia.com/gpu"


def fleet(jobs: int = 2000, clusters: int = 20, queues: int = 100, seed: int = 7) -> SyntheticFleet:
    return synthetic_fleet(jobs=jobs, clusters=clusters, queues=queues, seed=seed, now=NOW)


@pytest.fixture(scope="module")
def mid() -> SyntheticFleet:
    return fleet()


def digest(value: SyntheticFleet) -> str:
    """A hash of everything generated; apiEnablements sorted (frozenset order is per process)."""
    snapshot = value.snapshot
    parts = [
        repr(dataclasses.replace(c, api_enablements=frozenset())) + repr(sorted(c.api_enablements))
        for c in snapshot.clusters
    ]
    parts += [repr(b) for b in snapshot.bindings]
    parts += [repr(w) for w in snapshot.workloads.values()]
    parts += [repr(snapshot.policies), repr(snapshot.priority_classes)]
    parts.append(repr(value.policy_documents))
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def pending(snapshot: Snapshot) -> list:
    return [b for b in snapshot.bindings if notes.ADMITTED_AT not in b.annotations]


def running(snapshot: Snapshot) -> list:
    return [b for b in snapshot.bindings if notes.ADMITTED_AT in b.annotations]


def parents(value: SyntheticFleet) -> dict[str, str | None]:
    return {
        d["metadata"]["name"]: d["spec"].get("parent")
        for d in value.policy_documents
        if d["kind"] == "Queue"
    }


@pytest.mark.parametrize(("jobs", "clusters", "queues"), [(200, 10, 30), (100, 100, 1000)])
def test_policy_documents_pass_the_real_loader(tmp_path: Path, jobs, clusters, queues):
    value = fleet(jobs, clusters, queues)
    (tmp_path / "bench.yaml").write_text(yaml.safe_dump_all(value.policy_documents))
    policies = load_policy_set([tmp_path])
    assert len(policies.queues) == queues
    assert policies.scheduling.name == "bench"
    assert policies.scheduling.fair_sharing.enabled
    roots = [q for q in policies.queues if q.parent is None]
    assert 1 <= len(roots) < queues
    assert any(q.priority == 100 for q in roots)


def test_guarantees_share_most_but_not_all_of_the_ready_fleet(mid: SyntheticFleet):
    ready = [c for c in mid.snapshot.clusters if c.ready]
    roots = [d for d in mid.policy_documents if d["kind"] == "Queue" and "parent" not in d["spec"]]
    for resource in (GPU, "cpu", "memory"):
        capacity = sum(c.allocatable.get_amount(resource) for c in ready)
        guaranteed = sum(parse_quantity(d["spec"]["guarantee"][resource]) for d in roots)
        assert Fraction(1, 2) < guaranteed / capacity <= Fraction(4, 5)


def test_same_arguments_same_fleet_and_other_seeds_differ(mid: SyntheticFleet):
    again = fleet()
    assert again.snapshot == mid.snapshot
    assert again.policy_documents == mid.policy_documents
    assert digest(again) == digest(mid)
    assert digest(fleet(seed=8)) != digest(mid)


def test_pending_jobs_are_managed_suspended_and_unscheduled(mid: SyntheticFleet):
    snapshot = mid.snapshot
    jobs = pending(snapshot)
    assert len(jobs) == 2000
    for binding in jobs:
        assert binding.labels[notes.MANAGED] == "true"
        assert binding.suspended_scheduling and binding.clusters == ()
        assert binding.created_at is not None and binding.created_at < NOW
        assert snapshot.policy_for(binding) is not None
        assert binding.placement == snapshot.policy_for(binding).placement
    assert len({b.uid for b in snapshot.bindings}) == len(snapshot.bindings)
    assert len({w.uid for w in snapshot.workloads.values()}) == len(snapshot.workloads)


def test_every_binding_has_its_workload_and_queue(mid: SyntheticFleet):
    snapshot = mid.snapshot
    tree = parents(mid)
    leaves = set(tree) - set(tree.values())
    assert len(snapshot.workloads) == len(snapshot.bindings)
    for binding in snapshot.bindings:
        work = snapshot.workload_for(binding)
        assert work is not None and work.uid == binding.resource.uid
        queue = work.labels["fleetgate.io/queue"]
        assert queue in leaves and tree[queue] == binding.namespace
        assert 1 <= work.min_member <= work.pods
        assert snapshot.priority_value(work.priority_class_name) is not None
    load = Counter(snapshot.workload_for(b).labels["fleetgate.io/queue"] for b in pending(snapshot))
    assert load.most_common(1)[0][1] > 5 * len(pending(snapshot)) / len(leaves)  # skewed


def test_the_job_mix(mid: SyntheticFleet):
    works = [mid.snapshot.workload_for(b) for b in pending(mid.snapshot)]
    kinds = Counter((w.api_version, w.kind) for w in works)
    assert set(kinds) == {
        ("kubeflow.org/v1", "PyTorchJob"),
        ("kubeflow.org/v2beta1", "MPIJob"),
        ("batch.volcano.sh/v1alpha1", "Job"),
        ("ray.io/v1", "RayJob"),
        ("sparkoperator.k8s.io/v1beta2", "SparkApplication"),
        ("batch/v1", "Job"),
        ("apps/v1", "Deployment"),
    }
    gpus = [w.total.get_amount(GPU) for w in works]
    assert sum(g == 0 for g in gpus) > 200
    assert sum(0 < g <= 4 for g in gpus) > 100
    assert sum(g >= 16 for g in gpus) > 200
    assert any(r.requests.get_amount(GPU) == 8 for w in works for r in w.roles)
    assert all(w.resizable == (w.api_version in ("batch/v1", "apps/v1")) for w in works)


def test_clusters_are_consistent(mid: SyntheticFleet):
    snapshot = mid.snapshot
    assert [c.name for c in snapshot.clusters] == sorted(c.name for c in snapshot.clusters)
    for cluster in snapshot.clusters:
        nodes = int(cluster.allocatable[PODS]) // 110
        assert sum(count for _, count in cluster.allocatable_modelings) == nodes
        grades = [m.grade for m in cluster.resource_models]
        assert grades == list(range(len(grades)))
        for resource, amount in cluster.allocated.items():
            assert 0 < amount <= cluster.allocatable[resource]
        assert cluster.ready_changed_at is not None and cluster.ready_changed_at < NOW
        gpus = cluster.allocatable.get_amount(GPU)
        assert (gpus == 8 * nodes) == ("gpu.fleetgate.io/model" in cluster.labels)
        spot = cluster.labels.get("fleetgate.io/capacity-type") == "spot"
        assert spot == any(t.key == "fleetgate.io/capacity-type" for t in cluster.taints)
    assert any(c.allocatable.get_amount(GPU) == 0 for c in snapshot.clusters)


def test_running_jobs_fit_their_cluster(mid: SyntheticFleet):
    snapshot = mid.snapshot
    jobs = running(snapshot)
    assert jobs
    used: dict[str, Counter] = {}
    for binding in jobs:
        (name, _), cluster = binding.clusters[0], snapshot.cluster(binding.clusters[0][0])
        work = snapshot.workload_for(binding)
        assert binding.annotations[notes.ADMITTED_TO] == name
        assert binding.applied[name] and binding.healthy(name)
        assert cluster is not None and cluster.ready
        assert cluster.serves(work.api_version, work.kind)
        used.setdefault(name, Counter()).update(work.total)
    for name, total in used.items():
        allocated = snapshot.cluster(name).allocated
        assert all(amount <= allocated.get_amount(r) for r, amount in total.items())


def test_arrival_is_a_new_pending_job_inserted_in_order(mid: SyntheticFleet):
    binding, work = arrival(mid, 0, 7, NOW)
    assert (binding, work) == arrival(mid, 0, 7, NOW)
    assert arrival(mid, 1, 7, NOW)[0].name != binding.name
    keys = {b.resource.key for b in mid.snapshot.bindings}
    assert binding.resource.key not in keys and binding.clusters == ()
    after = with_arrival(mid.snapshot, binding, work)
    assert len(after.bindings) == len(mid.snapshot.bindings) + 1
    order = [(b.namespace, b.name) for b in after.bindings]
    assert order == sorted(order)
    assert after.workload_for(binding) is work
    assert after.clusters == mid.snapshot.clusters
    # a map in key order, which says its one new key is what changed (as a live one does)
    assert list(after.workloads) == sorted(after.workloads)
    assert after.workloads == {**mid.snapshot.workloads, binding.resource.key: work}
    assert set(after.workloads.changed_since(mid.snapshot.workloads) or ()) == {
        binding.resource.key
    }
