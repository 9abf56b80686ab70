"""Behaviour of the static CEL type checker, cross-checked against cel-python's evaluator."""

from __future__ import annotations

import datetime
import functools
import itertools
import sys
from typing import Any

import celpy
import pytest
from celpy import celtypes

from engine.policy import celnumbers, celstrings
from engine.policy.celcheck import (
    BOOL,
    BYTES,
    DOUBLE,
    DURATION,
    DYN,
    GLOBALS,
    INT,
    METHODS,
    NULL,
    STRING,
    TIMESTAMP,
    TYPE,
    UINT,
    CelType,
    FunctionSig,
    TypeIssue,
    check,
    list_of,
    map_of,
    record,
)

COMPONENT = record("component", name=STRING, replicas=INT, requests=map_of(STRING, DOUBLE))
JOB = record(
    "job",
    kind=STRING,
    namespace=STRING,
    name=STRING,
    labels=map_of(STRING, STRING),
    priority=INT,
    total=map_of(STRING, DOUBLE),
    components=list_of(COMPONENT),
    createdAt=TIMESTAMP,
    object=DYN,
)
CLUSTER = record(
    "cluster", name=STRING, labels=map_of(STRING, STRING), free=map_of(STRING, DOUBLE), ready=BOOL
)
VARIABLES = {"job": JOB, "cluster": CLUSTER, "now": TIMESTAMP}
FUNCTIONS = {"quantity": FunctionSig((STRING,), DOUBLE)}


@functools.cache
def env() -> celpy.Environment:
    """celpy's compiled runner, made on first use rather than when the suite is collected."""
    return celpy.Environment(runner_class=celpy.CompiledRunner)


def _activation() -> dict[str, Any]:
    job = celpy.json_to_cel(
        {
            "kind": "TrainingJob",
            "namespace": "ml",
            "name": "llama",
            "labels": {"team": "ml", "tier": "gold"},
            "priority": 5,
            "total": {"gpu": 8.0, "cpu": 32.0},
            "components": [{"name": "worker", "replicas": 4, "requests": {"gpu": 2.0}}],
            "object": {"spec": {"replicas": 3}},
        }
    )
    job[celtypes.StringType("createdAt")] = celtypes.TimestampType("2024-06-01T10:00:00Z")
    cluster = celpy.json_to_cel(
        {"name": "east", "labels": {"region": "us"}, "free": {"gpu": 16.0}, "ready": True}
    )
    return {"job": job, "cluster": cluster, "now": celtypes.TimestampType("2024-06-01T12:00:00Z")}


def _quantity(text: celtypes.StringType) -> celtypes.DoubleType:
    units = {"Gi": 2.0**30, "Mi": 2.0**20}
    for suffix, factor in units.items():
        if text.endswith(suffix):
            return celtypes.DoubleType(float(text[: -len(suffix)]) * factor)
    return celtypes.DoubleType(float(text))


@pytest.fixture
def celpy_can_call_quantity(monkeypatch: pytest.MonkeyPatch) -> None:
    """CompiledRunner emits ``<module>.<qualname>(...)`` for extra functions and execs it in
    celpy.evaluation's globals, so this test module and fleetgate's operators (celnumbers) must
    be visible there."""
    for module in (__name__, celnumbers.__name__):
        root = module.split(".")[0]
        monkeypatch.setitem(vars(celpy.evaluation), root, sys.modules[root])


def evaluate(expr: str, activation: dict[str, Any] | None = None) -> Any:
    """Evaluate as fleetgate does: cel-python with fleetgate's number comparisons."""
    functions = {"quantity": _quantity, **celnumbers.OPERATORS, **celstrings.FUNCTIONS}
    program = env().program(env().compile(expr), functions=functions)
    return program.evaluate(_activation() if activation is None else activation)


def check_text(expr: str) -> tuple[CelType, list[TypeIssue]]:
    return check(env().compile(expr), VARIABLES, FUNCTIONS)


