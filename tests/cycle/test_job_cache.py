"""What a JobCache keeps between cycles, and when it lets go of it.

A cycle with a warm cache must decide exactly as one with a new cache; the warm one only skips
work: the pending jobs (while binding and workload are the same objects, under the same policy
version and PriorityClass value), the placement CEL results and projections (per policy
version) and the static candidates (while the clusters' views are the same objects).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import annotations as ann
from engine.cycle import Cycle, run_cycle
from engine.cycle.jobs.cache import JobCache
from engine.cycle.jobs.values import float_total
from engine.cycle.model import CycleResult
from engine.fleet.affinity import ClusterAffinity, PlacementView
from engine.fleet.frozen import FrozenDict
from engine.fleet.model import PriorityClassView, Snapshot
from engine.policy.policyset import PolicySet, load_policy_set
from engine.resources import PODS, Resources
from engine.workloads.model import Role, Workload
from tests.cycle import builders

NOW = builders.NOW
GPU = {"nvidia.com/gpu": 8, "cpu": 8}
NODE = {"nvidia.com/gpu": 8, "cpu": 64}
SCENARIO: dict[str, Any] = {
    "clusters": [
        {"name": "east", "nodes": 4, "node": NODE, "labels": {"zone": "a"}},
        {"name": "west", "nodes": 4, "node": NODE, "labels": {"zone": "b"}},
    ],
    "jobs": [
        {"name": "a", "queue": "q", "pods": 1, "pod": GPU, "labels": {"zone": "b"}, "at": 1},
        {"name": "b", "queue": "q", "pods": 2, "pod": GPU, "priority": 5, "at": 2},
        {"name": "c", "queue": "q", "pods": 1, "pod": GPU, "labels": {"zone": "a"}, "at": 3},
        {"name": "d", "queue": "q", "pods": 5, "pod": GPU, "at": 4},
    ],
}
ZONE_FILTER = '!("zone" in job.labels) || cluster.labels["zone"] {op} job.labels["zone"]'


def policies(tmp_path: Path, op: str = "==") -> PolicySet:
    folder = tmp_path / f"policies-{len(list(tmp_path.iterdir()))}"
    folder.mkdir()
    documents = [
        {"kind": "Queue", "metadata": {"name": "q"}, "spec": {"weight": 1}},
        {
            "kind": "SchedulingPolicy",
            "metadata": {"name": "default"},
            "spec": {
                "placement": {
                    "strategy": "BinPack",
                    "filters": [{"name": "zone", "expression": ZONE_FILTER.format(op=op)}],
                    "scores": [
                        {
                            "name": "big-on-west",
                            "weight": 1,
                            "expression": 'job.total["nvidia.com/gpu"] >= 16.0'
                            ' && cluster.name == "west" ? 1.0 : 0.0',
                        }
                    ],
                }
            },
        },
    ]
    for i, doc in enumerate(documents):
        text = yaml.safe_dump({"apiVersion": "fleetgate.io/v1alpha1", **doc})
        (folder / f"{i:02}.yaml").write_text(text)
    return load_policy_set([folder])


def snapshot() -> Snapshot:
    return builders.snapshot(SCENARIO)


def decisions(result: CycleResult) -> list[dict[str, Any]]:
    return result.to_json()["decisions"]


def by_name(result: CycleResult) -> dict[str, Any]:
    return {d.workload.split("/")[-1]: d for d in result.decisions}


def warm_equals_cold(
    snap: Snapshot, policy: PolicySet, cache: JobCache, now: dt.datetime = NOW
) -> tuple[Cycle, CycleResult]:
    """One cycle with ``cache``; it must decide as a cycle with a new cache does."""
    cycle = Cycle(snap, policy, now, cache)
    result = cycle.run()
    assert decisions(result) == decisions(run_cycle(snap, policy, now, JobCache()))
    return cycle, result


def replace_job(snap: Snapshot, name: str, **changes: Any) -> Snapshot:
    """``snap`` with job ``name``'s workload replaced by a copy with ``changes``."""
    bindings = {b.resource.name: b for b in snap.bindings}
    key = bindings[name].resource.key
    workloads = dict(snap.workloads.items())
    workloads[key] = dataclasses.replace(workloads[key], **changes)
    return dataclasses.replace(snap, workloads=FrozenDict(workloads))


