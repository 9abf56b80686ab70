"""Node shape's three answers (issue 27): whole-node pods fit, may fit, or never fit.

The clusters are the Karmada ``Cluster`` objects the sandbox writes for simulated members
(``engine.members.cluster_object``), read back as the reconciler reads them, so the resource
models, ``allocatableModelings`` and ``fleetgate.io/node-shapes`` are the real fields.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import tempfile
from collections.abc import Mapping, Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
import yaml

from engine import annotations as ann
from engine.cycle import run_cycle
from engine.cycle.jobs.cache import JobCache
from engine.cycle.jobs.reading import pod_groups
from engine.cycle.model import CycleResult, Decision
from engine.cycle.placement.estimates import pod_shape
from engine.cycle.reasons import Action, Reason
from engine.fleet.clusters import read_cluster
from engine.fleet.frozen import FrozenDict
from engine.fleet.model import (
    ClusterView,
    Estimates,
    PriorityClassView,
    ResourceModel,
    Snapshot,
)
from engine.members import ClusterSpec, MemberCluster, NodeGroup, cluster_object
from engine.members.grades import karmada_default_models
from engine.policy.policyset import PolicySet, load_policy_set
from tests.cycle import builders

GI = 2**30
WHOLE_NODE = {"cpu": 96, "memory": 768 * GI, "nvidia.com/gpu": 8}  # 12 cores, 96Gi per GPU
WHOLE_POD = {"cpu": 96, "memory": "768Gi", "nvidia.com/gpu": 8}
NOW = builders.NOW


def gpu_ladder() -> tuple[ResourceModel, ...]:
    """GPU-aligned grades as a platform team would write them: 0, 1, 2, 4, 8 GPUs with 12
    cores and 96Gi per GPU, the last one a whole node (Karmada's contiguous ranges, the last
    max MaxInt64)."""
    steps = (0, 1, 2, 4, 8)
    per_gpu = {"nvidia.com/gpu": 1, "cpu": 12, "memory": 96 * GI}
    top = Fraction(2**63 - 1)
    return tuple(
        ResourceModel(
            i,
            FrozenDict(
                {
                    r: (Fraction(unit * s), Fraction(unit * steps[i + 1]) if i + 1 < 5 else top)
                    for r, unit in per_gpu.items()
                }
            ),
        )
        for i, s in enumerate(steps)
    )


def member(
    name: str,
    nodes: Sequence[NodeGroup],
    models: tuple[Any, ...] = (),
    shapes: bool = True,
) -> ClusterView:
    kinds = (("kubeflow.org/v1", "PyTorchJob"),)
    spec = ClusterSpec(name, kinds=kinds, nodes=tuple(nodes), resource_models=models)
    obj = cluster_object(MemberCluster(spec, NOW), NOW)
    if not shapes:
        obj["metadata"].pop("annotations", None)
    return read_cluster(obj)


def gpu_fleet(models: tuple[Any, ...] = (), shapes: bool = True, n: int = 4) -> list[ClusterView]:
    return [member(f"gpu-{i}", [NodeGroup.of(40, WHOLE_NODE)], models, shapes) for i in range(n)]


def policies(tmp_path: Path, node_shape: str | None = None) -> PolicySet:
    folder = Path(tempfile.mkdtemp(prefix="policies-", dir=tmp_path))
    docs: list[dict[str, Any]] = [{"kind": "Queue", "metadata": {"name": "research"}, "spec": {}}]
    if node_shape is not None:
        docs.append(
            {
                "kind": "SchedulingPolicy",
                "metadata": {"name": "default"},
                "spec": {"placement": {"nodeShape": node_shape}},
            }
        )
    for i, doc in enumerate(docs):
        text = yaml.safe_dump({"apiVersion": "fleetgate.io/v1alpha1", **doc})
        (folder / f"{i:02}.yaml").write_text(text)
    return load_policy_set([folder])


def snapshot(
    clusters: Sequence[ClusterView], jobs: Sequence[Mapping[str, Any]], **extra: Any
) -> Snapshot:
    built = [builders.job({"queue": "research", **spec}) for spec in jobs]
    return Snapshot(
        clusters=tuple(sorted(clusters, key=lambda c: c.name)),
        bindings=tuple(sorted((b for b, _ in built), key=lambda b: (b.namespace, b.name))),
        workloads=FrozenDict({b.resource.key: w for b, w in built}),
        policies=(),
        priority_classes=(PriorityClassView("p0", 0, False),),
        **extra,
    )


def decided(result: CycleResult, name: str) -> Decision:
    found = next((d for d in result.decisions if d.workload.endswith(f"/{name}")), None)
    assert found is not None, [d.workload for d in result.decisions]
    return found


def table(result: CycleResult) -> str:
    return "\n".join(f"{d.workload} {d.action} {d.reason} {d.message}" for d in result.decisions)


WHOLE_NODE_JOB = {"name": "train", "pods": 4, "pod": WHOLE_POD}


# --- fits: models that grade a whole node ------------------------------------------------------
def test_a_whole_node_gang_fits_an_empty_fleet_whose_models_grade_whole_nodes(tmp_path: Path):
    result = run_cycle(snapshot(gpu_fleet(gpu_ladder()), [WHOLE_NODE_JOB]), policies(tmp_path), NOW)
    d = decided(result, "train")
    assert (d.action, d.reason) == (Action.ADMIT, Reason.ADMITTED), table(result)
    assert "may fit" not in d.message


def test_a_whole_node_gang_fits_the_default_grades_of_a_fleet_file(tmp_path: Path):
    """No models given: the member's default grades must promise a whole node."""
    result = run_cycle(snapshot(gpu_fleet(), [WHOLE_NODE_JOB]), policies(tmp_path), NOW)
    d = decided(result, "train")
    assert (d.action, d.reason) == (Action.ADMIT, Reason.ADMITTED), table(result)
    assert "may fit" not in d.message


