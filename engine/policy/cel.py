"""CEL for fleetgate policies: with celnumbers, celstrings, celtranspile and celvalues (values
into CEL, memoised per review with ``converting_once``), the only modules importing celpy.

Expressions are parsed, type-checked against the declared variables and compiled once, when a
policy set loads. Evaluation never raises for a problem in the expression or its data: it returns
a ``CelError`` value, which the scheduler turns into the reason ``PolicyEvalError``.

Thread safety: celpy's ``CompiledRunner.evaluate`` stores the activation in the module globals of
``celpy.evaluation`` and ``exec``s the transpiled code there, so two threads evaluating at once
can see each other's variables. ``CelProgram.evaluate`` runs the same code object with a fresh
globals dict per call instead; nothing shared is written. The compiled (transpiled) runner is
used because it measured ~7x faster than the interpreted one (``make bench-cel``).
"""

from __future__ import annotations

import functools
import logging
import operator
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import celpy
import celpy.celtypes as ct
import celpy.evaluation

from engine.errors import QuantityError
from engine.policy import celcheck, celcost, celnumbers, celstrings, celtranspile
from engine.policy.access import Path, access_paths
from engine.policy.celcheck import (
    BOOL,
    DOUBLE,
    DYN,
    INT,
    STRING,
    TIMESTAMP,
    CelType,
    FunctionSig,
    list_of,
    map_of,
    record,
)
from engine.policy.celvalues import converting_once as converting_once  # re-exported
from engine.policy.celvalues import to_cel
from engine.quantity import parse_quantity

# celpy logs every evaluation error at ERROR level; here they are values, reported by the caller.
logging.getLogger("celpy").setLevel(logging.CRITICAL)

_STRINGS = map_of(STRING, STRING)
_AMOUNTS = map_of(STRING, DOUBLE)

COMPONENT = record("component", name=STRING, replicas=INT, requests=_AMOUNTS)
JOB = record(
    "job",
    apiVersion=STRING,
    kind=STRING,
    namespace=STRING,
    name=STRING,
    uid=STRING,
    labels=_STRINGS,
    annotations=_STRINGS,
    queue=STRING,
    specQueue=STRING,
    tenant=STRING,
    priority=INT,
    priorityClassName=STRING,
    components=list_of(COMPONENT),
    total=_AMOUNTS,
    minMember=INT,
    resizable=BOOL,
    createdAt=TIMESTAMP,
    object=DYN,
)
# Placement expressions also see the job's life in its queue, read from its binding: when it
# entered the queue (``fleetgate.io/queued-at``, reset by a requeue) and the clusters it is
# excluded from after a failure (``fleetgate.io/excluded-clusters``, still in force at ``now``)
# with their regions. Mapping expressions do not: their results are kept per template.
PLACED_JOB = record(
    "job",
    **dict(JOB.fields),
    queuedAt=TIMESTAMP,
    excludedClusters=list_of(STRING),
    excludedRegions=list_of(STRING),
)
TAINT = record("taint", key=STRING, value=STRING, effect=STRING)
CLUSTER = record(
    "cluster",
    name=STRING,
    labels=_STRINGS,
    provider=STRING,
    region=STRING,
    zones=list_of(STRING),
    allocatable=_AMOUNTS,
    free=_AMOUNTS,
    ready=BOOL,
    taints=list_of(TAINT),
)
QUEUE = record(
    "queue",
    name=STRING,
    parent=STRING,
    priority=INT,
    weight=DOUBLE,
    guarantee=_AMOUNTS,
    max=_AMOUNTS,
    usage=_AMOUNTS,
)
RESOURCE = record("resource", apiVersion=STRING, kind=STRING, namespace=STRING, name=STRING)

# The variables each kind of expression sees.
MAPPING_VARS: Mapping[str, CelType] = {"job": JOB, "now": TIMESTAMP}
PLACEMENT_VARS: Mapping[str, CelType] = {
    "job": PLACED_JOB,
    "cluster": CLUSTER,
    "queue": QUEUE,
    "now": TIMESTAMP,
}
ADMISSION_VARS: Mapping[str, CelType] = {"object": DYN, "job": JOB, "now": TIMESTAMP}
SCOPE_VARS: Mapping[str, CelType] = {"binding": DYN, "resource": RESOURCE, "now": TIMESTAMP}


