"""CEL ``+`` keeps CEL's types: a concatenated string or list still has CEL's methods, so an
expression on it gives a value (or a CEL error), never a Python exception out of the engine."""

from __future__ import annotations

import pytest

from engine.policy import cel
from tests.test_cel_memo import CLUSTER_H100, job


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('("," + job.name + ",").contains(",train,")', True),
        ('(job.name + "-x").startsWith("train-")', True),
        ('(job.name + "-x").endsWith("-x")', True),
        ('size(job.name + "ab")', 7),
        ("([1, 2] + [3]).exists(x, x == 3)", True),
        ("size([1] + [2, 3])", 3),
        ("1 + 2", 3),
        ("1.5 + 2.0", 3.5),
    ],
)
def test_concatenation_keeps_cel_methods(text, expected):
    program = cel.compile_expression(text, cel.PLACEMENT_VARS, cel.DYN)
    assert isinstance(program, cel.CelProgram), program
    activation = cel.activation(cel.PLACEMENT_VARS, job=job(), cluster=CLUSTER_H100)
    assert program.evaluate(activation) == expected