# --- maybe: Karmada's default cpu/memory grades ------------------------------------------------
def test_karmada_default_grades_make_a_whole_node_pod_a_maybe_that_optimistic_admits(
    tmp_path: Path,
):
    """96 cores / 768Gi nodes land in grade 7, which promises only 64 cores / 512Gi."""
    fleet = gpu_fleet(karmada_default_models())
    assert all({g: n for g, n in c.allocatable_modelings if n} == {7: 40} for c in fleet)
    for node_shape in (None, "Optimistic"):
        result = run_cycle(snapshot(fleet, [WHOLE_NODE_JOB]), policies(tmp_path, node_shape), NOW)
        d = decided(result, "train")
        assert (d.action, d.reason) == (Action.ADMIT, Reason.ADMITTED), table(result)
        assert "where it may fit" in d.message and "nodeShape: Optimistic" in d.message


def test_conservative_waits_saying_the_models_cannot_promise_the_room(tmp_path: Path):
    fleet = gpu_fleet(karmada_default_models())
    result = run_cycle(snapshot(fleet, [WHOLE_NODE_JOB]), policies(tmp_path, "Conservative"), NOW)
    d = decided(result, "train")
    assert (d.action, d.reason) == (Action.PENDING, Reason.NO_CLUSTER_FITS), table(result)
    assert "4 may have it, but their resource models cannot promise the room" in d.message
    assert "nodeShape: Conservative" in d.message
    reasons = dict(d.cluster_reasons)
    assert "resource models cannot promise it" in reasons["gpu-0"]


def test_optimistic_takes_the_room_it_guessed_once(tmp_path: Path):
    """A maybe-admission takes the nodes it may use: the next whole-node gang does not count
    the same nodes again."""
    fleet = [member("gpu-0", [NodeGroup.of(6, WHOLE_NODE)], karmada_default_models())]
    jobs = [
        {"name": "first", "pods": 4, "pod": WHOLE_POD, "at": 1},
        {"name": "second", "pods": 4, "pod": WHOLE_POD, "at": 2},
        {"name": "small", "pods": 2, "pod": WHOLE_POD, "at": 3},
    ]
    result = run_cycle(snapshot(fleet, jobs), policies(tmp_path), NOW)
    assert decided(result, "first").action == Action.ADMIT, table(result)
    assert decided(result, "second").action == Action.PENDING, table(result)
    assert decided(result, "small").action == Action.ADMIT, table(result)


def test_a_maybe_is_not_taken_where_a_cluster_surely_fits(tmp_path: Path):
    fleet = [
        member("a-default", [NodeGroup.of(40, WHOLE_NODE)], karmada_default_models()),
        member("b-graded", [NodeGroup.of(4, WHOLE_NODE)], gpu_ladder()),
    ]
    result = run_cycle(snapshot(fleet, [WHOLE_NODE_JOB]), policies(tmp_path), NOW)
    d = decided(result, "train")
    assert d.action == Action.ADMIT and [c.name for c in d.clusters] == ["b-graded"], table(result)


