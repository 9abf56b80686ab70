"""Static cost estimate of a CEL expression, from the tree ``celcheck.check`` walks.

Modelled on cel-go's ``checker/cost.go`` as Kubernetes uses it (ValidatingAdmissionPolicy
rejects an expression whose estimated cost exceeds its per-expression limit). A unit is one
O(1) operation (an identifier, a field selection, an operator, a call, building one element of
a literal); a comprehension costs its range times (2 + its body) per run, so nested ones
multiply; work done in C costs by length: a thousandth of a unit per character of a string, a
hundredth per element of a list scanned by ``in`` or copied by ``+``; ``matches`` costs the
string's part times a quarter unit per character of the pattern, as in cel-go.

Sizes are worst cases: literals exactly; fleetgate's typed ``job``/``cluster``/``queue`` fields
by the bounds in ``_FIELDS``; values inside a Kubernetes object (``object``, ``job.object``,
``binding``, all ``dyn``) by what a request can carry: a list of at most
``MAX_OBJECT_BYTES / 2`` elements (the shortest element, ``0``, and its comma), a string of at most
``MAX_OBJECT_BYTES`` characters; ``metadata`` (labels, annotations, name) is typed as in
Kubernetes' ObjectMeta, with the same bounds as ``job.labels``.

cel-python runs one operation in roughly 10 µs (one comprehension iteration ~40 µs), about a
hundred times cel-go, so the default limit is a tenth of Kubernetes' 1,000,000: about a second
for an expression at the limit.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from lark import Token, Tree

from engine.policy.celcheck import OPERATORS, CelType, _args, _trees, _unwrap

MAX_OBJECT_BYTES = 3 * 1024 * 1024  # Kubernetes' MaxRequestSizeBytes (etcd's 1.5 MiB × 2)
COST_LIMIT = 100_000
RUNTIME_BUDGET = COST_LIMIT  # what an admitted expression may spend at run time, per evaluation
LOOP_STEP = 2  # per iteration: the loop condition and the accumulation, as cel-go counts them
# Work done in C (scanning a string or a list) per character or element, in units: cel-go
# charges 0.1 per character of 50 ns units; cel-python's units are ~10 µs while Python scans a
# string at ~1 ns a character and a list of CEL values at ~50 ns an element (10x margin kept).
STRING_FACTOR, LIST_SCAN_FACTOR = 0.001, 0.01
REGEX_FACTOR = 0.25  # cel-go's RegexStringLength factor: a pattern's states per character
MACROS = frozenset({"exists", "all", "exists_one", "map", "filter"})


@dataclass(frozen=True, slots=True)
class CelLimits:
    """The static limit on an expression's estimated cost and its budget per evaluation."""

    cost_limit: int = COST_LIMIT
    budget: int = RUNTIME_BUDGET


DEFAULT_LIMITS = CelLimits()


@dataclass(frozen=True, slots=True)
class Shape:
    """What the estimate knows of a value: its kind and largest size (elements or characters)."""

    kind: str  # "list", "map", "string", "record", "dyn" or "scalar"
    size: int = 1
    elem: Shape | None = None  # a list's element or a map's key
    value: Shape | None = None  # a map's value
    fields: tuple[tuple[str, Shape], ...] = ()

    def field(self, name: str) -> Shape:
        if self.kind == "map" and self.value is not None:
            return self.value
        return dict(self.fields).get(name, DYN_VALUE if self.kind == "dyn" else SCALAR)

    def elements(self) -> int:
        return self.size if self.kind in ("list", "map") else DYN_ITEMS

    def element(self) -> Shape:
        return self.elem if self.kind in ("list", "map") and self.elem else DYN_VALUE

    def length(self) -> int:
        return self.size if self.kind in ("string", "scalar") else MAX_OBJECT_BYTES


DYN_ITEMS = (MAX_OBJECT_BYTES - 2) // 2  # `[0,0,…]`: one digit and a comma per element
SCALAR = Shape("scalar")
DYN_VALUE = Shape("dyn")


def _string(n: int) -> Shape:
    return Shape("string", n)


def _map(n: int, key: int, value: Shape) -> Shape:
    return Shape("map", n, _string(key), value)


