"""The default grades see whole nodes: an empty node of each declared shape is promised its
whole allocatable, by Karmada's rule and by the cycle's reading of the Cluster."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from engine import annotations as ann
from engine import vectors
from engine.cycle.jobs.model import PodGroup
from engine.cycle.placement.capacity import ClusterState
from engine.fleet.clusters import read_cluster
from engine.fleet.model import ResourceModel
from engine.fleet.nodeshape import annotation, describe, promised, unseen_shapes
from engine.members import ClusterSpec, MemberCluster, NodeGroup, cluster_object
from engine.members.fleetfile import parse_fleet
from engine.members.grades import (
    INFINITE,
    default_models,
    fleet_warnings,
    karmada_default_models,
    modelled_resources,
    node_grade,
)
from engine.resources import PODS, Resources
from tests.members.builders import GI, GPU, T0, at, job

WHOLE = {"cpu": 96, "memory": 768 * GI, GPU: 8}
CPU_NODE = {"cpu": 64, "memory": 256 * GI}


def member(*groups: tuple[int, dict[str, int]]) -> MemberCluster:
    nodes = tuple(NodeGroup.of(n, shape) for n, shape in groups)
    return MemberCluster(ClusterSpec("east", nodes=nodes), T0)


def state(cluster: MemberCluster) -> ClusterState:
    return ClusterState(read_cluster(cluster_object(cluster, at(0))))


def pods(count: int, requests: dict[str, int]) -> list[PodGroup]:
    milli = vectors.capacity_milli(Resources({**requests, PODS: 1}))
    return [PodGroup(milli, count)]


def fits(cluster: ClusterState, groups: Sequence[PodGroup]) -> bool:
    return cluster.fits(groups, vectors.total((g.requests, g.count) for g in groups))


def karmada_valid(models: Sequence[ResourceModel]) -> None:
    """Karmada's ValidateClusterResourceModels, and strictly increasing minimums."""
    names = list(models[0].ranges)
    for i, model in enumerate(models):
        assert model.grade == i and list(model.ranges) == names
        for name, (low, high) in model.ranges.items():
            assert low < high
            assert low == 0 if i == 0 else low == models[i - 1].ranges[name][1]
            assert high == (INFINITE if i == len(models) - 1 else models[i + 1].ranges[name][0])


def test_a_whole_gpu_node_is_one_grade_with_a_grade_at_every_gpu_count():
    models = default_models((NodeGroup.of(40, WHOLE),))
    karmada_valid(models)
    assert [m.ranges[GPU][0] for m in models] == list(range(9))
    assert [m.ranges["cpu"][0] for m in models] == [12 * g for g in range(9)]
    assert models[-1].ranges["memory"][0] == 768 * GI
    # a 1-core pod on the node hides one GPU, not four (the grade at 7 GPUs, 84 cores)
    busy = {"cpu": Fraction(95), "memory": Fraction(764 * GI), GPU: Fraction(8)}
    assert node_grade(models, busy) == 7


def test_four_clusters_of_whole_node_pods_fit_every_node():
    cluster = state(member((40, WHOLE)))
    assert fits(cluster, pods(40, {"cpu": 96, "memory": 768 * GI, GPU: 8}))
    assert not fits(cluster, pods(41, {"cpu": 96, "memory": 768 * GI, GPU: 8}))


def test_a_mixed_cluster_is_graded_on_cpu_and_memory_so_its_cpu_node_is_seen():
    mixed = member((1, WHOLE), (1, CPU_NODE))
    assert modelled_resources(mixed.spec.nodes) == ("cpu", "memory")
    cluster = state(mixed)
    assert fits(cluster, pods(2, {"cpu": 60, "memory": 200 * GI}))  # one on each node
    assert not fits(cluster, pods(3, {"cpu": 60, "memory": 200 * GI}))
    assert fits(cluster, pods(1, {"cpu": 96, "memory": 768 * GI, GPU: 8}))  # the whole GPU node


def test_shapes_of_several_gpu_counts_each_get_their_own_grade():
    four = {"cpu": 64, "memory": 512 * GI, GPU: 4}
    models = default_models((NodeGroup.of(2, four), NodeGroup.of(2, WHOLE)))
    karmada_valid(models)
    for shape in (four, WHOLE):
        assert promised(models, Resources(shape))[1] == Resources(shape)


def test_a_shape_that_cannot_have_a_grade_of_its_own_is_warned_of():
    # more cores than the 8-GPU node, fewer GPUs: minimums cannot increase on every resource
    wide = {"cpu": 128, "memory": 1024 * GI, GPU: 4}
    nodes = (NodeGroup.of(2, wide), NodeGroup.of(2, WHOLE))
    models = default_models(nodes)
    karmada_valid(models)
    assert promised(models, Resources(WHOLE))[1] == Resources(WHOLE)
    (warning,) = unseen_shapes("east", models, [g.allocatable for g in nodes])
    assert warning.startswith("cluster east: an empty node of 4 nvidia.com/gpu, 128 cpu, 1Ti")
    assert "is promised only 48 cpu, 384Gi memory by its resource models (grade 4)" in warning


