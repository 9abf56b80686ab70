"""Static type checker for CEL trees parsed by cel-python (which has no checker of its own).

Walks the lark tree from ``celpy.Environment.compile``, infers a ``CelType`` and collects every
``TypeIssue`` with its position inside the expression. Only what fleetgate can evaluate (cel-python
0.5.0 with the number comparisons of ``celnumbers``) is accepted: e.g. ``1 + 2.0`` is rejected
because CEL has no arithmetic across numeric types, while ``1 < 2.0`` and ``1 == 1u`` are
accepted, as Kubernetes (cel-go) compares int, uint and double with each other.

The types themselves, the built-in signatures and the operator typing live in ``celtypes`` (no
parse tree there); they are re-exported here, where the rest of fleetgate imports them from.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping, Sequence

from lark import Token, Tree

from engine.policy.celtypes import (
    BOOL,
    BYTES,
    DOUBLE,
    DURATION,
    DYN,
    GLOBALS,
    INT,
    MACROS,
    METHODS,
    NULL,
    NUMERIC,
    STRING,
    TIMESTAMP,
    TYPE,
    UINT,
    CelType,
    FunctionSig,
    Overloads,
    TypeIssue,
    binary_result,
    common,
    list_of,
    map_of,
    record,
)

__all__ = [
    "BOOL", "BYTES", "DOUBLE", "DURATION", "DYN", "GLOBALS", "INT", "MACROS", "METHODS", "NULL",
    "OPERATORS", "PASS_THROUGH", "STRING", "TIMESTAMP", "TYPE", "UINT",
    "CelType", "FunctionSig", "TypeIssue", "check", "common", "list_of", "map_of", "record",
]  # fmt: skip

TYPE_NAMES = frozenset(
    {"int", "uint", "double", "string", "bool", "bytes", "list", "map", "null_type", "type"}
)
PASS_THROUGH = frozenset(
    {"expr", "conditionalor", "conditionaland", "relation", "addition", "multiplication"}
    | {"unary", "member", "primary", "paren_expr"}
)
OPERATORS = {
    "relation_lt": "<", "relation_le": "<=", "relation_gt": ">", "relation_ge": ">=",
    "relation_eq": "==", "relation_ne": "!=", "relation_in": "in",
    "addition_add": "+", "addition_sub": "-",
    "multiplication_mul": "*", "multiplication_div": "/", "multiplication_mod": "%",
}  # fmt: skip
LITERALS = {
    "INT_LIT": INT, "UINT_LIT": UINT, "FLOAT_LIT": DOUBLE, "STRING_LIT": STRING,
    "MLSTRING_LIT": STRING, "BYTES_LIT": BYTES, "BOOL_LIT": BOOL, "NULL_LIT": NULL,
}  # fmt: skip
UNSUPPORTED = {
    "member_object": "message construction",
    "dot_ident": "a leading-dot name",
    "dot_ident_arg": "a leading-dot call",
}


def _mix_hint(a: CelType, b: CelType, operands: Sequence[Tree]) -> str:
    """For int mixed with double or uint: how to write the int side so the types match."""
    kinds = {a.kind, b.kind}
    if len(kinds) != 2 or not kinds <= NUMERIC or "int" not in kinds:
        return ""
    target = "double" if "double" in kinds else "uint"
    int_side = _unwrap(operands[0] if a.kind == "int" else operands[1])
    token = int_side.children[0] if int_side.data == "literal" else None
    if isinstance(token, Token) and token.type == "INT_LIT":
        written = f"{token.value}.0" if target == "double" else f"{token.value}u"
        return f"; write {written}"
    return f"; write {target}(...) around the int operand"


def _suggest(name: str, candidates: Sequence[str]) -> str:
    close = difflib.get_close_matches(name, candidates, n=1)
    return f" (did you mean '{close[0]}'?)" if close else ""


def _trees(node: Tree) -> list[Tree]:
    return [c for c in node.children if isinstance(c, Tree)]


def _args(node: Tree) -> list[Tree]:
    exprlist = [c for c in _trees(node) if c.data == "exprlist"]
    return _trees(exprlist[0]) if exprlist else []


def _unwrap(node: Tree) -> Tree:
    while node.data in PASS_THROUGH and len(node.children) == 1:
        node = node.children[0]
    return node


class _Checker:
    def __init__(self, variables: Mapping[str, CelType], functions: Mapping[str, FunctionSig]):
        self.scopes: list[Mapping[str, CelType]] = [variables]
        self.functions = functions
        self.issues: list[TypeIssue] = []

    def report(self, node: Tree | Token, message: str) -> CelType:
        pos = node if isinstance(node, Token) else node.meta
        line, column = getattr(pos, "line", None) or 1, getattr(pos, "column", None) or 1
        self.issues.append(TypeIssue(line, column, message))
        return DYN

    def visit(self, node: Tree) -> CelType:
        node = _unwrap(node)
        handler: Callable[[Tree], CelType] | None = getattr(self, f"_{node.data}", None)
        if handler is None:
            what = UNSUPPORTED.get(node.data, node.data)
            return self.report(node, f"{what} is not supported in fleetgate policies")
        return handler(node)

    # --- operators -------------------------------------------------------------------------
    def _expr(self, node: Tree) -> CelType:
        cond, then, other = _trees(node)
        ctype = self.visit(cond)
        if ctype not in (BOOL, DYN):
            self.report(cond, f"condition must be bool, got {ctype}")
        a, b = self.visit(then), self.visit(other)
        result = common(a, b)
        return result if result else self.report(other, f"branches differ: {a} and {b}")

    def _logical(self, node: Tree) -> CelType:
        op = "||" if node.data == "conditionalor" else "&&"
        for operand in _trees(node):
            t = self.visit(operand)
            if t not in (BOOL, DYN):
                self.report(operand, f"operand of {op} must be bool, got {t}")
        return BOOL

    def _binary(self, node: Tree) -> CelType:
        op_node, right = _trees(node)
        op = OPERATORS[op_node.data]
        left = _trees(op_node)[0]
        a, b = self.visit(left), self.visit(right)
        result = binary_result(op, a, b)
        if result is None:
            meta = op_node.meta  # the operator token itself is filtered out; it ends op_node
            where = Token("OP", op, line=meta.end_line, column=meta.end_column - len(op))
            self.report(
                where, f"no matching overload for {a} {op} {b}{_mix_hint(a, b, (left, right))}"
            )
            return BOOL if op in ("<", "<=", ">", ">=", "==", "!=", "in") else DYN
        return result

    _conditionalor = _conditionaland = _logical
    _relation = _addition = _multiplication = _binary

    def _unary(self, node: Tree) -> CelType:
        op_node, operand = _trees(node)
        t = self.visit(operand)
        if op_node.data == "unary_not":
            if t not in (BOOL, DYN):
                self.report(op_node, f"no matching overload for !{t}")
            return BOOL
        if t.kind in ("int", "double", "duration", "dyn"):
            return t
        return self.report(op_node, f"no matching overload for -{t}")

    # --- members ---------------------------------------------------------------------------
    def _member_dot(self, node: Tree) -> CelType:
        target, field = node.children[0], node.children[1]
        t = self.visit(target)
        if t == DYN:
            return DYN
        if t.kind == "record":
            names = [n for n, _ in t.fields]
            found = dict(t.fields).get(str(field))
            if found is None:
                return self.report(field, f"no field '{field}' on {t}{_suggest(field, names)}")
            return found
        if t.kind == "map" and t.params[0] in (STRING, DYN):
            return t.params[1]
        return self.report(field, f"no field '{field}' on {t}")

    def _member_index(self, node: Tree) -> CelType:
        target, key = _trees(node)
        t, k = self.visit(target), self.visit(key)
        if t.kind == "list":
            if k not in (INT, UINT, DYN):
                self.report(key, f"list index must be int, got {k}")
            return t.params[0]
        if t.kind == "map":
            if not common(t.params[0], k):
                self.report(key, f"map key must be {t.params[0]}, got {k}")
            return t.params[1]
        if t == DYN:
            return DYN
        hint = f"; use {t}.field" if t.kind == "record" else ""
        return self.report(node, f"cannot index {t}{hint}")

    def _member_dot_arg(self, node: Tree) -> CelType:
        name = node.children[1]
        receiver = self.visit(node.children[0])
        if name in MACROS:
            return self.macro(name, receiver, _args(node))
        arg_types = [self.visit(a) for a in _args(node)]
        if name not in METHODS:
            if name in GLOBALS:
                return self.report(name, f"'{name}' must be called as a function: {name}(x)")
            return self.report(name, f"unknown function '{name}'{_suggest(name, [*METHODS])}")
        return self.call(name, METHODS[name], [receiver, *arg_types], method=True)

    def _ident_arg(self, node: Tree) -> CelType:
        name = node.children[0]
        args = _args(node)
        if name == "has":
            return self.has(name, args)
        arg_types = [self.visit(a) for a in args]
        if name in self.functions:
            sig = self.functions[name]
            return self.call(name, [(sig.params, sig.result)], arg_types, method=False)
        if name in GLOBALS:
            return self.call(name, GLOBALS[name], arg_types, method=False)
        if name in METHODS:
            return self.report(name, f"'{name}' must be called as a method: x.{name}(...)")
        known = [*GLOBALS, *self.functions, "has"]
        return self.report(name, f"unknown function '{name}'{_suggest(name, known)}")

    def call(self, name: Token, overloads: Overloads, args: list[CelType], method: bool) -> CelType:
        extra = 1 if method else 0
        arities = sorted({len(params) - extra for params, _ in overloads})
        if len(args) - extra not in arities:
            noun = "argument" if arities == [1] else "arguments"
            expected = f"{' or '.join(map(str, arities))} {noun}, got {len(args) - extra}"
            return self.report(name, f"{name}() expects {expected}")
        for params, result in overloads:
            if len(params) == len(args) and all(map(common, params, args)):
                return result
        shown = ", ".join(str(a) for a in args[extra:])
        where = f"{args[0]}.{name}" if method else str(name)
        return self.report(name, f"no matching overload for {where}({shown})")

    def has(self, name: Token, args: list[Tree]) -> CelType:
        if len(args) != 1:
            return self.report(name, f"has() expects 1 argument, got {len(args)}")
        target = _unwrap(args[0])
        if target.data != "member_dot":
            self.report(args[0], "has() argument must be a field selection like x.f")
        else:
            self.visit(target)
        return BOOL

    def macro(self, name: Token, receiver: CelType, args: list[Tree]) -> CelType:
        arities = (2, 3) if name == "map" else (2,)
        if len(args) not in arities:
            expected = " or ".join(map(str, arities))
            return self.report(name, f"{name}() expects {expected} arguments, got {len(args)}")
        elem = receiver.params[0] if receiver.kind in ("list", "map") else DYN
        if receiver.kind not in ("list", "map", "dyn"):
            self.report(name, f"{name}() needs a list or map, got {receiver}")
        var = _unwrap(args[0])
        if var.data != "ident":
            self.report(args[0], f"{name}() variable must be a simple identifier")
        self.scopes.append({str(var.children[0]): elem} if var.data == "ident" else {})
        try:
            body = [self.visit(a) for a in args[1:]]
        finally:
            self.scopes.pop()
        predicates = body[:-1] if name == "map" else body
        for arg, t in zip(args[1:], predicates, strict=False):
            if t not in (BOOL, DYN):
                self.report(arg, f"{name}() predicate must be bool, got {t}")
        if name == "map":
            return list_of(body[-1])
        return list_of(elem) if name == "filter" else BOOL

    # --- primaries -------------------------------------------------------------------------
    def _ident(self, node: Tree) -> CelType:
        name = str(node.children[0])
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        if name in TYPE_NAMES:
            return TYPE
        known = [n for scope in self.scopes for n in scope]
        return self.report(node, f"undeclared reference to '{name}'{_suggest(name, known)}")

    def _literal(self, node: Tree) -> CelType:
        token = node.children[0]
        return LITERALS.get(token.type, DYN) if isinstance(token, Token) else DYN

    def _list_lit(self, node: Tree) -> CelType:
        return list_of(self.fold([self.visit(e) for e in _args(node)]))

    def _map_lit(self, node: Tree) -> CelType:
        inits = _trees(node)
        types = [self.visit(e) for e in _trees(inits[0])] if inits else []
        return map_of(self.fold(types[0::2]), self.fold(types[1::2]))

    def fold(self, types: list[CelType]) -> CelType:
        result: CelType | None = types[0] if types else DYN
        for t in types[1:]:
            result = common(result, t) if result else None
        return result or DYN


def check(
    tree: Tree,
    variables: Mapping[str, CelType],
    functions: Mapping[str, FunctionSig] | None = None,
) -> tuple[CelType, list[TypeIssue]]:
    """Infer the expression's type; return it with every issue found (empty list when fine).

    When an issue makes a sub-expression's type unknown, checking continues with DYN so later
    issues are still reported.
    """
    checker = _Checker(variables, functions or {})
    result = checker.visit(tree)
    return result, checker.issues