VALID: list[tuple[str, CelType, str]] = [
    # fields, maps, lists
    ('job.labels["team"] == "ml"', BOOL, "a label lookup compared with a string is bool"),
    ("job.kind", STRING, "a record field has its declared type"),
    ("job.labels.team", STRING, "dot access on a map gives the value type"),
    ("job.components[0].replicas", INT, "indexing a list of records gives the record"),
    ("job.components[0u].name", STRING, "a list may be indexed with a uint"),
    ('job.components[0].requests["gpu"] <= cluster.free["gpu"]', BOOL, "doubles compare"),
    # numbers of different kinds compare and are equal on one number line, as in cel-go
    ('job.total["gpu"] <= 64', BOOL, "a double compares with an int literal"),
    ("job.components[0].replicas < cluster.free['gpu']", BOOL, "an int field with a double"),
    ("job.priority == 5.0", BOOL, "an int equals a double"),
    ("job.priority != 1u", BOOL, "an int is unequal to a uint"),
    ("2u >= job.priority", BOOL, "a uint compares with an int"),
    ("[1, 2] == [1.0, 2u]", BOOL, "lists of different numeric kinds may be equal"),
    ('{"a": 1} != {"a": 1.0}', BOOL, "maps of different numeric kinds may be equal"),
    ("job.priority in [5.0, 6.0]", BOOL, "an int may be in a list of doubles"),
    ("job.object.spec.replicas > 1", BOOL, "anything goes on a dyn field"),
    ("job.object.spec.replicas", DYN, "a path through a dyn field stays dyn"),
    ("job.object.spec.replicas + 1 == 4", BOOL, "arithmetic on dyn yields dyn"),
    # literals
    ("1u + 2u", UINT, "uint literals add to uint"),
    ("2.5e1 * 2.0", DOUBLE, "float literals multiply to double"),
    ("0x1F - -5", INT, "hex and negative int literals are int"),
    ('b"ab" + b"c"', BYTES, "bytes concatenate"),
    ('"""multi\nline""" + r"raw" + \'x\'', STRING, "all string literal forms are string"),
    ("null", NULL, "null is null"),
    ("[1, 2]", list_of(INT), "a uniform list literal has that element type"),
    ('[1, "a"]', list_of(DYN), "a mixed list literal is a list of dyn"),
    ("[]", list_of(DYN), "an empty list literal is a list of dyn"),
    ('{"a": 1, "b": 2}', map_of(STRING, INT), "a uniform map literal has those types"),
    ('{"a": 1, "b": 2.0}', map_of(STRING, DYN), "a map literal with mixed values has dyn values"),
    ("{}", map_of(DYN, DYN), "an empty map literal is a map of dyn to dyn"),
    # operators
    ("job.priority * 2 - 3 / 1 % 2", INT, "int arithmetic stays int"),
    ('job.total["gpu"] / 2.0', DOUBLE, "double arithmetic stays double"),
    ("-job.priority", INT, "negating an int gives int"),
    ("!cluster.ready", BOOL, "negating a bool gives bool"),
    ('cluster.ready && job.priority > 3 || job.kind != "x"', BOOL, "logic operators give bool"),
    ('"a" + job.name', STRING, "strings concatenate"),
    ("[1] + [2]", list_of(INT), "lists concatenate"),
    ('"team" in job.labels', BOOL, "in on a map tests the key"),
    ('job.kind in ["TrainingJob", "Notebook"]', BOOL, "in on a list tests the element"),
    ('job.priority > 3 ? "high" : "low"', STRING, "a ternary has its branches' type"),
    ("cluster.ready ? job.object : 1", DYN, "a ternary with a dyn branch is dyn"),
    ("job.namespace == null", BOOL, "a string may be compared with null"),
    ("type(job.priority) == int", BOOL, "type() compares with type names"),
    # time
    ('now - job.createdAt > duration("1h")', BOOL, "timestamps subtract to a duration"),
    ('job.createdAt + duration("30m") < now', BOOL, "a timestamp plus a duration is a timestamp"),
    ('duration("1h") + job.createdAt', TIMESTAMP, "a duration plus a timestamp is a timestamp"),
    ('now - duration("1h")', TIMESTAMP, "a timestamp minus a duration is a timestamp"),
    ('duration("1h") + duration("1m") - duration("1s")', DURATION, "durations add"),
    ('-duration("1h")', DURATION, "a duration can be negated"),
    # macros
    ("job.components.exists(c, c.replicas > 2)", BOOL, "exists binds the element type"),
    ('job.components.all(c, c.name.startsWith("w"))', BOOL, "all binds the element type"),
    ("job.components.exists_one(c, c.replicas == 4)", BOOL, "exists_one is bool"),
    ("job.components.map(c, c.replicas)", list_of(INT), "map gives a list of the body type"),
    ("job.components.map(c, c.replicas > 1, c.name)", list_of(STRING), "map with a filter"),
    ("job.components.filter(c, c.replicas > 1)", list_of(COMPONENT), "filter keeps the type"),
    ('job.labels.exists(k, k == "team")', BOOL, "a macro over a map binds the key"),
    ("job.labels.map(k, job.labels[k])", list_of(STRING), "map over a map may index it"),
    ("job.labels.filter(k, k.size() > 1)", list_of(STRING), "filter over a map keeps keys"),
    ('job.object.spec.exists(k, k == "replicas")', BOOL, "a macro over dyn binds a dyn variable"),
    ('job.components.map(c, c.requests).exists(r, "gpu" in r)', BOOL, "macros chain"),
    ("[[1]].exists(x, x.exists(y, y == 1))", BOOL, "macros nest"),
    ("has(job.labels.team)", BOOL, "has() on a map key is bool"),
    ("has(job.object.spec)", BOOL, "has() on a dyn field is bool"),
    ("has(job.kind)", BOOL, "has() on a record field is bool"),
    # functions
    ("size(job.kind) + size(b'ab') + size(job.components) + size(job.labels)", INT, "size()"),
    ("job.kind.size() + b'ab'.size() + [1].size() + job.labels.size()", INT, "x.size()"),
    ('job.kind.startsWith("T") && job.kind.endsWith("Job")', BOOL, "prefix and suffix tests"),
    ('job.kind.contains("Job") && job.kind.matches("^T.*")', BOOL, "substring and regex tests"),
    ('matches(job.kind, "Job$")', BOOL, "matches() has a global form"),
    ('int(job.total["gpu"]) + int("3") + int(2u) + int(now)', INT, "int() conversions"),
    ('uint(job.priority) + uint(2.0) + uint("3") + uint(1u)', UINT, "uint() conversions"),
    ('double(job.priority) + double(2u) + double("1.5") + double(1.0)', DOUBLE, "double()"),
    ('string(1) + string(2u) + string(1.5) + string(b"x") + string(true)', STRING, "string()"),
    ('string(now) + string(duration("1h")) + string("s")', STRING, "string() of time values"),
    ('bool("true") && bool(cluster.ready)', BOOL, "bool() conversions"),
    ('bytes("ab") + bytes(b"c")', BYTES, "bytes() conversions"),
    ('timestamp("2024-01-01T00:00:00Z") < timestamp(now)', BOOL, "timestamp() conversions"),
    ('duration("1h30m") > duration(duration("1h"))', BOOL, "duration() conversions"),
    ("dyn(job.priority) == 5", BOOL, "dyn() makes a value dyn"),
    ("type(job.kind)", TYPE, "type() gives a type"),
    ('quantity("8Gi") <= cluster.free["gpu"]', BOOL, "an extra global function is typed"),
    (
        "now.getFullYear() + now.getMonth() + now.getDayOfYear() + now.getDayOfMonth()"
        " + now.getDate() + now.getDayOfWeek()",
        INT,
        "timestamp date getters",
    ),
    (
        "now.getHours() + now.getMinutes() + now.getSeconds() + now.getMilliseconds()",
        INT,
        "timestamp time getters",
    ),
    ('now.getFullYear("Europe/Paris") + now.getHours("UTC")', INT, "getters take a time zone"),
    (
        'duration("90m").getHours() + duration("90m").getMinutes()'
        ' + duration("90m").getSeconds() + duration("90m").getMilliseconds()',
        INT,
        "duration getters",
    ),
    ('job.kind == "x" ||\n  job.priority > 1', BOOL, "an expression may span lines"),
    ('job.kind.split("i")', list_of(STRING), "split gives a list of strings"),
    ('job.kind.split("i", 2).join("-")', STRING, "split with a limit, join"),
    ("job.kind.lowerAscii().upperAscii().trim()", STRING, "case and trim"),
]