def replace_binding(snap: Snapshot, name: str, **changes: Any) -> Snapshot:
    bindings = tuple(
        dataclasses.replace(b, **changes) if b.resource.name == name else b for b in snap.bindings
    )
    return dataclasses.replace(snap, bindings=bindings)


# --- reuse ---------------------------------------------------------------------------------------
def test_a_second_cycle_reuses_the_jobs_and_the_placement_results(tmp_path: Path) -> None:
    policy, snap, cache = policies(tmp_path), snapshot(), JobCache()
    first, one = warm_equals_cold(snap, policy, cache)
    second, two = warm_equals_cold(snap, policy, cache)
    assert one.stats["celEvaluations"] > 0
    assert two.stats["celEvaluations"] == 0
    assert decisions(two) == decisions(one)
    assert by_name(one)["a"].clusters[0].name == "west"  # the zone filter is applied
    assert all(p is q for p, q in zip(first.pending, second.pending, strict=True))
    assert second.placer._static is first.placer._static
    assert second.placer.memo is not first.placer.memo  # its own counts, shared results
    # a third cycle at another time: nothing here reads now, so still no evaluation
    _, three = warm_equals_cold(snap, policy, cache, NOW + dt.timedelta(minutes=5))
    assert three.stats["celEvaluations"] == 0


def test_a_new_policy_version_starts_afresh(tmp_path: Path) -> None:
    same, other = policies(tmp_path), policies(tmp_path, "!=")
    assert same.version != other.version
    snap, cache = snapshot(), JobCache()
    first, _ = warm_equals_cold(snap, same, cache)
    second, result = warm_equals_cold(snap, other, cache)
    assert result.stats["celEvaluations"] > 0
    assert by_name(result)["a"].clusters[0].name == "east"  # the filter is now inverted
    assert not any(p is q for p, q in zip(first.pending, second.pending, strict=True))
    _, back = warm_equals_cold(snap, same, cache)  # only the latest version is kept
    assert back.stats["celEvaluations"] > 0
    assert by_name(back)["a"].clusters[0].name == "west"


# --- invalidation --------------------------------------------------------------------------------
def test_a_replaced_workload_is_read_again(tmp_path: Path) -> None:
    policy, snap, cache = policies(tmp_path), snapshot(), JobCache()
    first, _ = warm_equals_cold(snap, policy, cache)
    changed = replace_job(snap, "a", labels=FrozenDict({"fleetgate.io/queue": "q", "zone": "a"}))
    second, result = warm_equals_cold(changed, policy, cache)
    assert by_name(result)["a"].clusters[0].name == "east"
    kept = {j.ref: j for j in first.pending}
    for job in second.pending:
        assert (job is kept[job.ref]) == (job.workload.name != "a")


def test_a_replaced_binding_is_read_again(tmp_path: Path) -> None:
    policy, snap, cache = policies(tmp_path), snapshot(), JobCache()
    warm_equals_cold(snap, policy, cache)
    unmanaged = replace_binding(snap, "a", labels=FrozenDict({ann.MANAGED: "false"}))
    _, result = warm_equals_cold(unmanaged, policy, cache)
    assert "a" not in by_name(result)
    east_only = PlacementView(affinity=ClusterAffinity(("east",)))
    pinned = replace_binding(snap, "b", placement=east_only)
    _, result = warm_equals_cold(pinned, policy, cache)
    assert {c.name for c in by_name(result)["b"].clusters} == {"east"}
    _, result = warm_equals_cold(snap, policy, cache)  # the original objects again
    assert by_name(result)["a"].clusters[0].name == "west"


def test_a_changed_priority_class_value_is_read_again(tmp_path: Path) -> None:
    policy, snap, cache = policies(tmp_path), snapshot(), JobCache()
    _, result = warm_equals_cold(snap, policy, cache)
    assert by_name(result)["b"].priority == 5
    raised = dataclasses.replace(snap, priority_classes=(PriorityClassView("p5", 50, False),))
    _, result = warm_equals_cold(raised, policy, cache)
    assert by_name(result)["b"].priority == 50
    gone = dataclasses.replace(snap, priority_classes=())
    _, result = warm_equals_cold(gone, policy, cache)
    assert by_name(result)["b"].reason == "UnknownPriorityClass"