NAME, LABEL_KEY, LABEL_VALUE = 253, 317, 63  # DNS subdomain; prefix/name; label value
ANNOTATIONS_BYTES = 256 * 1024  # Kubernetes' TotalAnnotationSizeLimitB
MAX_LABELS, MAX_RESOURCES, MAX_COMPONENTS, MAX_LIST = 256, 32, 64, 64
LABELS = _map(MAX_LABELS, LABEL_KEY, _string(LABEL_VALUE))
ANNOTATIONS = _map(MAX_LABELS, LABEL_KEY, _string(ANNOTATIONS_BYTES))
AMOUNTS = _map(MAX_RESOURCES, LABEL_KEY, SCALAR)
# Bounds of fleetgate's typed fields that are not the defaults (a string 253, a list 64).
_FIELDS: Mapping[str, Shape] = {
    "labels": LABELS,
    "annotations": ANNOTATIONS,
    "components": Shape("list", MAX_COMPONENTS),
    "zones": Shape("list", MAX_LIST, _string(NAME)),
}
METADATA = Shape(
    "record",
    fields=(
        ("name", _string(NAME)),
        ("namespace", _string(NAME)),
        ("labels", LABELS),
        ("annotations", ANNOTATIONS),
    ),
)
KUBERNETES_OBJECT = Shape("dyn", fields=(("metadata", METADATA),))
_OBJECTS = frozenset({"object", "binding"})  # dyn variables holding a Kubernetes object


def shape_of(kind: CelType, name: str = "") -> Shape:
    """The worst-case shape of a value of a declared type (``name``: the field or variable)."""
    if kind.kind == "dyn":
        return KUBERNETES_OBJECT if name in _OBJECTS else DYN_VALUE
    if kind.kind == "record":
        return Shape("record", fields=tuple((f, shape_of(t, f)) for f, t in kind.fields))
    known = _FIELDS.get(name)
    if kind.kind == "list":
        elem = known.elem if known and known.elem else shape_of(kind.params[0])
        return Shape("list", known.size if known else MAX_LIST, elem)
    if kind.kind == "map":
        if known:
            return known
        return _map(MAX_RESOURCES, LABEL_KEY, shape_of(kind.params[1]))
    if kind.kind == "string":
        return _string(NAME)
    return SCALAR


@dataclass(slots=True)
class CostPart:
    """The costliest single part found so far: its cost, where it is and what it is."""

    cost: int = 0
    line: int = 1
    column: int = 1
    what: str = ""


@dataclass(frozen=True, slots=True)
class Estimate:
    cost: int
    costliest: CostPart = field(default_factory=CostPart)


def _units(chars: int, factor: float) -> int:
    return max(1, math.ceil(chars * factor))


def _count(n: int) -> str:
    return f"{n:,}" if n < 10**12 else f"{n:.2g}"


def _join(a: Shape, b: Shape) -> Shape:
    if a.kind != b.kind:
        return DYN_VALUE
    return a if a.size >= b.size else b


Result = tuple[int, Shape]


