"""What CEL expressions read (access paths) and the keys projected from those paths."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pytest
import yaml

from engine.policy import cel, defaults
from engine.policy.access import MISSING, MISSING_ROOT, STOPPED, Projector, freeze, minimal
from engine.policy.celcheck import DYN
from tests.conftest import REPO


def paths(text: str, variables: Mapping[str, Any] = cel.PLACEMENT_VARS) -> set[tuple]:
    program = cel.compile_expression(text, variables, DYN)
    assert isinstance(program, cel.CelProgram), program
    return set(program.accesses)


def shipped_placement() -> dict[str, str]:
    spec = yaml.safe_load((REPO / "policies" / "scheduling.yaml").read_text())["spec"]
    rules = [*spec["placement"]["filters"], *spec["placement"]["scores"]]
    return {rule["name"]: rule["expression"] for rule in rules}


GPU_MODEL = "gpu.fleetgate.io/model"
CAPACITY = "fleetgate.io/capacity-type"
SHIPPED = {
    "gpu-jobs-on-gpu-clusters": {
        ("job", "total", "nvidia.com/gpu"),
        ("cluster", "allocatable", "nvidia.com/gpu"),
    },
    "requested-gpu-model": {("job", "labels", GPU_MODEL), ("cluster", "labels", GPU_MODEL)},
    "no-spot-for-inference": {("job", "queue"), ("cluster", "labels", CAPACITY)},
    "big-gangs-on-h100": {("job", "total", "nvidia.com/gpu"), ("cluster", "labels", GPU_MODEL)},
    "spark-on-spot": {("job", "kind"), ("cluster", "labels", CAPACITY)},
}


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_shipped_placement_rules_read_single_keys(name):
    assert paths(shipped_placement()[name]) == SHIPPED[name]


def test_default_queue_expression_reads_its_hints_only():
    assert paths(defaults.QUEUE, cel.MAPPING_VARS) == {
        ("job", "labels", "fleetgate.io/queue"),
        ("job", "annotations", "scheduling.volcano.sh/queue-name"),
        ("job", "labels", "kueue.x-k8s.io/queue-name"),
        ("job", "specQueue"),
    }


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("job.kind", {("job", "kind")}),
        ("job.labels.team == 'a'", {("job", "labels", "team")}),
        ("job.components[0].requests['cpu'] > 1.0", {("job", "components", 0, "requests", "cpu")}),
        ('job.name.startsWith("x")', {("job", "name")}),
        ("job.name.size() > 3", {("job", "name")}),
        ("size(job.labels) > 0", {("job", "labels")}),
        ("has(job.labels.team)", {("job", "labels", "team")}),
        ("has(job.object.spec.suspend)", {("job", "object", "spec", "suspend")}),
        ('"team" in job.labels', {("job", "labels", "team")}),
        ("job.name in job.labels", {("job", "name"), ("job", "labels")}),
        ("job.kind in ['Job', 'JobSet']", {("job", "kind")}),
        ("1 in job.object.list", {("job", "object", "list")}),  # membership, not an index
        ("job.labels[job.name] == 'x'", {("job", "labels"), ("job", "name")}),
        ("job.object.items[-1] == 1", {("job", "object", "items")}),
        ("job.object.items[1u] == 1", {("job", "object", "items")}),
        ("job.labels['a\\'b'] == ''", {("job", "labels")}),  # escapes: not decoded, whole map
        ("job.labels[r'team'] == ''", {("job", "labels")}),
        ("job.components.all(c, c.replicas > 0)", {("job", "components")}),
        (
            "job.components.exists(c, c.requests.exists(r, r == cluster.name))",
            {("job", "components"), ("cluster", "name")},
        ),
        ("job.labels.map(k, k + job.name)", {("job", "labels"), ("job", "name")}),
        ("job.components.map(c, c.replicas > 0, c.name)", {("job", "components")}),
        ("job.components.all(job, job.replicas > 0)", {("job", "components")}),  # shadowed
        ("dyn(job).kind == 'Job'", {("job",)}),
        ("job == job", {("job",)}),
        ("job.kind == 'Job' && dyn(job) != null", {("job",)}),  # minimal: job covers job.kind
        ("(job).labels['team'] == ''", {("job", "labels", "team")}),
        (
            "(true ? job.labels : cluster.labels)['a'] == ''",
            {("job", "labels"), ("cluster", "labels")},
        ),
        ("now > job.createdAt", {("now",), ("job", "createdAt")}),
        ("quantity(job.labels['mem']) > 1.0", {("job", "labels", "mem")}),
        ("[1, 2].all(x, x > 0)", set()),
    ],
)
def test_paths(text, expected):
    assert paths(text) == expected


def test_only_declared_variables_are_roots():
    assert paths("job.kind", {"job": cel.JOB}) == {("job", "kind")}
    assert paths("int(1) == 1", {"job": cel.JOB}) == set()


def test_minimal_drops_paths_under_a_prefix():
    assert minimal([("a", "b"), ("a",), ("c", 1), ("c", 1, "d")]) == {("a",), ("c", 1)}


# -- projection ---------------------------------------------------------------------------------


class Lazy(Mapping[str, Any]):
    """A Mapping that only allows lookups (what walking a path may use)."""

    def __init__(self, data: dict[str, Any]):
        self.data = data

    def __contains__(self, key: object) -> bool:
        return key in self.data

    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    def __iter__(self) -> Iterator[str]:
        raise AssertionError("walking a path must not iterate")

    def __len__(self) -> int:
        raise AssertionError("walking a path must not take len()")


def test_key_reads_only_the_paths():
    projector = Projector([("job", "labels", "team"), ("job", "kind")])
    a = {"job": {"kind": "Job", "labels": {"team": "x", "other": "1"}, "name": "a"}}
    b = {"job": {"kind": "Job", "labels": {"team": "x", "other": "2"}, "name": "b"}}
    assert projector.key(a) == projector.key(b)
    assert hash(projector.key(a)) == hash(projector.key(b))


def test_key_tags_types():
    projector = Projector([("job", "object", "x")])
    keys = {projector.key({"job": {"object": {"x": v}}}) for v in (1, 1.0, True, "1", None)}
    assert len(keys) == 5
    zero, negative_zero = ({"job": {"object": {"x": v}}} for v in (0.0, -0.0))
    assert projector.key(zero) != projector.key(negative_zero)


def test_key_tells_missing_from_null_and_where_it_is_missing():
    projector = Projector([("job", "labels", "team")])
    keys = [
        projector.key({}),
        projector.key({"job": {}}),
        projector.key({"job": {"labels": {}}}),
        projector.key({"job": {"labels": {"team": None}}}),
        projector.key({"job": {"labels": None}}),
    ]
    assert len(set(keys)) == 5
    assert keys[0] == (MISSING_ROOT,)
    assert keys[2] == (((MISSING, 2),),)


def test_key_records_the_value_where_a_step_does_not_apply():
    projector = Projector([("job", "zones", 0)])
    assert projector.part("job", {"zones": ["a", "b"]}) == ("a",)
    assert projector.part("job", {"zones": []}) == ((MISSING, 2),)
    # CEL indexes strings too ("abc"[0] == "a"), so the whole string goes in the key
    assert projector.part("job", {"zones": "abc"}) == ((STOPPED, 2, "abc"),)
    # an int step into a mapping records the mapping (Python's dict conflates 1, 1.0 and True)
    assert projector.part("job", {"zones": {0: "a"}}) == ((STOPPED, 2, freeze({0: "a"})),)
    # where the walk stopped is part of the key
    deep = Projector([("job", "a", "b")])
    assert deep.part("job", "s") == ((STOPPED, 1, "s"),)
    assert deep.part("job", {"a": "s"}) == ((STOPPED, 2, "s"),)


def test_key_is_built_from_one_part_per_variable():
    projector = Projector([("job", "kind"), ("cluster", "name"), ("job", "labels", "a")])
    assert projector.roots == ("cluster", "job")
    job, cluster = {"kind": "Job", "labels": {"a": "1"}}, {"name": "east"}
    assert projector.part("job", job) == ("Job", "1")  # in paths order
    parts = (projector.part("cluster", cluster), projector.part("job", job))
    assert projector.key({"job": job, "cluster": cluster, "queue": {}}) == parts
    assert projector.key({"job": job}) == (MISSING_ROOT, parts[1])


def test_key_freezes_containers_in_order():
    projector = Projector([("job", "labels")])
    ab = projector.key({"job": {"labels": {"a": "1", "b": "2"}}})
    ba = projector.key({"job": {"labels": {"b": "2", "a": "1"}}})
    assert ab != ba  # job.labels.map(k, k) gives ["a", "b"] or ["b", "a"]
    assert freeze([1, {"a": [True]}]) == freeze([1, {"a": [True]}])
    assert freeze([1]) != freeze((1,)) != freeze([True])


def test_key_walks_lazy_mappings_by_lookup_only():
    projector = Projector([("job", "labels", "team"), ("job", "kind"), ("cluster", "name")])
    lazy = Lazy({"job": Lazy({"kind": "Job", "labels": Lazy({"team": "x"})})})
    plain = {"job": {"kind": "Job", "labels": {"team": "x"}}}
    assert projector.key(lazy) == projector.key(plain)
