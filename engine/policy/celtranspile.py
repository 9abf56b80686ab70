"""cel-python's transpiler (its compiled runner), with two fixes fleetgate's CEL relies on.

1. ``has(e.f)`` gives a CEL ``bool``. cel-python 0.5.0 transpiles it to Python's
   ``not isinstance(...)``, a plain ``bool``, which its own ``!``, ``? :``, ``&&`` and ``||``
   reject ("no such overload"): ``!has(x.f)`` and ``has(x.f) ? a : b`` failed at run time while
   the interpreted runner (``macro_has_eval``) returns a ``BoolType``.
2. ``e.f`` where ``e`` is not a map (a string, list, number or null inside a ``dyn`` value such
   as ``object``) is a CEL error. cel-python transpiles it to ``e.get('f')``, which raised
   ``AttributeError`` out of the evaluation instead of giving an error value.

``has(e.f)`` keeps cel-python's meaning otherwise: true when ``e.f`` evaluates without error,
so a missing or non-map ``e`` gives false rather than an error.

It also meters comprehensions: each iteration spends its ``celcost.step_weight`` from the
``Budget`` the evaluation puts in the code's globals as ``_budget``; running out raises
``BudgetExceeded``, which no ``result()`` wrapper catches, so the whole evaluation fails.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from string import Template
from typing import Any

import celpy
import celpy.evaluation
from celpy.evaluation import CELEvalError, Phase1Transpiler, Phase2Transpiler, TranspilerTree

from engine.policy.celcost import MACROS, step_weight

# cel-python's template for has(), with the result made a CEL bool.
_HAS = Template(
    "# ident_arg has:\n"
    "ex_${n}_h = lambda activation: ${exprlist}\n"
    "ex_${n} = lambda activation: celpy.celtypes.BoolType("
    "not isinstance(celpy.evaluation.result(activation, ex_${n}_h), CELEvalError))\n"
)


def select(container: Any, name: str) -> Any:
    """CEL ``container.name``, as transpiled code calls it.

    Maps (and cel-python's name containers) look the name up as before; an error value passes
    through; any other value has no fields, which ``celpy.evaluation.result`` turns from a
    ``TypeError`` into the CEL error "no such overload", as for ``"text"["f"]``.
    """
    if isinstance(container, CELEvalError):
        return container
    get = getattr(container, "get", None)
    if get is None:
        raise TypeError(f"no field {name!r} on a value of type {type(container).__name__}")
    return get(name)


_SELECT = f"{select.__module__}.{select.__qualname__}"


class BudgetExceeded(CELEvalError):
    """An evaluation spent its whole runtime budget."""


class Budget:
    """The cost units one evaluation may still spend."""

    __slots__ = ("remaining", "total")

    def __init__(self, total: int) -> None:
        self.remaining = self.total = total


def metered(budget: Budget, step: int, source: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``source`` (a comprehension's range) with ``step`` spent from ``budget`` per element."""

    def elements(activation: Any) -> Iterator[Any]:
        for value in source(activation):
            budget.remaining -= step
            if budget.remaining < 0:
                raise BudgetExceeded(
                    f"CEL cost: the evaluation ran out of its budget of {budget.total:,} units"
                )
            yield value

    return elements


_METERED = f"{metered.__module__}.{metered.__qualname__}"
# cel-python's macro template, with the range metered.
_MACRO = Template(
    "# member_dot_arg ${macro}:\n"
    "ex_${n}_l = lambda activation: ${member}\n"
    "ex_${n}_x = lambda activation: ${expr}\n"
    "ex_${n} = lambda activation: celpy.evaluation.macro_${macro}(activation, '${bind_variable}',"
    f" ex_${{n}}_x, {_METERED}(_budget, ${{step}}, ex_${{n}}_l))\n"
)


class _Phase1(Phase1Transpiler):
    def member_dot(self, tree: TranspilerTree) -> None:
        member, name = tree.children
        tree.transpiled = f"{_SELECT}({member.transpiled}, {str(name)!r})"

    def member_dot_arg(self, tree: TranspilerTree) -> None:
        super().member_dot_arg(tree)
        if str(tree.children[1]) in MACROS and len(tree.children) == 3:
            _, fields = tree.checked_exception  # cel-python's template and its fields
            weight = str(step_weight(tree.children[2].children[1:]))
            tree.checked_exception = (_MACRO, {**fields, "step": lambda _tree: weight})

    def ident_arg(self, tree: TranspilerTree) -> None:
        super().ident_arg(tree)
        if str(tree.children[0]) == "has":
            _, fields = tree.checked_exception  # cel-python's template and its fields
            tree.checked_exception = (_HAS, fields)


class Transpiler(celpy.evaluation.Transpiler):
    """``celpy.evaluation.Transpiler`` with ``_Phase1`` in place of its first phase."""

    def transpile(self) -> None:
        _Phase1(self).visit(self.ast)
        phase_2 = Phase2Transpiler(self)
        phase_2.visit(self.ast)
        self.source_text = "\n".join(phase_2.statements(self.ast))
        self.executable_code = compile(self.source_text, "<string>", "exec")


class CompiledRunner(celpy.CompiledRunner):
    """``celpy.CompiledRunner`` transpiling with ``Transpiler``."""

    def __init__(
        self,
        environment: celpy.Environment,
        ast: TranspilerTree,
        functions: dict[str, Any] | None = None,
    ) -> None:
        # not celpy.CompiledRunner.__init__: it transpiles with the stock Transpiler
        celpy.Runner.__init__(self, environment, ast, functions)
        self.tp = Transpiler(ast=ast, activation=self.new_activation())
        self.tp.transpile()
