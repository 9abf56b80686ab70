"""``has()`` inside other expressions: ``!has(x.f)``, ``has(x.f) ? a : b``, ``&&``, ``||``.

cel-python's compiled runner made ``has()`` a Python ``bool``, which CEL's ``!``, ``? :``,
``&&`` and ``||`` rejected at run time ("no such overload"), while a bare ``has(x.f)`` worked.
Kubernetes users write these forms in every ValidatingAdmissionPolicy, so each variable set is
covered, over map keys, ``dyn`` fields and record fields, directly and through MemoEvaluator.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

import pytest

from engine.policy import cel
from engine.policy.celcheck import DYN
from engine.policy.memo import MemoEvaluator
from tests.conftest import policy_doc

NOW = dt.datetime(2026, 11, 21, 12, 0, tzinfo=dt.UTC)

# Per variable set: values where the fields tested are present ("full"), and where they are not.
FULL: Mapping[str, Mapping[str, Any]] = {
    "mapping": {
        "job": {
            "kind": "PyTorchJob",
            "tenant": "research",
            "labels": {"team": "ml"},
            "object": {"spec": {"suspend": False}, "status": None},
        },
        "now": NOW,
    },
    "placement": {
        "job": {"kind": "PyTorchJob", "labels": {"team": "ml"}},
        "cluster": {"name": "east", "labels": {"zone": "a"}},
        "queue": {"name": "research", "parent": "root"},
        "now": NOW,
    },
    "admission": {
        "object": {
            "metadata": {"name": "train", "labels": {"team": "ml"}},
            "spec": {"replicas": 3},
            "status": None,
        },
        "job": {"kind": "PyTorchJob", "labels": {"team": "ml"}},
        "now": NOW,
    },
    "scope": {
        "binding": {"metadata": {"labels": {"team": "ml"}}, "spec": {"placement": {}}},
        "resource": {"kind": "Job", "namespace": "team-a", "name": "train"},
        "now": NOW,
    },
}
BARE: Mapping[str, Mapping[str, Any]] = {
    "mapping": {"job": {"kind": "PyTorchJob", "labels": {}, "object": {}}, "now": NOW},
    "placement": {
        "job": {"kind": "PyTorchJob", "labels": {}},
        "cluster": {"name": "west", "labels": {}},
        "queue": {"name": "research"},
        "now": NOW,
    },
    "admission": {
        "object": {"metadata": {"name": "train"}, "spec": {}},
        "job": {"kind": "PyTorchJob", "labels": {}},
        "now": NOW,
    },
    "scope": {
        "binding": {"metadata": {}, "spec": {}},
        "resource": {"kind": "Job", "name": "train"},
        "now": NOW,
    },
}
VARIABLES: Mapping[str, Mapping[str, Any]] = {
    "mapping": cel.MAPPING_VARS,
    "placement": cel.PLACEMENT_VARS,
    "admission": cel.ADMISSION_VARS,
    "scope": cel.SCOPE_VARS,
}

# (variable set, expression, result with FULL values, result with BARE values)
CASES: list[tuple[str, str, Any, Any]] = [
    # map keys
    ("mapping", "!has(job.labels.team)", False, True),
    ("mapping", 'has(job.labels.team) ? job.labels.team : "none"', "ml", "none"),
    ("mapping", 'has(job.labels.team) && job.labels.team == "ml"', True, False),
    ("mapping", '!has(job.labels.team) || job.labels.team == "ml"', True, True),
    ("mapping", "has(job.labels.team) && has(job.labels.team)", True, False),
    ("mapping", "!(has(job.labels.team))", False, True),
    ("mapping", "!!has(job.labels.team)", True, False),
    ("mapping", "type(has(job.labels.team)) == bool", True, True),
    ("mapping", "[has(job.labels.team)] == [true]", True, False),
    # dyn fields, including one whose value is null
    ("mapping", "has(job.object.spec) ? 1 : 2", 1, 2),
    ("mapping", "!has(job.object.spec.suspend)", False, True),
    ("mapping", "has(job.object.status) || has(job.object.spec)", True, False),
    ("mapping", "!dyn(has(job.object.spec))", False, True),
    # record fields
    ("mapping", "!has(job.tenant)", False, True),
    ("mapping", 'has(job.tenant) ? job.tenant : "default"', "research", "default"),
    ("mapping", "has(job.kind) && !has(job.tenant)", False, True),
    ("mapping", "has(job.tenant) || has(job.kind)", True, True),
    ("placement", "!has(cluster.labels.zone)", False, True),
    ("placement", "has(cluster.labels.zone) ? 2.0 : 0.5", 2.0, 0.5),
    ("placement", "has(queue.parent) && has(job.labels.team)", True, False),
    ("placement", '!has(cluster.labels.zone) || cluster.labels.zone == "a"', True, True),
    ("placement", "job.kind == 'PyTorchJob' && !has(queue.parent)", False, True),
    ("admission", "!has(object.metadata.labels.team)", False, True),
    ("admission", "!has(object.metadata.labels) || !has(object.metadata.labels.team)", False, True),
    ("admission", "has(object.spec.replicas) ? object.spec.replicas : 1", 3, 1),
    ("admission", "has(object.status) && has(job.labels.team)", True, False),
    ("admission", "!has(job.labels.team) || has(object.metadata.labels.team)", True, True),
    ("scope", "!has(binding.metadata.labels.team)", False, True),
    ("scope", 'has(resource.namespace) ? resource.namespace : "-"', "team-a", "-"),
    ("scope", "has(binding.spec.placement) || !has(resource.namespace)", True, True),
    ("scope", "has(binding.metadata.labels) && has(resource.namespace)", True, False),
]
IDS = [f"{kind}:{text}" for kind, text, _, _ in CASES]


def compiled(kind: str, text: str) -> cel.CelProgram:
    program = cel.compile_expression(text, VARIABLES[kind], DYN)
    assert isinstance(program, cel.CelProgram), program
    return program


def same(result: Any, expected: Any) -> bool:
    return type(result) is type(expected) and result == expected


@pytest.mark.parametrize(("kind", "text", "full", "bare"), CASES, ids=IDS)
def test_has_inside_an_expression_evaluates(kind: str, text: str, full: Any, bare: Any) -> None:
    program = compiled(kind, text)
    for values, expected in ((FULL[kind], full), (BARE[kind], bare)):
        result = program.evaluate(cel.activation(VARIABLES[kind], **values))
        assert same(result, expected), (values, result)


@pytest.mark.parametrize(("kind", "text", "full", "bare"), CASES, ids=IDS)
def test_has_inside_an_expression_memoised(kind: str, text: str, full: Any, bare: Any) -> None:
    memo = MemoEvaluator([compiled(kind, text)], VARIABLES[kind])
    for _ in range(2):  # a miss, then a hit
        (first,) = memo.evaluate(FULL[kind])
        (second,) = memo.evaluate(BARE[kind])
        assert same(first, full), first
        assert same(second, bare), second
    assert (memo.misses, memo.hits) == (2, 2)


def test_all_has_macros_in_one_memo_evaluator() -> None:
    """Several programs share one evaluator, as the placement filters and scores do."""
    texts = [text for kind, text, _, _ in CASES if kind == "placement"]
    memo = MemoEvaluator([compiled("placement", t) for t in texts], cel.PLACEMENT_VARS)
    expected = [(full, bare) for kind, _, full, bare in CASES if kind == "placement"]
    assert memo.evaluate(FULL["placement"]) == tuple(full for full, _ in expected)
    assert memo.evaluate(BARE["placement"]) == tuple(bare for _, bare in expected)


# Inside a dyn value a field can be selected on something that is not a map.
NOT_A_MAP = {"name": "train", "labels": None, "items": [1], "count": 3}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("has(object.metadata.labels.team)", False),
        ("!has(object.metadata.labels.team)", True),
        ("has(object.metadata.name.first) ? 1 : 2", 2),
        ("has(object.metadata.items.first) || has(object.metadata.count.x)", False),
        ("object.metadata.count.x || true", True),  # CEL's || absorbs an error
    ],
)
def test_has_on_a_field_of_a_non_map_is_false(text: str, expected: Any) -> None:
    program = compiled("admission", text)
    result = program.evaluate(cel.activation(cel.ADMISSION_VARS, object={"metadata": NOT_A_MAP}))
    assert same(result, expected), result


@pytest.mark.parametrize(
    "text",
    [
        "object.metadata.labels.team",
        "object.metadata.name.first",
        "object.metadata.items.first",
        "object.metadata.count.x == 1",
        "!object.metadata.labels.team",
    ],
)
def test_selecting_a_field_of_a_non_map_is_an_error_value(text: str) -> None:
    """An evaluation error, not a Python exception out of ``evaluate``."""
    program = compiled("admission", text)
    result = program.evaluate(cel.activation(cel.ADMISSION_VARS, object={"metadata": NOT_A_MAP}))
    assert isinstance(result, cel.CelError)
    assert result.message == "no such overload"


TEAM_LABEL = """\
description: Every job template carries a team label, as a ValidatingAdmissionPolicy would say.
match: '!has(object.metadata.labels.exempt)'
enforcement: Deny
validations:
  - expression: '!has(object.metadata.labels.team) ? false : object.metadata.labels.team != ""'
    messageExpression: >-
      !has(object.metadata.labels.team) ? "no team label on " + object.metadata.name
      : "empty team label on " + object.metadata.name
"""


def test_admission_policy_with_not_has_loads_and_evaluates(write, load_ok) -> None:
    write("admission.yaml", policy_doc("AdmissionPolicy", "team-label", TEAM_LABEL))
    (policy,) = load_ok().admission
    (validation,) = policy.validations
    check, message = validation.expression.program, validation.message_expression.program

    def run(program: cel.CelProgram, labels: dict[str, str] | None) -> Any:
        metadata = {"name": "train"} if labels is None else {"name": "train", "labels": labels}
        job = {"kind": "PyTorchJob", "labels": labels or {}}
        return program.evaluate(
            cel.activation(cel.ADMISSION_VARS, object={"metadata": metadata}, job=job, now=NOW)
        )

    assert run(policy.match.program, {"team": "ml"}) is True
    assert run(policy.match.program, {"exempt": "yes"}) is False
    assert run(check, {"team": "ml"}) is True
    assert run(check, {"team": ""}) is False
    assert run(check, {}) is False
    assert run(check, None) is False
    assert run(message, {"team": ""}) == "empty team label on train"
    assert run(message, {}) == "no team label on train"
    assert run(message, None) == "no team label on train"