class _Coster:
    def __init__(self, variables: Mapping[str, CelType]) -> None:
        self.scopes: list[dict[str, Shape]] = [
            {name: shape_of(t, name) for name, t in variables.items()}
        ]
        self.runs = 1  # how many times the node being visited runs: its loops' sizes multiplied
        self.depth = 0  # how many comprehensions enclose it
        self.costliest = CostPart()

    def note(self, cost: int, at: Tree | Token, what: str) -> None:
        total = cost * self.runs
        if total > self.costliest.cost:
            pos = at if isinstance(at, Token) else at.meta
            line, column = getattr(pos, "line", None) or 1, getattr(pos, "column", None) or 1
            if self.runs > 1:
                loops = f"{self.depth} comprehension{'s' if self.depth > 1 else ''}"
                what += f", run up to {_count(self.runs)} times inside {loops}"
            self.costliest = CostPart(total, line, column, what)

    def visit(self, node: Tree) -> Result:
        node = _unwrap(node)
        handler = getattr(self, f"_{node.data}", None)
        if handler is None:  # celcheck has rejected it; count what is inside
            parts = [self.visit(c) for c in _trees(node)]
            return 1 + sum(c for c, _ in parts), DYN_VALUE
        return handler(node)

    def _expr(self, node: Tree) -> Result:
        cond, then, other = (self.visit(c) for c in _trees(node))
        return cond[0] + max(then[0], other[0]), _join(then[1], other[1])

    def _logical(self, node: Tree) -> Result:
        return sum(self.visit(c)[0] for c in _trees(node)), SCALAR

    _conditionalor = _conditionaland = _logical

    def _binary(self, node: Tree) -> Result:
        op_node, right = _trees(node)
        op = OPERATORS[op_node.data]
        (lc, ls), (rc, rs) = self.visit(_trees(op_node)[0]), self.visit(right)
        own, shape = 1, SCALAR
        if op == "in":
            scan = rs.kind not in ("map", "record") and not rs.fields
            own = _units(rs.elements(), LIST_SCAN_FACTOR) if scan else 1
        elif op in ("==", "!=", "<", "<=", ">", ">="):
            own = _units(min(ls.length(), rs.length()), STRING_FACTOR)
        elif op == "+" and "string" in (ls.kind, rs.kind):
            shape = _string(ls.length() + rs.length())
            own = _units(shape.size, STRING_FACTOR)
        elif op == "+" and "list" in (ls.kind, rs.kind):
            shape = Shape("list", ls.elements() + rs.elements(), _join(ls.element(), rs.element()))
            own = _units(shape.size, LIST_SCAN_FACTOR)
        elif op == "+" and ls.kind == rs.kind == "dyn":
            shape = DYN_VALUE
            own = _units(2 * MAX_OBJECT_BYTES, STRING_FACTOR)
        meta = op_node.meta  # the operator token is filtered out; it ends op_node
        where = Token("OP", op, line=meta.end_line, column=meta.end_column - len(op))
        self.note(own, where, f"{op} on values of up to {_count(max(ls.length(), rs.length()))}")
        return lc + rc + own, shape

    _relation = _addition = _multiplication = _binary

    def _unary(self, node: Tree) -> Result:
        return 1 + self.visit(_trees(node)[1])[0], SCALAR

    def _member_dot(self, node: Tree) -> Result:
        cost, shape = self.visit(node.children[0])
        return cost + 1, shape.field(str(node.children[1]))

    def _member_index(self, node: Tree) -> Result:
        (tc, ts), (kc, _) = (self.visit(c) for c in _trees(node))
        shape = ts.value if ts.kind == "map" and ts.value else ts.element()
        return tc + kc + 1, shape

    def _member_dot_arg(self, node: Tree) -> Result:
        name = node.children[1]
        receiver = self.visit(node.children[0])
        if name in MACROS:
            return self.comprehension(node, str(name), receiver, _args(node))
        args = [self.visit(a) for a in _args(node)]
        if name == "split":
            return self.split(name, receiver, args, _args(node))
        return self.call(name, [receiver, *args])

    def split(self, name: Token, receiver: Result, args: list[Result], trees: list[Tree]) -> Result:
        """``s.split(sep[, n])``: linear in ``s``; at most one item per character and a last
        one, or at most ``n`` when it is a literal (the way to bound a comprehension over it)."""
        cost, _ = self.call(name, [receiver, *args])
        length = receiver[1].length()
        items = length + 1
        if len(trees) == 2 and (limit := _int_literal(trees[1])) is not None and limit >= 0:
            items = min(items, limit)
        return cost, Shape("list", items, _string(length))

    def _ident_arg(self, node: Tree) -> Result:
        name = node.children[0]
        args = [self.visit(a) for a in _args(node)]
        return self.call(name, args)

    def call(self, name: Token, args: list[Result]) -> Result:
        """A function or method call; ``args`` starts with the receiver of a method."""
        shapes = [s for _, s in args]
        own, shape = 1, SCALAR
        if name in ("startsWith", "endsWith") and len(shapes) == 2:
            own = _units(shapes[1].length(), STRING_FACTOR)
        elif name == "contains" and len(shapes) == 2:
            own = _units(shapes[0].length(), STRING_FACTOR)
            own *= _units(shapes[1].length(), STRING_FACTOR)
        elif name == "matches" and len(shapes) == 2:
            own = _units(shapes[0].length() + 1, STRING_FACTOR)
            own *= _units(shapes[1].length(), REGEX_FACTOR)
        elif name in ("dyn", "has") and shapes:
            shape = shapes[0]
        elif name in ("lowerAscii", "upperAscii", "trim") and shapes:
            shape = _string(shapes[0].length())  # no longer than the string
            own = _units(shape.size, STRING_FACTOR)
        elif name == "join" and shapes:
            items, sep = shapes[0], shapes[1].length() if len(shapes) > 1 else 0
            shape = _string(items.elements() * (items.element().length() + sep))
            own = _units(shape.size, STRING_FACTOR)
        elif name in ("string", "bytes") and shapes:
            shape = _string(shapes[0].length() if shapes[0].kind != "scalar" else 40)
            own = _units(shape.size, STRING_FACTOR)
        elif name not in ("size", "type") and shapes and shapes[0].kind in ("string", "dyn"):
            own = _units(shapes[0].length(), STRING_FACTOR)  # parsing a string
        self.note(own, name, f"{name}() on values of up to {_count(max(shapes[0].length(), 1))}"
                  if shapes else f"{name}()")  # fmt: skip
        return sum(c for c, _ in args) + own, shape

    def comprehension(self, node: Tree, name: str, receiver: Result, args: list[Tree]) -> Result:
        cost, shape = receiver
        size = shape.elements()
        var = _unwrap(args[0]) if args else None
        bound = str(var.children[0]) if var is not None and var.data == "ident" else ""
        what = f"{name}() over up to {_count(size)} elements"
        self.note(LOOP_STEP * size, node.children[1], what)
        outer = self.runs
        self.runs, self.depth = outer * max(size, 1), self.depth + 1
        self.scopes.append({bound: shape.element()})
        try:
            body = [self.visit(a) for a in args[1:]]
        finally:
            self.scopes.pop()
            self.runs, self.depth = outer, self.depth - 1
        body_cost = sum(c for c, _ in body)
        if name == "map":
            result = Shape("list", size, body[-1][1] if body else DYN_VALUE)
        elif name == "filter":
            result = Shape("list", size, shape.element())
        else:
            result = SCALAR
        return cost + size * (LOOP_STEP + body_cost), result

    def _ident(self, node: Tree) -> Result:
        name = str(node.children[0])
        for scope in reversed(self.scopes):
            if name in scope:
                return 1, scope[name]
        return 1, SCALAR  # a type name

    def _literal(self, node: Tree) -> Result:
        token = node.children[0]
        if isinstance(token, Token) and token.type in ("STRING_LIT", "MLSTRING_LIT", "BYTES_LIT"):
            return 0, _string(len(token.value))
        return 0, SCALAR

    def _list_lit(self, node: Tree) -> Result:
        items = [self.visit(e) for e in _args(node)]
        elem = items[0][1] if items else DYN_VALUE
        for _, s in items[1:]:
            elem = _join(elem, s)
        return 1 + len(items) + sum(c for c, _ in items), Shape("list", len(items), elem)

    def _map_lit(self, node: Tree) -> Result:
        inits = _trees(node)
        items = [self.visit(e) for e in _trees(inits[0])] if inits else []
        keys, values = items[0::2], items[1::2]
        key = keys[0][1] if keys else DYN_VALUE
        value = values[0][1] if values else DYN_VALUE
        for (_, k), (_, v) in zip(keys[1:], values[1:], strict=True):
            key, value = _join(key, k), _join(value, v)
        cost = 1 + len(keys) + sum(c for c, _ in items)
        return cost, Shape("map", len(keys), key, value)


