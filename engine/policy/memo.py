"""Evaluates a group of compiled programs over plain values, memoised by what they read.

A scheduling cycle evaluates the same few expressions for every (job, cluster) pair, and most
pairs agree on the few fields the expressions read; so do the templates the webhook reviews.
The cache key is the projection of the values onto the union of the programs' ``accesses``, so
a hit skips both the CEL evaluation and the conversion of the values into CEL. A miss converts
only the parts the key holds (``Projector.prune``), not the whole values. A cache belongs to one
evaluator: keys from another one's ``key`` mean nothing here (evaluators sharing one
``BoundedMemo`` tag their keys). A hit converts nothing: an input whose unread fields could not
be converted gets the result of the input that filled the entry; a miss does not convert them
either.

The cache is a ``BoundedMemo``: at most ``max_entries`` entries and an estimated size, whatever
the inputs (a label's values are part of the key of an expression that reads it).

For many (job, cluster) pairs, project each job and each cluster once with ``part`` and build
each pair's key as ``tuple(part_of[root] for root in evaluator.roots)``: it equals ``key`` of
the pair's values and costs a tuple instead of a walk of every path.

Thread safety: lookups read a dict under the GIL and stores take the memo's lock; every miss
converts its own Activation, and ``CelProgram.evaluate`` shares no mutable state. Two threads
missing on the same key both evaluate and store equal results. ``hits``/``misses`` are
statistics and may undercount under concurrent use.
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Mapping, Sequence
from typing import Any

from engine.policy import cel
from engine.policy.access import Projector
from engine.policy.bounded import BoundedMemo
from engine.policy.celcheck import CelType


class MemoEvaluator:
    """Results of ``programs`` for variable values, cached by the parts the programs read.

    Only the variables named in ``types`` are passed to the programs; paths rooted at any other
    name are left out of the key, since no program can see those values.

    ``memo``: a ``BoundedMemo`` shared with other evaluators (one bound for all of them; keys
    are tagged with this evaluator), else one of ``max_entries`` is made. ``volatile``: roots
    whose values differ on every call (``now`` in the webhook, one per request): when the
    programs read one, results are computed (over only what they read) but not kept.
    """

    def __init__(
        self,
        programs: Sequence[cel.CelProgram],
        types: Mapping[str, CelType],
        max_entries: int = 200_000,
        *,
        memo: BoundedMemo | None = None,
        volatile: Collection[str] = (),
    ):
        self.programs = tuple(programs)
        self.types = dict(types)
        self.projector = Projector(
            path for p in self.programs for path in p.accesses if path[0] in self.types
        )
        self.memo = memo if memo is not None else BoundedMemo(max_entries)
        self._tag: object | None = None if memo is None else object()
        self.keeps = not any(root in volatile for root in self.projector.roots)
        self.hits = 0
        self.misses = 0

    @property
    def roots(self) -> tuple[str, ...]:
        """The variables the programs read, in the order of their parts in a key."""
        return self.projector.roots

    def key(self, values: Mapping[str, Any]) -> Hashable:
        """The projection of ``values`` (root variable name → value) that results depend on."""
        return self.projector.key(values)

    def part(self, name: str, value: Any) -> Hashable:
        """The projection of one variable's value: its element of ``key``."""
        return self.projector.part(name, value)

    def evaluate(self, values: Mapping[str, Any]) -> tuple[Any, ...]:
        """One result per program, in order: a plain value or a ``cel.CelError``."""
        return self.evaluate_key(self.projector.key(values), values)

    def evaluate_key(self, key: Hashable, values: Mapping[str, Any]) -> tuple[Any, ...]:
        """As ``evaluate``, with ``key`` already computed by ``self.key(values)``."""
        if self._tag is not None:
            key = (self._tag, key)
        memo = self.memo
        results = memo.current.get(key)
        if results is None:
            results = memo.recall(key)
        if results is not None:
            self.hits += 1
            return results
        self.misses += 1
        prune = self.projector.prune
        activation = cel.activation(
            self.types,
            **{
                name: materialise(prune(name, values[name]))
                for name in self.roots
                if name in values
            },
        )
        results = tuple(program.evaluate(activation) for program in self.programs)
        if self.keeps:
            memo.put(key, results)
        return results

    def fork(self) -> MemoEvaluator:
        """An evaluator of the same programs that shares this one's results (a miss of either
        fills the cache of both) but counts its own ``hits`` and ``misses``: e.g. one per
        scheduling cycle over a cache kept between cycles."""
        other = MemoEvaluator.__new__(MemoEvaluator)
        other.programs = self.programs
        other.types = self.types
        other.projector = self.projector
        other.memo = self.memo
        other._tag = self._tag
        other.keeps = self.keeps
        other.hits = 0
        other.misses = 0
        return other

    def __len__(self) -> int:
        return len(self.memo)


def materialise(value: Any) -> Any:
    """``value`` with every non-dict Mapping inside turned into a dict (same object if none)."""
    if isinstance(value, dict):
        items = {k: materialise(v) for k, v in value.items()}
        same = all(items[k] is v for k, v in value.items())
        return value if same else items
    if isinstance(value, Mapping):
        return {k: materialise(value[k]) for k in value}
    if isinstance(value, list | tuple):
        elements = [materialise(v) for v in value]
        if all(a is b for a, b in zip(elements, value, strict=True)):
            return value
        return elements if isinstance(value, list) else tuple(elements)
    return value
