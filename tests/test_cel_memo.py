"""MemoEvaluator: memoised results equal direct evaluation, whatever filled the cache."""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Callable, Collection, Iterator, Mapping
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.policy import cel, defaults
from engine.policy.access import Projector, freeze
from engine.policy.bounded import BoundedMemo
from engine.policy.celcheck import DYN
from engine.policy.memo import MemoEvaluator, materialise
from tests.conftest import REPO

SPEC = yaml.safe_load((REPO / "policies" / "scheduling.yaml").read_text())["spec"]
SHIPPED = [r["expression"] for r in [*SPEC["placement"]["filters"], *SPEC["placement"]["scores"]]]
EXPRESSIONS = [
    *SHIPPED,
    defaults.QUEUE,
    SPEC["queue"],
    "job.components.all(c, c.replicas > 0)",
    'job.components.exists(c, "nvidia.com/gpu" in c.requests)',
    'job.components.size() > 0 && job.components[0].requests["cpu"] >= 1.0',
    "job.labels.map(k, k)",  # order of the map's keys shows in the result
    'job.labels.filter(k, k.startsWith("a"))',
    'has(job.object.a) ? job.object.a : "none"',
    "job.object.a == 1",
    "job.object.a",
    "job.object.b[0]",
    '"a" in job.object',
    "string(job.total['cpu'])",
    "job.total['nvidia.com/gpu'] / 2.0",
    "cluster.labels[job.name]",
    "size(cluster.zones) > 1 && cluster.zones[0] == 'a'",
    "job.priority + 1 > 2",
    "dyn(cluster).ready == true",
]


def compiled(text: str) -> cel.CelProgram:
    program = cel.compile_expression(text, cel.PLACEMENT_VARS, DYN)
    assert isinstance(program, cel.CelProgram), (text, program)
    return program


PROGRAMS = {text: compiled(text) for text in EXPRESSIONS}

WORDS = st.sampled_from(["a", "b", "ab", "h100", "a100", "spot", "prod-inference", ""])
LABEL_KEYS = st.sampled_from(
    ["a", "b", "aa", "fleetgate.io/queue", "gpu.fleetgate.io/model", "fleetgate.io/capacity-type"]
)
NUMBER = st.one_of(
    st.integers(-2, 64),
    st.floats(-2, 64, allow_nan=False),
    st.sampled_from([0.0, -0.0, 1.0, 16.0]),
    st.booleans(),
)
AMOUNTS = st.dictionaries(st.sampled_from(["cpu", "nvidia.com/gpu"]), NUMBER, max_size=2)
LABELS = st.dictionaries(LABEL_KEYS, WORDS, max_size=4)
SCALARS = (WORDS, NUMBER, st.sampled_from([None, 0, ""]))
# kinds of value for a dyn field: a field's few values are mostly of one kind (see sampler)
DYNAMIC = (
    *SCALARS,
    st.lists(st.one_of(SCALARS), max_size=2),
    st.dictionaries(st.sampled_from("ab"), st.one_of(SCALARS), max_size=2),
)
COMPONENT = st.fixed_dictionaries(
    {"name": WORDS, "replicas": st.integers(-1, 3), "requests": AMOUNTS}
)
# field → strategy, or a nested shape whose fields are all optional
JOB = {
    "kind": st.sampled_from(["Job", "SparkApplication", "PyTorchJob"]),
    "name": WORDS,
    "namespace": st.sampled_from(["team-research-x", "prod"]),
    "queue": WORDS,
    "specQueue": WORDS,
    "labels": LABELS,
    "annotations": st.dictionaries(
        st.sampled_from(["scheduling.volcano.sh/queue-name", "x"]), WORDS, max_size=1
    ),
    "total": AMOUNTS,
    "priority": st.integers(-2, 3),
    "components": st.lists(COMPONENT, max_size=2),
    "object": {"a": DYNAMIC, "b": DYNAMIC, "c": DYNAMIC},
    "unread": WORDS,
}
CLUSTER = {
    "name": WORDS,
    "labels": LABELS,
    "allocatable": AMOUNTS,
    "zones": st.lists(WORDS, max_size=3),
    "ready": st.booleans(),
    "region": WORDS,
}
OPTIONAL = {"labels", "object", "unread", "region"}
_ABSENT = object()