def _int_literal(node: Tree) -> int | None:
    node = _unwrap(node)
    token = node.children[0] if node.data == "literal" and node.children else None
    if isinstance(token, Token) and token.type == "INT_LIT":
        try:
            return int(token.value, 0)
        except ValueError:
            return None
    return None


def estimate(tree: Tree, variables: Mapping[str, CelType]) -> Estimate:
    """The worst-case cost of evaluating a type-checked expression once, and its costliest part."""
    coster = _Coster(variables)
    cost, _ = coster.visit(tree)
    return Estimate(cost, coster.costliest)


def describe_excess(found: Estimate, limit: int) -> str:
    part = found.costliest
    return (
        f"CEL cost: estimated cost {_count(found.cost)} exceeds the limit {_count(limit)} "
        f"(the costliest part, {_count(part.cost)}: {part.what})"
    )


def step_weight(body: Sequence[Tree]) -> int:
    """Units one iteration of a comprehension with this body (its predicate and expression)
    spends at run time: ``LOOP_STEP`` plus one per operation of the body outside nested
    comprehensions, which spend their own."""
    count, pending = LOOP_STEP, list(body)
    while pending:
        node = _unwrap(pending.pop())
        count += 1
        if node.data == "member_dot_arg" and node.children[1] in MACROS:
            pending.append(node.children[0])
        else:
            pending.extend(_trees(node))
    return count