@pytest.mark.parametrize(("expr", "expected", "why"), VALID, ids=[v[2] for v in VALID])
def test_valid_expression_has_its_inferred_type(expr: str, expected: CelType, why: str) -> None:
    assert check_text(expr) == (expected, [])


RUNTIME_CLASSES: dict[str, type | tuple[type, ...]] = {
    "bool": (bool, celtypes.BoolType),
    "uint": celtypes.UintType,
    "double": float,
    "string": str,
    "bytes": bytes,
    "null": type(None),
    "timestamp": celtypes.TimestampType,
    "duration": datetime.timedelta,
    "type": type,
}


def has_type(value: Any, cel_type: CelType) -> bool:
    """Whether a value celpy computed is of the type the checker inferred (containers deeply)."""
    kind = cel_type.kind
    if kind == "dyn":
        return True
    if kind == "int":
        return isinstance(value, celtypes.IntType)
    if kind == "list":
        return isinstance(value, list) and all(has_type(v, cel_type.params[0]) for v in value)
    if kind == "map":
        key, item = cel_type.params
        return isinstance(value, dict) and all(
            has_type(k, key) and has_type(v, item) for k, v in value.items()
        )
    if kind == "record":
        return isinstance(value, dict) and all(
            has_type(value[name], field) for name, field in cel_type.fields if name in value
        )
    return isinstance(value, RUNTIME_CLASSES[kind])