def test_a_changed_cluster_view_drops_the_static_candidates(tmp_path: Path) -> None:
    policy, snap, cache = policies(tmp_path), snapshot(), JobCache()
    first, _ = warm_equals_cold(snap, policy, cache)
    assert first.placer._static  # filled
    # an equal copy of a view is another object: the static candidates start empty again
    views = tuple(dataclasses.replace(c) for c in snap.clusters)
    copied = dataclasses.replace(snap, clusters=views)
    second, result = warm_equals_cold(copied, policy, cache)
    assert second.placer._static is not first.placer._static
    assert result.stats["celEvaluations"] == 0  # the CEL results still hold: same values
    # west moves to zone a: job a (zone b) has no candidate left
    clusters = tuple(
        dataclasses.replace(c, labels=FrozenDict({"zone": "a"})) if c.name == "west" else c
        for c in copied.clusters
    )
    third, result = warm_equals_cold(dataclasses.replace(copied, clusters=clusters), policy, cache)
    assert third.placer._static is not second.placer._static
    assert result.stats["celEvaluations"] > 0
    assert by_name(result)["a"].reason == "NoCandidateCluster"
    # the same view objects as the cycle before: kept
    fourth, _ = warm_equals_cold(dataclasses.replace(copied, clusters=clusters), policy, cache)
    assert fourth.placer._static is third.placer._static


# --- what depends on now is still checked every cycle --------------------------------------------
def test_backoff_is_checked_before_the_kept_job(tmp_path: Path) -> None:
    policy, cache = policies(tmp_path), JobCache()
    until = ann.format_time(NOW + dt.timedelta(hours=1))
    snap = replace_binding(
        snapshot(),
        "c",
        annotations=FrozenDict(
            {ann.QUEUED_AT: ann.format_time(builders.EPOCH), ann.BACKOFF_UNTIL: until}
        ),
    )
    _, later = warm_equals_cold(snap, policy, cache, NOW + dt.timedelta(hours=2))
    assert by_name(later)["c"].reason == "Admitted"
    _, now = warm_equals_cold(snap, policy, cache, NOW)
    assert by_name(now)["c"].reason == "Backoff"


def test_an_exclusion_ends_with_time_though_the_candidates_are_kept(tmp_path: Path) -> None:
    policy, cache = policies(tmp_path), JobCache()
    until = ann.format_time(NOW + dt.timedelta(hours=1))
    snap = replace_binding(
        snapshot(),
        "a",
        annotations=FrozenDict(
            {ann.QUEUED_AT: ann.format_time(builders.EPOCH), ann.EXCLUDED_CLUSTERS: f"west={until}"}
        ),
    )
    _, now = warm_equals_cold(snap, policy, cache, NOW)
    assert by_name(now)["a"].reason == "NoClusterFits"  # west excluded for now, east filtered
    _, later = warm_equals_cold(snap, policy, cache, NOW + dt.timedelta(hours=2))
    assert by_name(later)["a"].clusters[0].name == "west"


# --- job.total as floats, without Fractions ------------------------------------------------------
AMOUNTS = st.one_of(
    st.fractions(min_value=0, max_value=10**6, max_denominator=10**4),
    st.integers(0, 2**70).map(Fraction),
    st.sampled_from([Fraction(1, 10), Fraction(1, 3), Fraction(7, 1000), Fraction(2**64 + 1, 3)]),
)
ROLES = st.lists(
    st.tuples(
        st.integers(0, 50),
        st.dictionaries(st.sampled_from(["cpu", "memory", "nvidia.com/gpu", PODS, "x"]), AMOUNTS),
    ),
    max_size=4,
)


@settings(max_examples=300, deadline=None)
@given(roles=ROLES)
def test_float_total_is_the_exact_total_as_floats(roles: list[tuple[int, dict[str, Any]]]) -> None:
    workload = Workload(
        api_version="batch/v1",
        kind="Job",
        namespace="n",
        name="j",
        uid="u",
        roles=tuple(Role(f"r{i}", n, Resources(r)) for i, (n, r) in enumerate(roles)),
        min_member=1,
        resizable=False,
    )
    expected = workload.total.to_floats()
    got = float_total(workload)
    assert list(got.items()) == list(expected.items())
    assert [repr(v) for v in got.values()] == [repr(v) for v in expected.values()]


@pytest.mark.parametrize("spec", SCENARIO["jobs"], ids=lambda s: s["name"])
def test_float_total_of_the_builders_jobs(spec: dict[str, Any]) -> None:
    _, workload = builders.job(spec)
    assert float_total(workload) == workload.total.to_floats()