def sampler(
    data: st.DataObject, shape: Mapping[str, Any], optional: Collection[str]
) -> Callable[[], dict[str, Any]]:
    """Inputs from a few distinct values per field: they share some fields and differ in others.

    A field given as a tuple of strategies gets values of one kind, plus one of any kind.
    """
    fields: list[tuple[str, list[Callable[[], Any]]]] = []
    for name, spec in shape.items():
        if isinstance(spec, Mapping):
            choices = [sampler(data, spec, optional=spec.keys())]
        else:
            if isinstance(spec, tuple):
                kind = data.draw(st.sampled_from(spec))
                spec = st.one_of(spec)
            else:
                kind = spec
            values = data.draw(st.lists(kind, min_size=2, max_size=3, unique_by=repr))
            values.append(data.draw(spec))
            choices = [lambda v=v: v for v in values]
        if name in optional:
            choices.append(lambda: _ABSENT)
        fields.append((name, choices))

    def sample() -> dict[str, Any]:
        built = {}
        for name, choices in fields:
            value = choices[data.draw(st.integers(0, len(choices) - 1))]()
            if value is not _ABSENT:
                built[name] = value
        return built

    return sample


def retyped(value: Any) -> list[Any]:
    """The same number as another CEL type: 1 → 1.0 → True → 1, 0.0 → -0.0."""
    if isinstance(value, bool):
        return [int(value)]
    if isinstance(value, int):
        return [float(value)]
    if isinstance(value, float):
        alternatives = [-value] if value == 0 else [v for v in (True, int(value)) if v == value]
        return alternatives[:1]
    return []