CELPY_DISAGREES = {
    "map with a filter": "cel-python 0.5's compiled runner evaluates map(x, filter, transform) "
    "to the filter's values, not the transform's",
}


@pytest.mark.parametrize(
    ("expr", "expected", "why"),
    [
        pytest.param(*v, marks=pytest.mark.xfail(reason=CELPY_DISAGREES[v[2]], strict=True))
        if v[2] in CELPY_DISAGREES
        else v
        for v in VALID
    ],
    ids=[v[2] for v in VALID],
)
@pytest.mark.usefixtures("celpy_can_call_quantity")
def test_valid_expression_evaluates_in_celpy_to_its_type(
    expr: str, expected: CelType, why: str
) -> None:
    value = evaluate(expr)  # raises CELEvalError if the checker accepted what celpy cannot run
    assert has_type(value, expected), f"{value!r} is not a {expected}"


def test_runtime_type_check_tells_types_apart() -> None:
    assert has_type(celtypes.IntType(1), INT)
    assert not has_type(celtypes.BoolType(True), INT)
    assert not has_type(celtypes.IntType(1), UINT)
    assert not has_type(celtypes.ListType([celtypes.BoolType(True)]), list_of(STRING))
    assert not has_type(celpy.json_to_cel({"name": 3}), COMPONENT)


@pytest.mark.parametrize("name", sorted({*GLOBALS, *METHODS}))
def test_every_builtin_is_exercised_by_an_evaluated_example(name: str) -> None:
    assert any(f"{name}(" in expr for expr, _, _ in VALID)


