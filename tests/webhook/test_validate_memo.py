"""A ``/validate/workloads`` review costs what its distinct inputs cost: the SchedulingPolicy's
mapping and every AdmissionPolicy expression are evaluated through memos kept with the PolicySet,
keyed by the parts of ``object``, ``job`` and ``now`` each expression reads. Verdicts are those
of direct evaluation however the memos were filled; a review of known inputs evaluates and
converts nothing; the memos stay within their bounds whatever label values arrive; nothing is
compiled per review, and a new policy version starts with new memos."""

from __future__ import annotations

import copy
import datetime as dt
import functools
import json
import shutil
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.cycle import map_template
from engine.policy import cel
from engine.policy.memo import MemoEvaluator, materialise
from engine.policy.policyset import PolicySet, load_policy_set
from engine.workloads.registry import read_workload
from sandbox.demo.jobs import plan
from tests.conftest import REPO, policy_doc
from tests.webhook.helpers import review
from webhook import validate
from webhook.fit import Fleet
from webhook.review import parse_review
from webhook.validate import validate_workload

NOW = dt.datetime(2026, 1, 1, 9, tzinfo=dt.UTC)
LATER = NOW + dt.timedelta(hours=12)

# AdmissionPolicies beside the example ones that read more: the template's own fields, label
# values echoed in messages, ``now``, and expressions that fail on some templates
EXTRA = {
    "object-fields": """
        match: 'object.kind != "RayJob"'
        enforcement: Warn
        failurePolicy: Ignore
        validations:
          - expression: object.metadata.labels["team"] != "blocked"
            messageExpression: '"team " + object.metadata.labels["team"] + " is blocked"'
          - expression: >-
              !has(object.spec.runPolicy) || object.spec.runPolicy.cleanPodPolicy != "All"
            message: cleanPodPolicy All loses the logs
    """,
    "queue-echo": """
        match: '"fleetgate.io/queue" in job.labels'
        enforcement: Deny
        validations:
          - expression: job.labels["fleetgate.io/queue"] != "frozen"
            messageExpression: >-
              "queue " + job.queue + " of " + job.name + " (priority "
              + string(job.priority) + ") is frozen"
            reason: Invalid
    """,
    "night-shift": """
        enforcement: Warn
        validations:
          - expression: now.getHours() < 18 || job.total["cpu"] <= 64.0
            messageExpression: '"big CPU job after hours: " + string(job.total["cpu"])'
    """,
    "failing": """
        enforcement: DryRun
        validations:
          - expression: int(job.labels["size"]) < 10
            message: size below 10
    """,
}


@functools.cache
def templates() -> tuple[dict[str, Any], ...]:
    return tuple(job.template for job in plan(24, seed=3))


@pytest.fixture(scope="module")
def policy_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("memo-policies")
    shutil.copytree(REPO / "policies", root, dirs_exist_ok=True)
    (root / "kustomization.yaml").unlink()
    for name, spec in EXTRA.items():
        (root / f"{name}.yaml").write_text(policy_doc("AdmissionPolicy", name, spec))
    return root


@pytest.fixture(scope="module")
def fleet() -> Fleet:
    fleet, _ = Fleet.from_files([REPO / "examples" / "fleet-snapshot.yaml"])
    return fleet


def body(template: dict[str, Any]) -> bytes:
    return json.dumps(review(template, uid="memo")).encode()


def judge(template: dict[str, Any], policies: PolicySet, fleet: Fleet, now: dt.datetime) -> Any:
    return validate_workload(parse_review(body(template)), policies, fleet, now)


def direct(self: MemoEvaluator, values: Any) -> tuple[Any, ...]:
    """What ``MemoEvaluator.evaluate`` stands for: every variable converted whole, no memo."""
    activation = cel.activation(
        self.types, **{name: materialise(values[name]) for name in self.types if name in values}
    )
    return tuple(program.evaluate(activation) for program in self.programs)


VALUES = st.sampled_from(["a", "blocked", "frozen", "research-training", "prod-inference", "9"])
LABEL_KEYS = st.sampled_from(
    ["team", "fleetgate.io/queue", "kueue.x-k8s.io/queue-name", "size", "other"]
)
CHANGES = st.fixed_dictionaries(
    {
        "labels": st.dictionaries(LABEL_KEYS, st.one_of(VALUES, st.none()), max_size=3),
        "annotations": st.dictionaries(
            st.sampled_from(["scheduling.volcano.sh/queue-name", "note"]), VALUES, max_size=1
        ),
        "namespace": st.sampled_from([None, "research", "team-research-nlp", "inference"]),
        "priorityClassName": st.sampled_from([None, "", "research-high", "batch-low", "nope"]),
        "cleanPodPolicy": st.sampled_from([None, "All", "None"]),
    }
)