def variants(values: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The input, then inputs that differ only in unread fields or in a read field's type."""
    job, cluster = values["job"], values["cluster"]
    yield values
    yield {"job": job | {"uid": "other", "unread": "z"}, "cluster": cluster | {"region": "r"}}
    if "labels" in job:
        yield {"job": job | {"labels": dict(reversed(job["labels"].items()))}, "cluster": cluster}
    for field in ("total", "object"):
        for key, value in job.get(field, {}).items():
            for other in retyped(value):
                yield {"job": job | {field: job[field] | {key: other}}, "cluster": cluster}
    for key, value in cluster["allocatable"].items():
        for other in retyped(value):
            allocatable = cluster["allocatable"] | {key: other}
            yield {"job": job, "cluster": cluster | {"allocatable": allocatable}}


def inputs(data: st.DataObject) -> Iterator[dict[str, Any]]:
    job, cluster = sampler(data, JOB, OPTIONAL), sampler(data, CLUSTER, OPTIONAL)
    for _ in range(data.draw(st.integers(2, 5))):
        yield from variants({"job": job(), "cluster": cluster()})


def outcome(evaluate: Any) -> Any:
    """The results, frozen so 1, 1.0 and True differ, or the type of exception raised."""
    try:
        return freeze(evaluate())
    except (AttributeError, TypeError, ValueError, KeyError, IndexError) as err:
        return ("raised", type(err))


def direct(programs: list[cel.CelProgram], values: dict[str, Any]) -> tuple[Any, ...]:
    activation = cel.activation(cel.PLACEMENT_VARS, **values)
    return tuple(program.evaluate(activation) for program in programs)


def check_against_direct(programs: list[cel.CelProgram], data: st.DataObject) -> None:
    memo = MemoEvaluator(programs, cel.PLACEMENT_VARS)
    for values in inputs(data):
        expected = outcome(lambda v=values: direct(programs, v))
        assert outcome(lambda v=values: memo.evaluate(v)) == expected, values


@pytest.mark.parametrize("text", EXPRESSIONS)
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_memoised_results_equal_direct_evaluation(text, data):
    check_against_direct([PROGRAMS[text]], data)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_memoised_groups_equal_direct_evaluation(data):
    texts = data.draw(st.lists(st.sampled_from(EXPRESSIONS), min_size=2, max_size=6, unique=True))
    check_against_direct([PROGRAMS[text] for text in texts], data)


def job(**labels: str) -> dict[str, Any]:
    return {
        "kind": "PyTorchJob",
        "name": "train",
        "queue": "research",
        "labels": {"gpu.fleetgate.io/model": "h100", **labels},
        "total": {"cpu": 16.0, "nvidia.com/gpu": 32.0},
    }


CLUSTER_H100 = {
    "name": "east",
    "labels": {"gpu.fleetgate.io/model": "h100"},
    "allocatable": {"nvidia.com/gpu": 64.0},
}


def test_jobs_differing_in_unread_labels_miss_once():
    memo = MemoEvaluator([PROGRAMS[text] for text in SHIPPED], cel.PLACEMENT_VARS)
    results = {
        memo.evaluate({"job": job(team=f"t{i}"), "cluster": CLUSTER_H100}) for i in range(1000)
    }
    assert results == {(True, True, True, 1.0, 0.0)}
    assert (memo.misses, memo.hits) == (1, 999)
    assert len(memo) == 1


def test_evaluate_key_uses_the_callers_key():
    memo = MemoEvaluator([PROGRAMS[SHIPPED[1]]], cel.PLACEMENT_VARS)
    values = {"job": job(), "cluster": CLUSTER_H100}
    key = memo.key(values)
    assert memo.evaluate_key(key, values) == (True,)
    assert memo.evaluate(values) == (True,)
    assert (memo.misses, memo.hits) == (1, 1)


def test_cache_keeps_at_most_max_entries_and_what_was_used_lately():
    memo = MemoEvaluator([compiled("job.name")], cel.PLACEMENT_VARS, max_entries=4)
    for name in "abcdef":
        assert memo.evaluate({"job": {"name": name}}) == (name,)
        assert len(memo) <= 4
    assert memo.misses == 6
    assert memo.evaluate({"job": {"name": "e"}}) == ("e",)  # the last two generations: kept
    assert memo.evaluate({"job": {"name": "a"}}) == ("a",)  # two turns ago: gone
    assert (memo.hits, memo.misses) == (1, 7)


def test_errors_are_memoised_as_values():
    memo = MemoEvaluator([compiled('job.labels["team"]')], cel.PLACEMENT_VARS)
    first, second = (memo.evaluate({"job": job()}), memo.evaluate({"job": job(x="1")}))
    assert isinstance(first[0], cel.CelError)
    assert first == second
    assert memo.hits == 1


def test_roots_outside_the_types_are_ignored():
    program = compiled("has(queue.name) ? queue.name : job.name")
    memo = MemoEvaluator([program], {"job": cel.JOB})
    assert memo.projector.paths == (("job", "name"),)
    first = memo.evaluate({"job": {"name": "a"}, "queue": {"name": "q1"}})
    assert first == ("a",)  # queue is not a variable of this evaluator: has() is false
    assert memo.evaluate({"job": {"name": "a"}, "queue": {"name": "q2"}}) == first


class Lazy(Mapping[str, Any]):
    def __init__(self, data: dict[str, Any]):
        self.data = data

    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.data)

    def __len__(self) -> int:
        return len(self.data)


def test_lazy_mappings_are_materialised_for_evaluation():
    memo = MemoEvaluator([PROGRAMS[text] for text in SHIPPED], cel.PLACEMENT_VARS)
    lazy_job = Lazy(job() | {"labels": Lazy(job()["labels"]), "components": [Lazy({"a": 1})]})
    values = Lazy({"job": lazy_job, "cluster": CLUSTER_H100})
    assert memo.evaluate(values) == memo.evaluate({"job": job(), "cluster": CLUSTER_H100})
    assert materialise(lazy_job)["components"] == [{"a": 1}]
    plain = job()
    assert materialise(plain) is plain


def test_concurrent_use_gives_direct_results():
    programs = [PROGRAMS[text] for text in SHIPPED]
    memo = MemoEvaluator(programs, cel.PLACEMENT_VARS, max_entries=8)
    inputs = [
        {"job": job() | {"queue": q, "kind": k}, "cluster": CLUSTER_H100 | {"labels": labels}}
        for q in ("prod-inference", "research")
        for k in ("SparkApplication", "Job")
        for labels in ({}, {"fleetgate.io/capacity-type": "spot"}, {"gpu.fleetgate.io/model": "a"})
    ]
    expected = [direct(programs, v) for v in inputs]
    failures: list[int] = []

    def worker(offset: int) -> None:
        for i in range(200):
            n = (i + offset) % len(inputs)
            if memo.evaluate(inputs[n]) != expected[n]:
                failures.append(n)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []


def test_rejects_a_cache_without_two_generations():
    with pytest.raises(ValueError, match="max_entries"):
        MemoEvaluator([], cel.PLACEMENT_VARS, max_entries=1)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_pruned_value_has_the_projection_of_the_whole(data):
    """``Projector.prune`` keeps what the paths read: a miss evaluates over it."""
    texts = data.draw(st.lists(st.sampled_from(EXPRESSIONS), min_size=1, max_size=6, unique=True))
    projector = Projector(path for text in texts for path in PROGRAMS[text].accesses)
    for values in inputs(data):
        for root, value in values.items():
            pruned = projector.prune(root, value)
            assert projector.part(root, pruned) == projector.part(root, value), (root, value)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_miss_equals_direct_evaluation(data):
    """A new memo for each input: every evaluation is a miss, over the pruned values."""
    texts = data.draw(st.lists(st.sampled_from(EXPRESSIONS), min_size=1, max_size=6, unique=True))
    programs = [PROGRAMS[text] for text in texts]
    for values in inputs(data):
        memo = MemoEvaluator(programs, cel.PLACEMENT_VARS)
        expected = outcome(lambda v=values: direct(programs, v))
        assert outcome(lambda v=values, m=memo: m.evaluate(v)) == expected, values
        assert memo.misses == 1


def test_prune_keeps_only_the_keys_the_paths_name():
    projector = Projector([("job", "labels", "team"), ("job", "object", "spec", "a"), ("now",)])
    job = {
        "labels": {"team": "a", "other": "b"},
        "object": {"spec": {"a": [1, 2], "b": {"big": "x"}}, "status": {}},
        "name": "unread",
    }
    assert projector.prune("job", job) == {
        "labels": {"team": "a"},
        "object": {"spec": {"a": [1, 2]}},
    }
    assert projector.prune("job", {"labels": "a string"}) == {"labels": "a string"}
    assert projector.prune("now", "2026") == "2026"
    assert projector.prune("cluster", job) is job  # no path: the value itself
    indexed = Projector([("job", "components", 0, "name")])
    components = [{"name": "a", "replicas": 1}]
    assert indexed.prune("job", {"components": components, "x": 1}) == {"components": components}


def test_evaluators_sharing_a_memo_keep_their_results_apart():
    shared = BoundedMemo(max_entries=100)
    names = MemoEvaluator([compiled("job.name")], cel.PLACEMENT_VARS, memo=shared)
    shouted = MemoEvaluator([compiled('job.name + "!"')], cel.PLACEMENT_VARS, memo=shared)
    assert names.key({"job": {"name": "a"}}) == shouted.key({"job": {"name": "a"}})
    assert names.evaluate({"job": {"name": "a"}}) == ("a",)
    assert shouted.evaluate({"job": {"name": "a"}}) == ("a!",)
    assert names.evaluate({"job": {"name": "a"}}) == ("a",)
    assert len(shared) == 2 and (names.hits, shouted.hits) == (1, 0)


def test_results_that_read_a_volatile_root_are_not_kept():
    program = compiled("job.name + string(now.getHours())")
    memo = MemoEvaluator([program], cel.PLACEMENT_VARS, volatile=("now",))
    other = MemoEvaluator([compiled("job.name")], cel.PLACEMENT_VARS, volatile=("now",))
    for hour in (1, 2, 1):
        now = dt.datetime(2026, 1, 1, hour, tzinfo=dt.UTC)
        values = {"job": {"name": "a"}, "now": now}
        assert memo.evaluate(values) == direct([program], values) == (f"a{hour}",)
        other.evaluate(values)
    assert (len(memo), memo.misses) == (0, 3)
    assert (len(other), other.misses, other.hits) == (1, 1, 2)  # it does not read now