INVALID: list[tuple[str, str, int, str]] = [
    ("jobb.kind", "undeclared reference to 'jobb' (did you mean 'job'?)", 1, "unknown variable"),
    ("x > 1", "undeclared reference to 'x'", 1, "an unknown variable without a close match"),
    ('job.lables["a"]', "no field 'lables' on job (did you mean 'labels'?)", 5, "unknown field"),
    ("has(job.lables)", "no field 'lables' on job (did you mean 'labels'?)", 9, "has() field"),
    (
        "job.components[0].replica > 1",
        "no field 'replica' on component (did you mean 'replicas'?)",
        19,
        "a field of a nested record",
    ),
    ("job.kind.size", "no field 'size' on string", 10, "a field on a string"),
    ('job["kind"]', "cannot index job; use job.field", 1, "indexing a record"),
    ("job.labels[1]", "map key must be string, got int", 12, "a map key of the wrong type"),
    ('job.components["a"]', "list index must be int, got string", 16, "a string list index"),
    (
        "job.priority + 2.0",
        "no matching overload for int + double; write double(...) around the int operand",
        14,
        "adding an int and a double",
    ),
    (
        'job.total["gpu"] * 2',
        "no matching overload for double * int; write 2.0",
        18,
        "multiplying a double by an int literal",
    ),
    (
        "job.priority - 1u",
        "int - uint; write uint(...) around the int operand",
        14,
        "subtracting a uint from an int",
    ),
    ("job.priority % 2u", "no matching overload for int % uint", 14, "int modulo uint"),
    ('job.total["gpu"] < "2"', "no matching overload for double < string", 18, "double < str"),
    ("job.priority == [1]", "no matching overload for int == list(int)", 14, "int equals list"),
    ("[1] == [[1.0]]", "list(int) == list(list(double))", 5, "lists of other elements"),
    ("job.priority == null", "no matching overload for int == null", 14, "int equals null"),
    ("job.components != null", "list(component) != null", 16, "a list is not null"),
    ("job.kind == 1", "no matching overload for string == int", 10, "string equals int"),
    ("job.kind + 1", "no matching overload for string + int", 10, "string plus int"),
    ("job.kind < 1", "no matching overload for string < int", 10, "string less than int"),
    ("5.0 % 2.0", "no matching overload for double % double", 5, "modulo on doubles"),
    ("job.createdAt + now", "timestamp + timestamp", 15, "adding two timestamps"),
    ('-"a"', "no matching overload for -string", 1, "negating a string"),
    ("!job.priority", "no matching overload for !int", 1, "not on an int"),
    ("job.priority && true", "operand of && must be bool, got int", 1, "and with an int"),
    ("cluster.ready || job.kind", "operand of || must be bool, got string", 18, "or on string"),
    ("job.priority ? 1 : 2", "condition must be bool, got int", 1, "an int condition"),
    ('cluster.ready ? 1 : "a"', "branches differ: int and string", 21, "ternary branches"),
    ("1 in job.labels", "no matching overload for int in map(string, string)", 3, "in map"),
    ("sizee(job.kind)", "unknown function 'sizee' (did you mean 'size'?)", 1, "unknown call"),
    (
        'job.kind.startWith("a")',
        "unknown function 'startWith' (did you mean 'startsWith'?)",
        10,
        "an unknown method",
    ),
    ('job.kind.replace("a", "b")', "unknown function 'replace'", 10, "replace is not offered"),
    ("size(job.kind, 1)", "size() expects 1 argument, got 2", 1, "too many arguments"),
    ("job.kind.startsWith()", "startsWith() expects 1 argument, got 0", 10, "too few arguments"),
    ("now.getHours(1, 2)", "getHours() expects 0 or 1 arguments, got 2", 5, "getter arity"),
    ("size(job.priority)", "no matching overload for size(int)", 1, "size of an int"),
    (
        "job.kind.startsWith(1)",
        "no matching overload for string.startsWith(int)",
        10,
        "a method argument of the wrong type",
    ),
    ("job.priority.startsWith('a')", "int.startsWith(string)", 14, "a method on the wrong type"),
    ("quantity(1)", "no matching overload for quantity(int)", 1, "an extra function arg type"),
    ("quantity()", "quantity() expects 1 argument, got 0", 1, "an extra function arity"),
    ("timestamp(1)", "no matching overload for timestamp(int)", 1, "timestamp from an int"),
    (
        'duration("1h").getHours("UTC")',
        "no matching overload for duration.getHours(string)",
        16,
        "a duration getter with a time zone",
    ),
    ("job.priority.exists(x, true)", "exists() needs a list or map, got int", 14, "exists on int"),
    (
        "job.components.exists(c, c.replicas)",
        "exists() predicate must be bool, got int",
        26,
        "a non-bool predicate",
    ),
    ("job.components.all(c)", "all() expects 2 arguments, got 1", 16, "a macro arity"),
    (
        "job.components.exists(c.name, true)",
        "exists() variable must be a simple identifier",
        23,
        "a macro variable that is not a name",
    ),
    ("job.components.map(c, c.zz)", "no field 'zz' on component", 25, "a macro body error"),
    ("job.components.exists(c, true) && c.name == 'a'", "reference to 'c'", 35, "macro scope"),
    ("has(job)", "has() argument must be a field selection", 5, "has() on a plain name"),
    ("job.kind.int()", "'int' must be called as a function", 10, "a conversion as a method"),
    ('startsWith(job.kind, "a")', "'startsWith' must be called as a method", 1, "method call"),
    (
        'job{kind: "x"}',
        "message construction is not supported in fleetgate policies",
        1,
        "message construction",
    ),
    (".job", "a leading-dot name is not supported in fleetgate policies", 1, "a leading dot"),
]


@pytest.mark.parametrize(("expr", "message", "column", "why"), INVALID, ids=[v[3] for v in INVALID])
def test_invalid_expression_reports_one_issue_at_the_offending_column(
    expr: str, message: str, column: int, why: str
) -> None:
    _, issues = check_text(expr)
    assert len(issues) == 1, issues
    assert message in issues[0].message
    assert (issues[0].line, issues[0].column) == (1, column)


REJECTED_AT_RUNTIME = [
    ("1 + 2.0", "an int plus a double"),
    ("3 * 2.0", "an int times a double"),
    ("job.priority - 1.5", "an int field minus a double"),
    ("1 == null", "an int equal to null"),
    ("[1] != null", "a list unequal to null"),
    ("5.0 % 2.0", "a double modulo"),
    ("-(1u)", "a negated uint"),
    ("timestamp(1)", "a timestamp from an int"),
    ('int(duration("1h"))', "an int from a duration"),
    ('duration("1h").getHours("UTC")', "a duration getter with a time zone"),
    ("job.nope", "an unknown field"),
]