# --- admitted jobs -------------------------------------------------------------------------------
RUNNING: dict[str, Any] = {
    "clusters": SCENARIO["clusters"],
    "jobs": [
        {"name": "run", "queue": "q", "pods": 2, "pod": GPU, "admitted": "east", "at": 1},
        {"name": "fly", "queue": "q", "pods": 3, "pod": GPU, "admitted": "west", "inFlight": True},
        *SCENARIO["jobs"],
    ],
}


def test_admitted_jobs_are_kept_until_now_could_change_them(tmp_path: Path) -> None:
    """A running job is kept at any later time; one in flight (admitted a minute before NOW,
    not yet applied) only at the same time, since its reservation ends with the TTL (10m)."""
    policy, snap, cache = policies(tmp_path), builders.snapshot(RUNNING), JobCache()
    first, _ = warm_equals_cold(snap, policy, cache)
    same, _ = warm_equals_cold(snap, policy, cache)
    later = NOW + dt.timedelta(minutes=15)
    past_ttl, _ = warm_equals_cold(snap, policy, cache, later)  # decides as a cold cycle
    held = {j.ref: j for j in first.admitted}
    assert {j.ref for j in held.values() if j.in_flight} == {"team/fly-pytorchjob"}
    assert all(j is held[j.ref] for j in same.admitted)
    for job in past_ttl.admitted:
        assert (job is held[job.ref]) == (job.ref == "team/run-pytorchjob")
        assert not job.in_flight  # the reservation on west ended


def test_a_replaced_admitted_binding_is_read_again(tmp_path: Path) -> None:
    policy, snap, cache = policies(tmp_path), builders.snapshot(RUNNING), JobCache()
    first, _ = warm_equals_cold(snap, policy, cache)
    moved = replace_binding(snap, "run", clusters=(("west", 2),))
    second, _ = warm_equals_cold(moved, policy, cache)
    held = {j.ref: j for j in first.admitted}
    for job in second.admitted:
        assert (job is held[job.ref]) == (job.ref != "team/run-pytorchjob")
    usage = {j.ref: dict(j.usage) for j in second.admitted}["team/run-pytorchjob"]
    assert usage == {"west": {"nvidia.com/gpu": 16000, "cpu": 16000, "pods": 2000}}


def test_admitted_jobs_are_read_again_under_a_new_policy_version(tmp_path: Path) -> None:
    same, other = policies(tmp_path), policies(tmp_path, "!=")
    snap, cache = builders.snapshot(RUNNING), JobCache()
    first, _ = warm_equals_cold(snap, same, cache)
    second, _ = warm_equals_cold(snap, other, cache)
    third, _ = warm_equals_cold(snap, other, cache)
    assert not any(j is k for j, k in zip(first.admitted, second.admitted, strict=True))
    assert all(j is k for j, k in zip(second.admitted, third.admitted, strict=True))


# --- a new workloads map: only the templates that differ are read again --------------------------
def without_job(snap: Snapshot, name: str) -> Snapshot:
    """``snap`` whose workloads map (a new object) no longer has job ``name``'s template."""
    key = next(b.resource.key for b in snap.bindings if b.resource.name == name)
    workloads = {k: w for k, w in snap.workloads.items() if k != key}
    return dataclasses.replace(snap, workloads=FrozenDict(workloads))


def quick_names(cache: JobCache, snap: Snapshot, policy: PolicySet) -> set[str]:
    found = cache.quick(snap, policy.version)
    live = {id(b) for b in snap.bindings}
    return {job.binding.resource.name for key, job in found.items() if key in live}


def test_a_new_workloads_map_keeps_the_jobs_whose_template_is_the_same(tmp_path: Path) -> None:
    # one job's template changes (one comes, one goes): the next cycle finds every other
    # waiting job kept, without reading it again, and reads that one anew
    policy, snap, cache = policies(tmp_path), snapshot(), JobCache()
    warm_equals_cold(snap, policy, cache)
    assert quick_names(cache, snap, policy) == {"a", "b", "c", "d"}
    changed = replace_job(snap, "a", labels=FrozenDict({"fleetgate.io/queue": "q", "zone": "a"}))
    assert quick_names(cache, changed, policy) == {"b", "c", "d"}
    warm_equals_cold(changed, policy, cache)  # reads a again and keeps it for this map
    assert quick_names(cache, changed, policy) == {"a", "b", "c", "d"}
    gone = without_job(changed, "c")
    assert quick_names(cache, gone, policy) == {"a", "b", "d"}
    _, result = warm_equals_cold(gone, policy, cache)
    assert by_name(result)["c"].reason == "WaitingForTemplate"
    # c's template comes back as the very object it was: c is still read again
    assert quick_names(cache, changed, policy) == {"a", "b", "d"}


