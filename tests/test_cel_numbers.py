"""CEL numbers as Kubernetes users write them: int, uint and double compare with each other.

The expected answers follow the CEL spec's cross-type numeric comparisons (cel-spec
tests/simple/testdata/comparisons.textproto): all numbers lie on one number line, an integer
meets a double as a double (so very large integers compare as their nearest double), NaN equals
nothing and orders with nothing. Arithmetic across numeric types stays an error.
"""

from __future__ import annotations

import datetime as dt

import pytest

from engine.policy import cel
from engine.policy.celcheck import BOOL, DYN
from engine.policy.memo import MemoEvaluator
from tests.conftest import policy_doc

NOW = dt.datetime(2026, 11, 21, 12, 0, tzinfo=dt.UTC)


def evaluate(text: str, variables=None, **values):
    """Compile (type-check included) and run ``text`` as fleetgate does for a policy."""
    variables = variables or {}
    program = cel.compile_expression(text, variables, BOOL)
    assert isinstance(program, cel.CelProgram), program
    return program.evaluate(cel.activation(variables, **values))


# (expression, the spec's answer)
MIXED: list[tuple[str, bool]] = [
    # equality: one number line
    ("1 == 1.0", True),
    ("1.0 == 1", True),
    ("1u == 1", True),
    ("1 == 1u", True),
    ("1u == 1.0", True),
    ("2 == 1.0", False),
    ("2u == 1", False),
    ("2.0 == 1u", False),
    ("24 != 24.1", True),
    ("1 != 1.0", False),
    ("1 != 1u", False),
    ("99u != 99.0", False),
    ("9000u != 9001.0", True),
    # ordering, both ways round, every pair of kinds
    ("1 < 2.0", True),
    ("1 < 2u", True),
    ("1u < 2", True),
    ("1u < 2.0", True),
    ("1.0 < 2", True),
    ("1.0 < 2u", True),
    ("1 < 1.0", False),
    ("1u < 1", False),
    ("1.0 < 1u", False),
    ("2 > 1.0", True),
    ("2u > 1", True),
    ("2.0 > 1u", True),
    ("1 > 1u", False),
    ("1 <= 2u", True),
    ("1.0 <= 2", True),
    ("2u <= 1.0", False),
    ("2 >= 1u", True),
    ("0u >= 1", False),
    ("0.0 >= 1u", False),
    # signs and the edges of int64 and uint64
    ("-1 < 0u", True),
    ("-1 < 1u", True),
    ("-1 >= 0u", False),
    ("1u > -1", True),
    ("1 < 9223372036854775808u", True),
    ("9223372036854775808u > 1", True),
    ("1u < -9223372036854775808", False),
    ("1u <= -9223372036854775808", False),
    ("18446744073709551615u < -1.0", False),
    ("9223372036854775807u > -1.0", True),
    # an integer meets a double as a double: the conversion can round
    ("9223372036854775807 < 9223372036854775808.0", False),
    ("9223372036854775807 >= 9223372036854775808.0", True),
    ("9223372036854775807 < 9223372036854777857.0", True),
    ("-9223372036854775808 > -9223372036854775809.0", False),
    ("-9223372036854775808 <= -9223372036854775809.0", True),
    ("-9223372036854775808 > -9223372036854777857.0", True),
    ("9223372036854775808.0 <= 9223372036854775807", True),
    ("18446744073709551615u < 18446744073709590000.0", True),
    ("18446744073709551615u >= 18446744073709553665.0", False),
    ("18446744073709553665.0 > 18446744073709551615u", True),
    # NaN is unequal to everything and orders with nothing
    ('1 == double("NaN")', False),
    ('1u != double("NaN")', True),
    ('double("NaN") == double("NaN")', False),
    ('1 < double("NaN")', False),
    ('1u >= double("NaN")', False),
    ('double("NaN") > 1', False),
    ('double("NaN") <= 1u', False),
    # the same through dyn, where only the run time knows the kinds
    ("dyn(1) == 1u", True),
    ("dyn(1u) == 1.0", True),
    ("dyn(1.0) == 2", False),
    ("dyn(1) < 2.0", True),
    ("dyn(2u) > 1.0", True),
    ("dyn(-1) < 0u", True),
    ("dyn(1.0) >= 2u", False),
    # lists and maps are equal when their elements are
    ("[1] == [1.0]", True),
    ("[1.0, 2.0, 3] == [1u, 2, 3u]", True),
    ("[1.0, 2.1] == [1u, 2]", False),
    ("[1, 2] != [1.0, 2u]", False),
    ("{'k': 1} == {'k': 1.0}", True),
    ("{1: 1.0, 2u: 3u} == {1u: 1, 2: 3.0}", True),
    ("{1: 1.0} == {1u: 2}", False),
    ("{1: 1} == {2: 1}", False),
    ("[1, 'dos', 3] == [1.0, 2, 4]", False),
    # membership uses the same equality
    ("dyn(1.0) in [1, 2]", True),
    ("2u in [1, 2]", True),
    ("3.0 in [1, 2]", False),
    ("dyn(1.0) in {1: 'a'}", True),
    ("dyn(2u) in {1: 'a'}", False),
    # same-kind comparisons are unchanged
    ("1 < 2", True),
    ("2u >= 3u", False),
    ("1.5 == 1.5", True),
    ("'a' < 'b'", True),
    ("[1, 2] == [1, 2]", True),
    ("'elem' in ['a', 'elem']", True),
]