# --- never: larger than any node ---------------------------------------------------------------
SIXTEEN = {"name": "huge", "pod": {"cpu": 8, "memory": "64Gi", "nvidia.com/gpu": 16}}


def test_a_pod_larger_than_every_node_is_rejected_at_once_naming_what_it_asks(tmp_path: Path):
    jobs = [{**SIXTEEN, "roles": [{"name": "Master", "pods": 1, "pod": SIXTEEN["pod"]}]}]
    result = run_cycle(snapshot(gpu_fleet(gpu_ladder()), jobs), policies(tmp_path), NOW)
    d = decided(result, "huge")
    assert (d.action, d.reason) == (Action.REJECT, Reason.NEVER_FITS), table(result)
    assert "Master pod asks 16 nvidia.com/gpu" in d.message
    assert "largest node of any candidate cluster offers 8" in d.message
    assert "largest node offers 8" in dict(d.cluster_reasons)["gpu-0"]


def test_never_fits_also_on_karmadas_default_grades_when_node_shapes_are_declared(
    tmp_path: Path,
):
    result = run_cycle(
        snapshot(gpu_fleet(karmada_default_models()), [SIXTEEN]), policies(tmp_path), NOW
    )
    assert decided(result, "huge").reason == Reason.NEVER_FITS, table(result)


def test_without_node_shapes_only_the_whole_cluster_bounds_a_pod(tmp_path: Path):
    """Karmada reports no node sizes: without ``fleetgate.io/node-shapes`` a 16-GPU pod on a
    320-GPU cluster may fit some node the models do not describe, so it is not rejected; one
    larger than the whole cluster is."""
    fleet = gpu_fleet(gpu_ladder(), shapes=False)
    assert not fleet[0].node_shapes
    result = run_cycle(snapshot(fleet, [SIXTEEN]), policies(tmp_path), NOW)
    assert decided(result, "huge").reason == Reason.NO_CLUSTER_FITS, table(result)
    giant = {"name": "giant", "pod": {"cpu": 8, "nvidia.com/gpu": 400}}
    result = run_cycle(snapshot(fleet, [giant]), policies(tmp_path), NOW)
    d = decided(result, "giant")
    assert d.reason == Reason.NEVER_FITS and "offers 320" in d.message, table(result)


def test_a_bigger_node_admits_a_job_that_never_fit_on_the_next_cycle(tmp_path: Path):
    cache = JobCache()
    small = gpu_fleet(gpu_ladder(), n=1)
    result = run_cycle(snapshot(small, [SIXTEEN]), policies(tmp_path), NOW, cache)
    assert decided(result, "huge").reason == Reason.NEVER_FITS
    big = {"cpu": 192, "memory": 1536 * GI, "nvidia.com/gpu": 16}
    grown = [member("gpu-0", [NodeGroup.of(40, WHOLE_NODE), NodeGroup.of(1, big)])]
    later = NOW + dt.timedelta(minutes=1)
    result = run_cycle(snapshot(grown, [SIXTEEN]), policies(tmp_path), later, cache)
    assert decided(result, "huge").action == Action.ADMIT, table(result)


def test_a_pod_no_node_shape_holds_whole_is_never_even_when_each_resource_is_offered(
    tmp_path: Path,
):
    """GPU nodes of 96 cores and CPU nodes of 128 cores: 8 GPUs with 100 cores fit neither."""
    cpu_node = {"cpu": 128, "memory": 512 * GI}
    fleet = [member("mixed", [NodeGroup.of(2, WHOLE_NODE), NodeGroup.of(2, cpu_node)])]
    job = {"name": "odd", "pod": {"cpu": 100, "nvidia.com/gpu": 8}}
    result = run_cycle(snapshot(fleet, [job]), policies(tmp_path), NOW)
    d = decided(result, "odd")
    assert d.reason == Reason.NEVER_FITS, table(result)


# --- CPU nodes in a GPU cluster ----------------------------------------------------------------
def test_cpu_nodes_of_a_gpu_cluster_hold_cpu_pods(tmp_path: Path):
    gpu_node = {"cpu": 96, "memory": 768 * GI, "nvidia.com/gpu": 8}
    cpu_node = {"cpu": 64, "memory": 256 * GI}
    fleet = [member("mixed", [NodeGroup.of(1, gpu_node), NodeGroup.of(1, cpu_node)])]
    jobs = [{"name": f"cpu-{i}", "pod": {"cpu": 60, "memory": "16Gi"}, "at": i} for i in range(2)]
    result = run_cycle(snapshot(fleet, jobs), policies(tmp_path, "Conservative"), NOW)
    for i in range(2):
        assert decided(result, f"cpu-{i}").action == Action.ADMIT, table(result)