def quantity(text: ct.StringType) -> ct.DoubleType | celpy.CELEvalError:
    """CEL ``quantity("8Gi")``: a Kubernetes quantity in base units, as a double."""
    try:
        return ct.DoubleType(float(parse_quantity(str(text))))
    except QuantityError as err:
        return celpy.CELEvalError(str(err))  # celpy's way for a function to fail


def concatenate(left: Any, right: Any) -> Any:
    """CEL ``+``, keeping CEL types: cel-python adds two strings (or lists) with Python's ``+``,
    which gives a plain ``str`` (or ``list``) that lacks CEL's methods, so
    ``("," + s).contains(x)`` raised AttributeError out of the evaluation."""
    result = operator.add(left, right)
    if type(result) is str:
        return ct.StringType(result)
    if type(result) is list:
        return ct.ListType(result)
    return result


_FUNCTIONS: Mapping[str, Callable[..., Any]] = {"quantity": quantity}
FUNCTION_SIGS: Mapping[str, FunctionSig] = {"quantity": FunctionSig((STRING,), DOUBLE)}
# what programs run: the extra functions, and CEL's comparisons across int, uint and double
_RUNTIME_FUNCTIONS: Mapping[str, Callable[..., Any]] = {
    **_FUNCTIONS,
    **celnumbers.OPERATORS,
    **celstrings.FUNCTIONS,
    "_+_": concatenate,
}


@functools.cache
def environment() -> celpy.Environment:
    """The one celpy Environment, made on first use: making it builds celpy's Lark parser (a
    quarter of a second, seconds on a busy machine), which importing this module need not pay."""
    return celpy.Environment(runner_class=celtranspile.CompiledRunner)


_BASE_GLOBALS: dict[str, Any] = dict(celpy.evaluation.result.__globals__)
# Transpiled code names extra functions by module path (engine.policy.cel.quantity).
for _fn in (*_RUNTIME_FUNCTIONS.values(), celtranspile.select):
    _root = _fn.__module__.split(".")[0]
    _BASE_GLOBALS[_root] = sys.modules[_root]


@dataclass(frozen=True, slots=True)
class CelIssue:
    """A problem found when compiling an expression; line/column are inside the expression."""

    line: int
    column: int
    message: str


@dataclass(frozen=True, slots=True)
class CelError:
    """A failed evaluation, returned as a value."""

    expression: str
    message: str

    def __str__(self) -> str:
        return f"{self.message} (in {self.expression!r})"


@dataclass(frozen=True, slots=True)
class Activation:
    """Variables converted to CEL values once, reusable across evaluations."""

    values: Mapping[str, Any] = field(default_factory=dict)

    def extend(self, types: Mapping[str, CelType], **values: Any) -> Activation:
        converted = {name: to_cel(value, types.get(name, DYN)) for name, value in values.items()}
        return Activation({**self.values, **converted})


def activation(types: Mapping[str, CelType], **values: Any) -> Activation:
    """Convert plain Python values (dicts, lists, numbers, datetimes) for the given variables."""
    return Activation().extend(types, **values)


@dataclass(frozen=True, slots=True, eq=False)
class CelProgram:
    """One compiled expression with its expected result type.

    ``accesses`` are the paths into the variables the expression can read (see ``access``):
    inputs that agree on them give the same result, which is what memoisation keys on.
    ``budget``: the cost units one evaluation may spend in comprehensions (0: it has none).
    """

    source: str
    result_type: CelType
    _code: Any = field(repr=False)
    _base: Any = field(repr=False)
    accesses: frozenset[Path]
    budget: int = 0

    def evaluate(self, variables: Activation) -> Any:
        """The result as a plain Python value, or a CelError."""
        act = self._base.clone()
        act.identifiers.load_values(variables.values)
        scope = dict(_BASE_GLOBALS)
        scope["base_activation"] = act
        if self.budget:
            scope["_budget"] = celtranspile.Budget(self.budget)
        try:
            exec(self._code, scope)
        except celpy.CELEvalError as err:
            return CelError(self.source, _describe(err))
        value = scope.get("CEL")
        if isinstance(value, celpy.CELEvalError):
            return CelError(self.source, _describe(value))
        return from_cel(value, self.result_type, self.source)