@pytest.mark.parametrize(("text", "answer"), MIXED, ids=[m[0] for m in MIXED])
def test_mixed_numbers_compare_as_the_cel_spec_says(text: str, answer: bool) -> None:
    assert evaluate(text) is answer


@pytest.mark.parametrize(
    "text",
    ["1 + 1.0", "2.0 * 3", "1u - 1", "5 % 2u", "job.priority + 0.5", 'job.total["cpu"] / 2'],
)
def test_arithmetic_across_numeric_kinds_is_still_a_type_error(text: str) -> None:
    issues = cel.compile_expression(text, cel.MAPPING_VARS, DYN)
    assert isinstance(issues, list)
    assert "no matching overload" in issues[0].message


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("dyn(1) + 1.0", "no such overload"),
        ("dyn('foo') < 1024", "no such overload"),
        ("dyn([0]) < [1.0]", "no such overload"),
    ],
)
def test_what_cel_cannot_compute_is_an_evaluation_error(text: str, fragment: str) -> None:
    result = cel.compile_expression(text, {}, DYN)
    assert isinstance(result, cel.CelProgram), result
    error = result.evaluate(cel.activation({}))
    assert isinstance(error, cel.CelError)
    assert fragment in error.message


def job(gpus: float, priority: int = 100) -> dict:
    return {
        "namespace": "team-a",
        "name": "train",
        "labels": {},
        "priority": priority,
        "total": {"nvidia.com/gpu": gpus, "cpu": 16},
        "components": [{"name": "worker", "replicas": 4, "requests": {"nvidia.com/gpu": 8}}],
        "createdAt": NOW,
    }


@pytest.mark.parametrize(
    ("text", "gpus", "answer"),
    [
        ('job.total["nvidia.com/gpu"] <= 64', 32, True),
        ('job.total["nvidia.com/gpu"] <= 64', 64, True),
        ('job.total["nvidia.com/gpu"] <= 64', 65, False),
        ('job.total["nvidia.com/gpu"] == 32', 32, True),
        ('job.total["nvidia.com/gpu"] > job.priority', 101, True),
        ('job.total["nvidia.com/gpu"] > job.priority', 100, False),
        ('job.total["nvidia.com/gpu"] >= 1u', 1, True),
        ("job.priority == 100.0", 0, True),
        ('job.components.exists(c, c.requests["nvidia.com/gpu"] == c.replicas * 2)', 8, True),
    ],
)
def test_double_fields_compare_with_int_literals_and_int_fields(text, gpus, answer) -> None:
    assert evaluate(text, cel.MAPPING_VARS, job=job(gpus), now=NOW) is answer


def test_memoised_placement_filters_compare_mixed_numbers() -> None:
    program = cel.compile_expression(
        'cluster.free["nvidia.com/gpu"] >= job.total["nvidia.com/gpu"] && cluster.free["cpu"] > 8',
        cel.PLACEMENT_VARS,
        BOOL,
    )
    assert isinstance(program, cel.CelProgram), program
    memo = MemoEvaluator([program], cel.PLACEMENT_VARS)
    roomy = {"name": "a", "free": {"nvidia.com/gpu": 64, "cpu": 100}}
    tight = {"name": "b", "free": {"nvidia.com/gpu": 16, "cpu": 100}}
    assert memo.evaluate({"job": job(32), "cluster": roomy}) == (True,)
    assert memo.evaluate({"job": job(32), "cluster": tight}) == (False,)


KUBERNETES_STYLE = """\
description: Copied from a ValidatingAdmissionPolicy, numbers written as Kubernetes users do.
match: '"nvidia.com/gpu" in job.total && job.total["nvidia.com/gpu"] > 0'
enforcement: Deny
validations:
  - expression: job.total['nvidia.com/gpu'] <= 64
    messageExpression: >-
      "job asks for " + string(job.total['nvidia.com/gpu']) + " GPUs; the fleet has 64"
  - expression: job.minMember >= 1u && job.priority != 1.5
    message: priorities are whole numbers
"""


def test_validate_accepts_a_policy_comparing_a_quantity_with_an_int(write, load_ok) -> None:
    write("admission.yaml", policy_doc("AdmissionPolicy", "gpu-cap", KUBERNETES_STYLE))
    (policy,) = load_ok().admission
    small = cel.activation(cel.ADMISSION_VARS, object={}, job=job(32) | {"minMember": 4}, now=NOW)
    large = cel.activation(cel.ADMISSION_VARS, object={}, job=job(128) | {"minMember": 4}, now=NOW)
    assert policy.match.program.evaluate(small) is True
    cap, whole = (v.expression.program for v in policy.validations)
    assert (cap.evaluate(small), cap.evaluate(large)) == (True, False)
    assert whole.evaluate(small) is True