def changed(template: dict[str, Any], change: dict[str, Any]) -> dict[str, Any]:
    """``template`` with labels set (None: removed), annotations, namespace and priority class
    changed; ``cleanPodPolicy`` set where a ``runPolicy`` can be."""
    job = copy.deepcopy(template)
    meta = job["metadata"]
    labels = meta.setdefault("labels", {})
    for key, value in change["labels"].items():
        if value is None:
            labels.pop(key, None)
        else:
            labels[key] = value
    meta.setdefault("annotations", {}).update(change["annotations"])
    if change["namespace"] is not None:
        meta["namespace"] = change["namespace"]
    spec = job["spec"]
    if change["priorityClassName"] is not None and job["kind"] == "PyTorchJob":
        spec.setdefault("runPolicy", {}).setdefault("schedulingPolicy", {})["priorityClass"] = (
            change["priorityClassName"]
        )
    if change["cleanPodPolicy"] is not None and job["kind"] == "PyTorchJob":
        spec.setdefault("runPolicy", {})["cleanPodPolicy"] = change["cleanPodPolicy"]
    return job


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    picks=st.lists(
        st.tuples(st.integers(0, 23), CHANGES, st.sampled_from([NOW, LATER])),
        min_size=2,
        max_size=8,
    ),
    order=st.randoms(use_true_random=False),
)
def test_verdicts_equal_direct_evaluation(policy_dir, fleet, picks, order):
    policies = load_policy_set([policy_dir])  # new memos: filled by this example alone
    cases = [(changed(templates()[i], change), now) for i, change, now in picks]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(MemoEvaluator, "evaluate", direct)
        expected = [judge(template, policies, fleet, now) for template, now in cases]
    runs = list(enumerate(cases)) * 2  # each input twice: a miss, then a hit
    order.shuffle(runs)
    for n, (template, now) in runs:
        assert judge(template, policies, fleet, now) == expected[n], (n, template["metadata"])


def cel_work(patch: pytest.MonkeyPatch) -> dict[str, int]:
    """Counts of CEL evaluations and of values converted into CEL, from now on."""
    counts = {"evaluations": 0, "conversions": 0}
    evaluate, to_cel = cel.CelProgram.evaluate, cel.activation

    def counted_evaluate(self: cel.CelProgram, variables: cel.Activation) -> Any:
        counts["evaluations"] += 1
        return evaluate(self, variables)

    def counted_activation(*args: Any, **values: Any) -> cel.Activation:
        counts["conversions"] += 1
        return to_cel(*args, **values)

    patch.setattr(cel.CelProgram, "evaluate", counted_evaluate)
    patch.setattr(cel, "activation", counted_activation)
    return counts


def test_a_review_of_known_inputs_evaluates_and_converts_nothing(policy_dir, fleet, monkeypatch):
    policies = load_policy_set([policy_dir])
    first = templates()[0]
    assert judge(first, policies, fleet, NOW).allowed
    counts = cel_work(monkeypatch)
    again = copy.deepcopy(first)
    again["metadata"]["name"] = "another-name"  # read by one message, not evaluated here
    again["metadata"]["annotations"]["note"] = "unread"
    again["spec"]["unread"] = {"big": ["x"] * 1000}
    assert judge(again, policies, fleet, NOW).allowed
    # only night-shift's validation, which reads ``now``: evaluated on every review
    assert counts == {"evaluations": 1, "conversions": 1}
    # a new team label: the two expressions that read it miss, and only they
    again["metadata"]["labels"]["team"] = "new-team"
    counts.update(evaluations=0, conversions=0)
    judge(again, policies, fleet, NOW)
    assert counts == {"evaluations": 3, "conversions": 3}


