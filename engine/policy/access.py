"""What a CEL expression reads, so results can be memoised by only those parts of its variables.

``access_paths`` walks the lark tree that cel-python parses (the same tree ``celcheck`` checks)
and returns the paths, like ``("job", "labels", "fleetgate.io/queue")``, that the expression can
read. ``Projector`` turns variable values into a hashable key of exactly those parts. The pair is
sound: two inputs with the same key give the same result, because the key holds, for every path,
the value found there (with its exact type), or where and why the walk stopped. ``prune`` cuts a
value down to those parts: it has the same key, so evaluating on it gives the same result, and
only what is read needs converting into CEL.

Dicts are frozen in iteration order: ``m.map(k, k)`` returns keys in that order, so two dicts with
the same items in different orders can give different results. Mapping keys must be strings (as
in JSON and Kubernetes objects): the CEL conversion turns other keys into strings, which a lookup
here does not model.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Collection, Hashable, Iterable, Mapping
from typing import Any, Final

from lark import Token, Tree

from engine.policy.celcheck import MACROS, _args, _trees, _unwrap

Path = tuple[str | int, ...]

# A string literal without escapes or prefixes, and a non-negative decimal int literal: the only
# index constants decoded here. Anything else (escapes, r"", 1u, -1, 0x1) counts as non-constant,
# so the whole indexed value is recorded, which is always sound.
_PLAIN_STRING = re.compile(r'^(?:"([^"\\\n]*)"|\'([^\'\\\n]*)\')$')
_PLAIN_INT = re.compile(r"^(?:0|[1-9][0-9]*)$")


def access_paths(tree: Tree, variables: Collection[str]) -> frozenset[Path]:
    """The minimal set of paths, rooted at ``variables``, that the expression can read."""
    finder = _Finder(frozenset(variables))
    finder.visit(tree)
    return minimal(finder.paths)


def minimal(paths: Iterable[Path]) -> frozenset[Path]:
    """Drop every path that has a proper prefix in the set (the prefix already holds it)."""
    unique = set(paths)
    return frozenset(p for p in unique if not any(p[:n] in unique for n in range(1, len(p))))


def _constant(node: Tree) -> str | int | None:
    """The value of a string or int literal usable as a path step, else None."""
    node = _unwrap(node)
    if node.data != "literal" or not isinstance(token := node.children[0], Token):
        return None
    if token.type == "STRING_LIT" and (match := _PLAIN_STRING.match(token.value)):
        return match.group(1) if match.group(1) is not None else match.group(2)
    if token.type == "INT_LIT" and _PLAIN_INT.match(token.value):
        return int(token.value)
    return None


class _Finder:
    def __init__(self, roots: frozenset[str]):
        self.roots = roots
        self.bound: list[str] = []  # macro variables in scope, innermost last
        self.paths: set[Path] = set()

    def chain(self, node: Tree) -> Path | None:
        """The path of a chain of selections and constant indexes on a root, or None."""
        node = _unwrap(node)
        if node.data == "ident":
            name = str(node.children[0])
            return (name,) if name in self.roots and name not in self.bound else None
        if node.data == "member_dot":
            base = self.chain(node.children[0])
            return None if base is None else (*base, str(node.children[1]))
        if node.data == "member_index":
            target, key = _trees(node)
            base = self.chain(target)
            step = _constant(key)
            return None if base is None or step is None else (*base, step)
        return None

    def visit(self, node: Tree) -> None:
        node = _unwrap(node)
        path = self.chain(node)
        if path is not None:  # includes has(x.f): its argument is the chain x.f
            self.paths.add(path)
            return
        if node.data == "relation" and self.key_in_chain(node):
            return
        if node.data == "member_dot_arg" and str(node.children[1]) in MACROS:
            self.macro(node)
            return
        for child in node.children:
            if isinstance(child, Tree):
                self.visit(child)

    def key_in_chain(self, node: Tree) -> bool:
        """``"k" in chain``: record chain + (k,), which holds both presence and value of k."""
        op_node, right = _trees(node)
        if op_node.data != "relation_in":
            return False
        key = _constant(_trees(op_node)[0])
        base = self.chain(right)
        if not isinstance(key, str) or base is None:  # `0 in list` is membership, not index
            return False
        self.paths.add((*base, key))
        return True

    def macro(self, node: Tree) -> None:
        self.visit(node.children[0])  # the receiver is iterated: recorded whole
        args = _args(node)
        var = _unwrap(args[0]) if args else None
        name = str(var.children[0]) if var is not None and var.data == "ident" else None
        if name is not None:
            self.bound.append(name)
        try:
            for arg in args[1:] if name is not None else args:
                self.visit(arg)
        finally:
            if name is not None:
                self.bound.pop()


# -- projection ---------------------------------------------------------------------------------


class _Marker:
    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return self.name


MISSING: Final = _Marker("MISSING")  # (MISSING, depth): no key / index at that step
STOPPED: Final = _Marker("STOPPED")  # (STOPPED, depth, value): the value there has no such step
MISSING_ROOT: Final = (MISSING, 0)  # the part of a variable that is not given at all
_ABSENT: Final = _Marker("ABSENT")


class Projector:
    """Hashable keys of exactly the parts of the variables at the given paths.

    ``key(values)`` is the tuple of ``part(root, values[root])`` for each root in ``roots``
    (``MISSING_ROOT`` for a root absent from ``values``), so a caller can project each job and
    each cluster once and build pair keys from the parts.
    """

    __slots__ = ("_tries", "_walks", "paths", "roots")

    def __init__(self, paths: Iterable[Path]):
        self.paths: tuple[Path, ...] = tuple(sorted(minimal(paths), key=_path_order))
        self.roots: tuple[str, ...] = tuple(sorted({str(p[0]) for p in self.paths}))
        self._walks: dict[str, tuple[tuple[tuple[str | int, ...], tuple[Any, ...]], ...]] = {
            root: tuple(
                (p[1:], tuple((MISSING, depth) for depth in range(len(p))))
                for p in self.paths
                if p[0] == root
            )
            for root in self.roots
        }
        self._tries: dict[str, _Trie] = {root: _trie(self.paths, root) for root in self.roots}

    def key(self, values: Mapping[str, Any]) -> Hashable:
        """The parts of ``values`` (root variable name → value) at the paths."""
        return tuple(
            self.part(root, values[root]) if root in values else MISSING_ROOT for root in self.roots
        )

    def part(self, root: str, value: Any) -> tuple[Hashable, ...]:
        """One frozen, type-tagged value per path of ``root``, in ``paths`` order."""
        found: list[Hashable] = []
        for steps, missing in self._walks.get(root, ()):
            node = value
            depth = 1
            for step in steps:
                kind = type(node)
                if kind is dict:
                    if type(step) is str:
                        node = node.get(step, _ABSENT)
                        if node is _ABSENT:
                            node = missing[depth]
                            break
                        depth += 1
                        continue
                elif kind is list or kind is tuple:
                    if type(step) is int:
                        if step < len(node):
                            node = node[step]
                            depth += 1
                            continue
                        node = missing[depth]
                        break
                elif isinstance(node, Mapping) and type(step) is str:
                    if step in node:
                        node = node[step]
                        depth += 1
                        continue
                    node = missing[depth]
                    break
                # a step the value does not have the shape for: record the value itself
                node = (STOPPED, depth, freeze(node))
                break
            else:
                if type(node) is not str:
                    node = freeze(node)
            found.append(node)
        return tuple(found)

    def prune(self, root: str, value: Any) -> Any:
        """``value`` cut down to the parts at the paths of ``root``, with the same ``part``.

        Where the paths step into a dict or Mapping by string keys, only those keys are kept
        (in a new dict); where a path ends, or steps where ``part`` stops (a list index, a
        value of another shape), the value there is kept whole. A root no path starts at
        gives ``value`` itself.
        """
        trie = self._tries.get(root)
        return value if trie is None else _pruned(value, trie)


# step → the rest of the paths through it (None where a path ends); paths are minimal, so a
# node is either an end or has steps
_Trie = dict[str | int, "_Trie | None"]


def _trie(paths: Iterable[Path], root: str) -> _Trie:
    trie: _Trie = {}
    for path in paths:
        if path[0] != root:
            continue
        node = trie
        for step in path[1:-1]:
            node = node.setdefault(step, {})  # type: ignore[assignment]
        if len(path) > 1:
            node[path[-1]] = None
    return trie


def _pruned(value: Any, trie: _Trie) -> Any:
    if not trie:  # the whole root is read
        return value
    if not isinstance(value, Mapping) or any(type(step) is not str for step in trie):
        return value  # ``part`` records the whole value here (STOPPED), or walks a list
    pruned = {}
    for step, rest in trie.items():
        if step in value:
            pruned[step] = value[step] if rest is None else _pruned(value[step], rest)
    return pruned


def _path_order(path: Path) -> tuple[tuple[bool, str], ...]:
    return tuple((isinstance(step, int), str(step)) for step in path)


def freeze(value: Any) -> Hashable:
    """A hashable, type-tagged stand-in: values with equal stand-ins are the same to CEL."""
    kind = type(value)
    if kind is str or value is None:
        return value
    if kind is int or kind is bool:
        return (kind, value)
    if kind is float:
        return (kind, value) if value else (kind, repr(value))  # 0.0 == -0.0 in Python
    if kind is dict or isinstance(value, Mapping):
        return (kind, tuple((freeze(k), freeze(v)) for k, v in value.items()))
    if kind is list or kind is tuple:
        return (kind, tuple(freeze(item) for item in value))
    if kind is dt.datetime:
        # aware datetimes in one zone compare by wall clock, ignoring fold; in two, by instant
        return (kind, value, value.fold, repr(value.tzinfo))
    return (kind, repr(value))