def test_a_new_workloads_map_keeps_the_admitted_jobs_whose_template_is_the_same(
    tmp_path: Path,
) -> None:
    policy, snap, cache = policies(tmp_path), builders.snapshot(RUNNING), JobCache()
    first, _ = warm_equals_cold(snap, policy, cache)
    changed = replace_job(snap, "b", labels=FrozenDict({"fleetgate.io/queue": "q", "x": "y"}))
    held = cache.quick_admitted(changed, policy.version, NOW)
    assert {j.binding.resource.name for j in held.values()} == {"run"}  # fly is in flight
    moved = replace_job(snap, "run", labels=FrozenDict({"fleetgate.io/queue": "q", "x": "y"}))
    assert not cache.quick_admitted(moved, policy.version, NOW)
    second, _ = warm_equals_cold(moved, policy, cache)
    kept = {j.ref: j for j in first.admitted}
    for job in second.admitted:  # fly, in flight, is kept for the same now by ``admitted``
        assert (job is kept[job.ref]) == (job.ref == "team/fly-pytorchjob")


def with_twin(snap: Snapshot, name: str) -> Snapshot:
    """``snap`` with a second binding of job ``name``'s template (another uid and name)."""
    first = next(b for b in snap.bindings if b.resource.name == name)
    twin = dataclasses.replace(first, name=f"{first.name}-twin", uid=f"{first.uid}-twin")
    return dataclasses.replace(snap, bindings=(*snap.bindings, twin))


EDITS = ["replace", "remove", "restore", "classes", "rebind"]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(EDITS), st.sampled_from(["a", "b", "c", "d", "run", "fly"])),
        max_size=8,
    )
)
def test_kept_jobs_hold_the_templates_of_the_snapshot(
    tmp_path_factory: pytest.TempPathFactory, edits: list[tuple[str, str]]
) -> None:
    # whatever templates come, go or change between cycles, whatever bindings are read again
    # or PriorityClasses change, and with two bindings of one template, each job the cache
    # gives for a snapshot, waiting or admitted, was read from that snapshot's very template,
    # and a warm cycle reads and decides as a cold one
    policy = policies(tmp_path_factory.mktemp("p"))
    base, cache = with_twin(builders.snapshot(RUNNING), "a"), JobCache()
    snap = base
    warm_equals_cold(snap, policy, cache)
    for i, (edit, name) in enumerate(edits):
        key = next(b.resource.key for b in base.bindings if b.resource.name == name)
        if edit == "replace" and key in snap.workloads:
            snap = replace_job(snap, name, annotations=FrozenDict({"edit": str(i)}))
        elif edit == "remove":
            snap = without_job(snap, name)
        elif edit == "restore":  # the template as the first snapshot had it
            workloads = {**dict(snap.workloads.items()), key: base.workloads[key]}
            snap = dataclasses.replace(snap, workloads=FrozenDict(workloads))
        elif edit == "classes":  # an equal tuple, or one whose value changed
            value = 5 + i % 2
            classes = tuple(PriorityClassView(c.name, value, False) for c in snap.priority_classes)
            snap = dataclasses.replace(snap, priority_classes=classes)
        elif edit == "rebind":  # the binding read again: an equal, new object
            snap = replace_binding(snap, name)
        quick = cache.quick(snap, policy.version)
        held = cache.quick_admitted(snap, policy.version, NOW)
        live = {id(b) for b in snap.bindings}
        for found, job in [*quick.items(), *held.items()]:
            if found in live:
                assert job.binding.resource.key in snap.workloads
        for found, job in quick.items():
            if found in live:
                assert snap.workloads.get(job.binding.resource.key) is job.workload
        warm, _ = warm_equals_cold(snap, policy, cache)
        cold = Cycle(snap, policy, NOW, JobCache())
        assert warm.pending == cold.pending and warm.admitted == cold.admitted