def compile_expression(
    text: str,
    variables: Mapping[str, CelType],
    expected: CelType,
    limits: celcost.CelLimits = celcost.DEFAULT_LIMITS,
) -> CelProgram | list[CelIssue]:
    """Parse, type-check, estimate the cost and compile; every issue found, or the program."""
    try:
        tree = environment().compile(text)
    except celpy.CELParseError as err:
        line, column = err.line or 1, err.column or 1
        return [CelIssue(line, column, f"CEL syntax error: {_unexpected(text, line, column)}")]
    inferred, type_issues = celcheck.check(tree, variables, FUNCTION_SIGS)
    issues = [CelIssue(i.line, i.column, f"CEL type error: {i.message}") for i in type_issues]
    if not issues and not _assignable(inferred, expected):
        issues.append(
            CelIssue(1, 1, f"CEL type error: expression gives {inferred}, expected {expected}")
        )
    if issues:
        return issues
    cost = celcost.estimate(tree, variables)
    if cost.cost > limits.cost_limit:
        part = cost.costliest
        return [CelIssue(part.line, part.column, celcost.describe_excess(cost, limits.cost_limit))]
    accesses = access_paths(tree, variables.keys())
    runner = environment().program(tree, functions=dict(_RUNTIME_FUNCTIONS))
    transpiler = runner.tp
    metered = "_budget" in transpiler.source_text  # it has a comprehension
    return CelProgram(
        text,
        expected,
        transpiler.executable_code,
        transpiler.base_activation,
        accesses,
        limits.budget if metered else 0,
    )


def _unexpected(text: str, line: int, column: int) -> str:
    lines = text.splitlines() or [""]
    rest = lines[min(line, len(lines)) - 1][column - 1 :]
    token = rest.split()[0] if rest.strip() else ""
    return f"unexpected {token!r}" if token else "unexpected end of expression"


def _assignable(inferred: CelType, expected: CelType) -> bool:
    if DYN in (inferred, expected) or inferred == expected:
        return True
    if inferred.params and (inferred.kind, len(inferred.params)) == (
        expected.kind,
        len(expected.params),
    ):  # list(dyn) where list(string) is expected (``[]``): checked when it is used
        return all(map(_assignable, inferred.params, expected.params))
    # an int-valued expression where a double is expected is widened on the way out
    return expected == DOUBLE and inferred == INT


def _describe(err: celpy.CELEvalError) -> str:
    """The CEL-level message inside celpy's nested ``(message, type, args)`` error tuples."""
    current: Any = err
    while isinstance(current, BaseException | tuple) and current:
        args = current.args if isinstance(current, BaseException) else current
        if not args:
            break
        if isinstance(args[0], str) and args[0] != "evaluation error":
            return args[0]
        current = args[2] if len(args) > 2 else None
    return "evaluation error"


# -- results back to plain Python values --------------------------------------------------------


def from_cel(value: Any, expected: CelType, source: str) -> Any:
    """The plain Python value of a result, or a CelError if it has the wrong type."""
    if expected == DOUBLE and isinstance(value, ct.IntType | ct.DoubleType):
        return float(value)
    checks: Mapping[str, Callable[[Any], bool]] = {
        "bool": lambda v: isinstance(v, bool | ct.BoolType),
        "int": lambda v: isinstance(v, int) and not isinstance(v, bool | ct.BoolType),
        "string": lambda v: isinstance(v, str),
    }
    accepts = checks.get(expected.kind)
    if accepts is not None and not accepts(value):
        return CelError(source, f"expression gave {type(value).__name__}, expected {expected}")
    return _plain(value)


def _plain(value: Any) -> Any:
    if isinstance(value, ct.BoolType):
        return bool(value)
    if isinstance(value, ct.IntType | ct.UintType):
        return int(value)
    if isinstance(value, ct.DoubleType):
        return float(value)
    if isinstance(value, ct.StringType):
        return str(value)
    if isinstance(value, ct.MapType):
        return {_plain(k): _plain(v) for k, v in value.items()}
    if isinstance(value, ct.ListType):
        return [_plain(v) for v in value]
    return value