def test_karmadas_defaults_promise_a_96_core_node_64_cores():
    (warning,) = unseen_shapes("gpu-east", karmada_default_models(), [Resources(WHOLE)])
    assert warning == (
        "cluster gpu-east: an empty node of 8 nvidia.com/gpu, 96 cpu, 768Gi memory is promised "
        "only 64 cpu, 512Gi memory by its resource models (grade 7): whole-node pods are at best "
        "a maybe; see docs/node-shape.md"
    )


def test_a_member_without_nodes_gets_karmadas_defaults():
    assert default_models(()) == karmada_default_models()


_shape = st.fixed_dictionaries(
    {
        "cpu": st.integers(500, 512_000).map(lambda m: Fraction(m, 1000)),
        "memory": st.integers(512, 512 * 1024).map(lambda mi: mi * 2**20),
    },
    optional={GPU: st.integers(1, 16)},
)


@settings(max_examples=200, deadline=None)
@given(st.lists(_shape, min_size=1, max_size=5))
def test_every_shape_is_seen_whole_or_warned_of(shapes):
    nodes = tuple(NodeGroup.of(1, shape) for shape in shapes)
    models = default_models(nodes)
    karmada_valid(models)
    names = modelled_resources(nodes)
    assert set(models[0].ranges) == set(names)
    warned = "\n".join(unseen_shapes("c", models, [g.allocatable for g in nodes]))
    for node in nodes:
        grade, mins = promised(models, node.allocatable)
        whole = all(mins.get_amount(r) == node.allocatable[r] for r in names)
        said = f"node of {describe(node.allocatable, names)} is promised only"
        assert whole or (said in warned and f"(grade {grade})" in warned)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(1, 8), min_size=1, max_size=4, unique=True))
def test_a_chain_of_shapes_is_seen_whole_by_the_cycle(gpu_counts):
    # larger nodes on every resource: each gets a grade at its whole allocatable
    shapes = [{"cpu": 16 * g, "memory": 128 * g * GI, GPU: g} for g in sorted(gpu_counts)]
    cluster = member(*((2, s) for s in shapes))
    for shape in shapes:
        assert promised(default_models(cluster.spec.nodes), Resources(shape))[1] == shape
    view = state(cluster)
    everything = [g for s in shapes for g in pods(2, s)]
    assert fits(view, everything)


def test_the_cluster_object_declares_the_node_shapes():
    mixed = member((1, WHOLE), (3, CPU_NODE), (2, CPU_NODE))
    view = read_cluster(cluster_object(mixed, at(0)))
    assert view.node_shapes == (
        Resources({**CPU_NODE, PODS: 110}),
        Resources({**WHOLE, PODS: 110}),
    )
    mixed.submit(job("a", cpu=60), at(0))
    mixed.step(at(0))
    assert read_cluster(cluster_object(mixed, at(1))).node_shapes == view.node_shapes


def test_a_fleet_file_can_ask_for_karmadas_defaults():
    text = """\
        clusters:
        - name: gpu-east
          nodes: [{count: 2, shape: {cpu: 96, memory: 768Gi, nvidia.com/gpu: 8}}]
          resourceModels: KarmadaDefaults
        """
    fleet = parse_fleet(Path("fleet.yaml"), textwrap.dedent(text))
    (cluster,) = fleet.clusters
    assert cluster.resource_models == karmada_default_models()
    view = read_cluster(cluster_object(MemberCluster(cluster, T0), at(0)))
    assert view.allocatable_modelings[7] == (7, 2)  # 96 cores / 768Gi: grade 7
    assert fleet_warnings(fleet)[0].startswith("cluster gpu-east: an empty node of 8 nvidia")


def test_the_simulators_cluster_views_carry_the_node_shapes():
    from simulate.objects import ClusterReader

    mixed = member((1, WHOLE), (1, CPU_NODE))
    assert ClusterReader(mixed, at(0)).view().node_shapes == (
        Resources({**CPU_NODE, PODS: 110}),
        Resources({**WHOLE, PODS: 110}),
    )


def test_the_annotation_keeps_at_most_64_shapes_and_still_bounds_every_node():
    chain = [{"cpu": i, "memory": i * GI} for i in range(1, 71)]  # each covers the smaller
    assert json.loads(annotation(chain)) == [{"cpu": "70", "memory": "70Gi"}]
    trade = [{"cpu": i, "memory": (71 - i) * GI} for i in range(1, 71)]  # none covers another
    shapes = json.loads(annotation(trade))
    assert len(shapes) == ann.MAX_NODE_SHAPES
    assert shapes[-1] == {"cpu": "70", "memory": "7Gi"}  # the merged rest: their largest amounts
    assert len(json.loads(annotation(trade[:10]))) == 10  # under the cap: every shape as is