# --- the scheduler-estimator's answers ---------------------------------------------------------
def estimates(replicas: Mapping[tuple[str, Any], int], failed: Mapping[str, str] | None = None):
    return Estimates(FrozenDict(replicas), FrozenDict(failed or {}))


def whole_pod_shape() -> Any:
    _, workload = builders.job({"name": "x", "pod": WHOLE_POD})
    return pod_shape(pod_groups(workload.roles)[0].requests)


def test_the_estimator_makes_a_maybe_sure(tmp_path: Path):
    fleet = gpu_fleet(karmada_default_models(), n=1)
    said = estimates({("gpu-0", whole_pod_shape()): 40})
    snap = snapshot(fleet, [WHOLE_NODE_JOB], estimates=said)
    result = run_cycle(snap, policies(tmp_path, "Conservative"), NOW)
    d = decided(result, "train")
    assert (d.action, d.reason) == (Action.ADMIT, Reason.ADMITTED), table(result)
    assert "may fit" not in d.message


def test_the_estimator_says_no_where_the_models_say_yes(tmp_path: Path):
    fleet = gpu_fleet(gpu_ladder(), n=1)
    said = estimates({("gpu-0", whole_pod_shape()): 3})
    result = run_cycle(snapshot(fleet, [WHOLE_NODE_JOB], estimates=said), policies(tmp_path), NOW)
    d = decided(result, "train")
    assert (d.action, d.reason) == (Action.PENDING, Reason.NO_CLUSTER_FITS), table(result)
    assert "scheduler-estimator has room for 3 of 4 pods" in dict(d.cluster_reasons)["gpu-0"]


def test_pods_placed_in_the_cycle_lower_the_estimators_answer(tmp_path: Path):
    fleet = gpu_fleet(karmada_default_models(), n=1)
    said = estimates({("gpu-0", whole_pod_shape()): 6})
    jobs = [
        {"name": "first", "pods": 4, "pod": WHOLE_POD, "at": 1},
        {"name": "second", "pods": 4, "pod": WHOLE_POD, "at": 2},
        {"name": "third", "pods": 2, "pod": WHOLE_POD, "at": 3},
    ]
    result = run_cycle(
        snapshot(fleet, jobs, estimates=said), policies(tmp_path, "Conservative"), NOW
    )
    assert [decided(result, n).action for n in ("first", "second", "third")] == [
        Action.ADMIT,
        Action.PENDING,
        Action.ADMIT,
    ], table(result)


def test_a_failed_estimator_falls_back_to_the_models_and_says_so(tmp_path: Path):
    fleet = gpu_fleet(karmada_default_models(), n=1)
    said = estimates({}, {"gpu-0": "deadline exceeded after 3s"})
    snap = snapshot(fleet, [WHOLE_NODE_JOB], estimates=said)
    result = run_cycle(snap, policies(tmp_path, "Conservative"), NOW)
    d = decided(result, "train")
    assert d.reason == Reason.NO_CLUSTER_FITS, table(result)
    reason = dict(d.cluster_reasons)["gpu-0"]
    assert "scheduler-estimator: deadline exceeded after 3s; resource models used" in reason


@pytest.mark.parametrize("node_shape", ["Optimistic", "Conservative"])
def test_the_node_shape_setting_is_read(tmp_path: Path, node_shape: str):
    assert policies(tmp_path, node_shape).scheduling.placement.node_shape == node_shape


def test_the_annotation_names_a_bad_quantity():
    obj = cluster_object(
        MemberCluster(ClusterSpec("c", nodes=(NodeGroup.of(1, WHOLE_NODE),)), NOW), NOW
    )
    obj["metadata"]["annotations"][ann.NODE_SHAPES] = '[{"cpu": "lots"}]'
    with pytest.raises(Exception, match=r"node-shapes\]\[0\]\.cpu"):
        read_cluster(obj)
    obj["metadata"]["annotations"][ann.NODE_SHAPES] = "[" + "{},"
    with pytest.raises(Exception, match="not JSON"):
        read_cluster(obj)


def test_dataclass_replace_keeps_estimates():
    snap = snapshot([], [])
    assert dataclasses.replace(snap, estimates=estimates({("a", ()): 1})).estimates.replicas