def test_a_miss_converts_only_what_the_expressions_read(policy_dir, fleet, monkeypatch):
    policies = load_policy_set([policy_dir])
    huge = copy.deepcopy(templates()[0])
    huge["spec"]["unread"] = {f"field{n}": {"n": [n] * 10} for n in range(2000)}
    converted: list[Any] = []
    to_cel = cel.activation

    def recorded(*args: Any, **values: Any) -> cel.Activation:
        converted.append(values)
        return to_cel(*args, **values)

    monkeypatch.setattr(cel, "activation", recorded)
    judge(huge, policies, fleet, NOW)
    assert converted  # every expression missed once
    for values in converted:
        assert "unread" not in json.dumps(values.get("object", {}))
        assert "object" not in values.get("job", {})  # job.object is read by no expression


HOSTILE_ANNOTATION = "scheduling.volcano.sh/queue-name"


def test_hostile_label_values_keep_the_memos_within_their_bounds(policy_dir, fleet):
    """Ever new values of what expressions read (a 20 kB queue annotation, the team label):
    the memos turn generations and hold no more than their bounds, and the memory they hold
    is what their weights say."""
    policies = load_policy_set([policy_dir])
    base = copy.deepcopy(templates()[0])
    del base["metadata"]["labels"]["fleetgate.io/queue"]  # the queue comes from the annotation
    judge(base, policies, fleet, NOW)
    admission = next(iter(policies._kept["webhook.admission"].values())).memo
    mapping = policies._kept["cycle.map_template"].first.memo

    def flood(start: int, count: int) -> None:
        for n in range(start, start + count):
            job = copy.deepcopy(base)
            job["metadata"]["annotations"][HOSTILE_ANNOTATION] = f"q{n:05d}-" + "x" * 20_000
            job["metadata"]["labels"]["team"] = f"team-{n}"
            verdict = judge(job, policies, fleet, NOW)
            assert not verdict.allowed and "DNS-1123" in verdict.message

    flood(0, 50)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        flood(50, 1000)
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert mapping.turns >= 3  # entries of 40 kB: about 200 in a generation of 8 MiB
    assert (mapping.max_weight, admission.max_weight) == (16 << 20, 16 << 20)
    for memo in (mapping, admission):
        assert len(memo) <= memo.max_entries and memo.weight <= memo.max_weight
    # what the memos hold is about what their weights say (12 MB both, measured), within
    # their bounds; unbounded, the mapping memo alone would hold 1,000 × 2 × 20 kB = 40 MB
    assert grown < 1.25 * (mapping.weight + admission.weight) + (1 << 20)


def test_expressions_compile_once_per_policy_version(policy_dir, fleet, monkeypatch):
    policies = load_policy_set([policy_dir])
    compiled = [0]
    compile_expression = cel.compile_expression

    def counted(*args: Any, **kwargs: Any) -> Any:
        compiled[0] += 1
        return compile_expression(*args, **kwargs)

    monkeypatch.setattr(cel, "compile_expression", counted)
    for template in templates():
        judge(template, policies, fleet, NOW)
    assert compiled[0] == 0
    kept = policies.kept("webhook.admission", validate._admission_evaluators)
    assert policies.kept("webhook.admission", validate._admission_evaluators) is kept
    assert sum(e.hits for e in kept.values()) > 0
    reloaded = load_policy_set([policy_dir])  # the next version: its own memos, empty
    assert compiled[0] > 0
    fresh = reloaded.kept("webhook.admission", validate._admission_evaluators)
    assert fresh is not kept and all(len(e) == 0 for e in fresh.values())


def test_map_template_keeps_its_evaluators_with_the_policy_set(policy_dir):
    policies = load_policy_set([policy_dir])
    workload = read_workload(templates()[0])
    assert workload is not None
    first = map_template(policies, workload, 0, NOW)
    assert map_template(policies, workload, 0, LATER) == first
    (memo,) = {e.memo for e in policies._kept["cycle.map_template"] if e is not None}
    assert len(memo) == 2  # queue; tenant, priority and gang: hits the second time


def test_values_heavier_than_an_entry_may_be_are_evaluated_and_not_kept(policy_dir, fleet):
    policies = load_policy_set([policy_dir])
    job = copy.deepcopy(templates()[0])
    del job["metadata"]["labels"]["fleetgate.io/queue"]
    job["metadata"]["annotations"][HOSTILE_ANNOTATION] = "x" * 100_000
    assert not judge(job, policies, fleet, NOW).allowed
    mapping = policies._kept["cycle.map_template"].first.memo
    before = (len(mapping), mapping.weight)
    assert not judge(job, policies, fleet, NOW).allowed
    assert (len(mapping), mapping.weight) == before
    assert mapping.weight < mapping.max_entry_weight