@pytest.mark.parametrize(
    "expr", [r[0] for r in REJECTED_AT_RUNTIME], ids=[r[1] for r in REJECTED_AT_RUNTIME]
)
@pytest.mark.usefixtures("celpy_can_call_quantity")
def test_expression_celpy_cannot_run_is_rejected_by_the_checker(expr: str) -> None:
    _, issues = check_text(expr)
    assert issues
    with pytest.raises(celpy.CELEvalError):
        evaluate(expr)


SAMPLE_OPERANDS = [
    "1", "2.0", "3u", '"a"', "true", "null", "[1]", 'b"x"', '{"a": 1}', "type(1)",
    'duration("1h")', 'timestamp("2024-01-01T00:00:00Z")',
]  # fmt: skip


@pytest.mark.parametrize("op", ["+", "-", "*", "/", "%", "<", "<=", ">", ">=", "==", "!=", "in"])
@pytest.mark.usefixtures("celpy_can_call_quantity")
def test_every_literal_pair_the_checker_accepts_evaluates_in_celpy(op: str) -> None:
    unsound = []
    for left, right in itertools.product(SAMPLE_OPERANDS, repeat=2):
        expr = f"{left} {op} {right}"
        if check(env().compile(expr), {})[1]:
            continue
        try:
            evaluate(expr, {})
        except celpy.CELEvalError:
            unsound.append(expr)
    assert unsound == []


@pytest.mark.parametrize("op", ["<", "<=", ">", ">=", "==", "!="])
def test_every_pair_of_numeric_kinds_is_comparable(op: str) -> None:
    for left, right in itertools.product(
        ["1", "2u", "3.5", "job.priority", "job.total.gpu"], repeat=2
    ):
        assert check_text(f"{left} {op} {right}") == (BOOL, []), f"{left} {op} {right}"


def test_several_issues_in_one_expression_are_all_reported() -> None:
    result, issues = check_text('jobb.kind == 1 && job.lables.x + 2.0 > 1 || sizee("a")')
    assert result == BOOL
    assert [(i.column, i.message.split(" (")[0]) for i in issues] == [
        (1, "undeclared reference to 'jobb'"),
        (23, "no field 'lables' on job"),
        (45, "unknown function 'sizee'"),
    ]


def test_issue_types_unknown_sub_expression_as_dyn_and_keeps_checking() -> None:
    _, issues = check_text("job.priority + 2.0 > job.kind.size() && job.nope")
    assert [i.message.split(";")[0] for i in issues] == [
        "no matching overload for int + double",
        "no field 'nope' on job",
    ]


def test_issue_on_a_later_line_has_that_line_and_its_column() -> None:
    _, issues = check_text('job.kind == "a" &&\n  job.priorty > 1')
    assert issues == [TypeIssue(2, 7, "no field 'priorty' on job (did you mean 'priority'?)")]


def test_operator_issue_points_at_the_operator_on_its_own_line() -> None:
    _, issues = check_text('job.total["gpu"]\n   >= "2"')
    assert [(i.line, i.column) for i in issues] == [(2, 4)]


def test_functions_argument_is_optional() -> None:
    assert check(env().compile("job.priority > 1"), VARIABLES) == (BOOL, [])


@pytest.mark.parametrize(
    ("cel_type", "text"),
    [
        (BOOL, "bool"),
        (DYN, "dyn"),
        (list_of(STRING), "list(string)"),
        (map_of(STRING, DOUBLE), "map(string, double)"),
        (JOB, "job"),
        (list_of(map_of(STRING, list_of(INT))), "list(map(string, list(int)))"),
    ],
    ids=["bool", "dyn", "a list", "a map", "a record by its name", "nested containers"],
)
def test_type_prints_as_its_cel_name(cel_type: CelType, text: str) -> None:
    assert str(cel_type) == text


def test_types_are_immutable_values() -> None:
    assert list_of(INT) == list_of(INT)
    assert len({list_of(INT), list_of(INT), record("job", kind=STRING)}) == 2
    assert JOB.fields[0] == ("kind", STRING)
    with pytest.raises(AttributeError):
        INT.kind = "uint"  # type: ignore[misc]
