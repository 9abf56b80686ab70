"""CEL string extensions (``split``, ``join``, ``lowerAscii``, ``upperAscii``, ``trim``): what
they give, as cel-go's ``ext.Strings`` does, and how the cost estimate bounds them."""

from __future__ import annotations

import pytest

from engine.policy import cel
from engine.policy.celcheck import BOOL, STRING, list_of

VARIABLES = {"s": STRING, "job": cel.JOB}


def evaluate(text: str, expected=STRING, s: str = "us-east-1,us-west-2,eu-west-1"):
    program = cel.compile_expression(text, VARIABLES, expected)
    assert isinstance(program, cel.CelProgram), program
    return program.evaluate(cel.activation(VARIABLES, s=s, job={"annotations": {}}))


@pytest.mark.parametrize(
    ("text", "result"),
    [
        ('s.split(",")', ["us-east-1", "us-west-2", "eu-west-1"]),
        ('s.split(",", 2)', ["us-east-1", "us-west-2,eu-west-1"]),  # the last holds the rest
        ('s.split(",", 0)', []),
        ('s.split(",", -1)', ["us-east-1", "us-west-2", "eu-west-1"]),
        ('"abc".split("")', ["a", "b", "c"]),
        ('"abc".split("", 2)', ["a", "bc"]),
        ('"".split(",")', [""]),
    ],
)
def test_split_gives_the_parts_as_cel_go_does(text, result):
    assert evaluate(text, list_of(STRING)) == result


@pytest.mark.parametrize(
    ("text", "result"),
    [
        ('s.split(",").join("|")', "us-east-1|us-west-2|eu-west-1"),
        ('["a", "b"].join()', "ab"),
        ('"ÀbC-Ü".lowerAscii()', "Àbc-Ü"),  # ASCII letters only
        ('"àbc".upperAscii()', "àBC"),
        ('" \\t x y \\n".trim()', "x y"),
    ],
)
def test_join_case_and_trim(text, result):
    assert evaluate(text) == result


def test_parts_are_cel_strings_with_their_methods():
    assert evaluate('s.split(",")[1].startsWith("us-")', BOOL) is True
    assert evaluate('"us-west-2" in s.split(",")', BOOL) is True
    assert evaluate('"us-west" in s.split(",")', BOOL) is False  # whole items, not text
    assert evaluate('s.split(",").exists(r, r.endsWith("-1"))', BOOL) is True


def test_join_of_a_list_that_is_not_strings_is_a_type_error():
    program = cel.compile_expression("[1, 2].join()", VARIABLES, STRING)
    assert not isinstance(program, cel.CelProgram)
    assert "no matching overload for list(int).join()" in program[0].message


def test_a_comprehension_over_an_unbounded_split_of_an_annotation_is_over_the_cost_limit():
    """An annotation may be 256 KiB: its split has up to 262,145 items, so iterating it is
    refused at load time; ``split(sep, n)`` with a literal ``n`` bounds it, and ``in`` (a scan
    in C) is cheap enough."""
    ann = 'job.annotations["fleetgate.io/regions"]'
    unbounded = cel.compile_expression(f'{ann}.split(",").exists(r, r == "x")', VARIABLES, BOOL)
    assert not isinstance(unbounded, cel.CelProgram)
    assert "exists() over up to 262,145 elements" in unbounded[0].message
    bounded = f'{ann}.split(",", 16).exists(r, r == "x")'
    assert isinstance(cel.compile_expression(bounded, VARIABLES, BOOL), cel.CelProgram)
    scan = f'"x" in {ann}.split(",")'
    assert isinstance(cel.compile_expression(scan, VARIABLES, BOOL), cel.CelProgram)


@pytest.mark.parametrize("through", ["lowerAscii()", "upperAscii()", "trim()", 'split(",").join()'])
def test_the_estimate_follows_a_string_through_the_extensions(through):
    """A string made from an annotation is as long as the annotation: iterating its split is
    over the limit, whichever extension it went through first."""
    text = f'job.annotations["a"].{through}.split(",").exists(r, r == "x")'
    program = cel.compile_expression(text, VARIABLES, BOOL)
    assert not isinstance(program, cel.CelProgram)
    assert "CEL cost: estimated cost" in program[0].message
