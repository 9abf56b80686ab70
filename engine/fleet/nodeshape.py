"""Node shapes against a cluster's resource models: which grade a node falls in, what the
models promise an empty node of each shape, and the ``fleetgate.io/node-shapes`` annotation.

Karmada's rule (``pkg/modeling``): for each modelled resource, a node's index is the last
grade whose minimum is at most what the node has free; the node's grade is the lowest of those
indexes. The cycle (and Karmada's general estimator) then take a node of grade ``g`` to have
exactly ``g``'s minimum free of every modelled resource, the first grade's minimum being 0. So
an empty node whose grade's minimum is below its allocatable on some modelled resource is
*under-stated*: a pod that asks for the whole node is at best a "maybe" there
(``unseen_shapes`` says so, for ``fleetgate validate --fleet``, ``inspect`` and ``dry-run``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from fractions import Fraction

from engine import annotations as ann
from engine.fleet.model import ClusterView, ResourceModel
from engine.quantity import format_quantity
from engine.resources import Resources

DOC = "docs/node-shape.md"
_BINARY = (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))


def node_grade(models: Sequence[ResourceModel], free: Mapping[str, Fraction]) -> int:
    """The grade of a node with ``free`` amounts (``models`` sorted by grade)."""
    names = sorted({r for m in models for r in m.ranges})
    index = len(models) - 1
    for name in names:
        amount = free.get(name, Fraction(0))
        last = 0
        for i, model in enumerate(models):
            low = model.ranges[name][0] if name in model.ranges else Fraction(0)
            if i == 0 or low <= amount:
                last = i
            else:
                break
        index = min(index, last)
    return models[index].grade


def promised(
    models: Sequence[ResourceModel], shape: Mapping[str, Fraction]
) -> tuple[int, Resources]:
    """(grade, the minimums it promises) of an empty node of ``shape``: what the cycle counts
    such a node as having free (nothing, in the first grade)."""
    ordered = sorted(models, key=lambda m: m.grade)
    grade = node_grade(ordered, shape)
    if grade == ordered[0].grade:
        return grade, Resources()
    model = next(m for m in ordered if m.grade == grade)
    return grade, Resources({r: low for r, (low, _) in model.ranges.items()})


def unseen_shapes(
    cluster: str, models: Sequence[ResourceModel], shapes: Iterable[Mapping[str, Fraction]]
) -> tuple[str, ...]:
    """A warning for each node shape whose empty node the models promise less than its
    allocatable of some modelled resource (nothing without models or shapes)."""
    if not models:
        return ()
    modelled = {r for m in models for r in m.ranges}
    warnings = []
    for shape in distinct(shapes):
        grade, mins = promised(models, shape)
        short = [r for r in sorted(modelled) if mins.get_amount(r) < shape.get_amount(r)]
        if not short:
            continue
        only = ", ".join(f"{quantity_text(r, mins.get_amount(r))} {r}" for r in short)
        warnings.append(
            f"cluster {cluster}: an empty node of {describe(shape, modelled)} is promised only "
            f"{only} by its resource models (grade {grade}): whole-node pods are at best a "
            f"maybe; see {DOC}"
        )
    return tuple(warnings)


def cluster_warnings(views: Iterable[ClusterView]) -> tuple[str, ...]:
    """``unseen_shapes`` of every cluster that declares node shapes, in the given order."""
    return tuple(w for v in views for w in unseen_shapes(v.name, v.resource_models, v.node_shapes))


def describe(shape: Mapping[str, Fraction], modelled: Iterable[str] = ()) -> str:
    """``8 nvidia.com/gpu, 96 cpu, 768Gi memory``: accelerators, cpu, memory and the modelled
    resources of a node shape."""
    wanted = set(modelled) | {"cpu", "memory"}
    names = sorted((r for r in shape if r.endswith("gpu") or r in wanted), key=_describe_order)
    return ", ".join(f"{quantity_text(r, shape[r])} {r}" for r in names if shape[r])


def _describe_order(name: str) -> tuple[int, str]:
    return (
        0 if name.endswith("gpu") else 1 if name == "cpu" else 2 if name == "memory" else 3,
        name,
    )


def distinct(shapes: Iterable[Mapping[str, Fraction]]) -> tuple[Resources, ...]:
    """The different shapes, sorted (by their resources and amounts)."""
    found = {Resources(s) for s in shapes if any(s.values())}
    return tuple(sorted(found, key=lambda s: tuple(s.items())))


def annotation(shapes: Iterable[Mapping[str, Fraction]]) -> str:
    """The ``fleetgate.io/node-shapes`` value of nodes of these allocatables: the distinct
    shapes, sorted, as Kubernetes quantities. Past ``MAX_NODE_SHAPES``, shapes another shape
    covers on every resource are left out (they change neither what can never fit nor the most
    a node may hold), and if still too many, the last ones are merged into one shape of their
    largest amounts (an upper bound, as the cycle reads the annotation)."""
    found = list(distinct(shapes))
    if len(found) > ann.MAX_NODE_SHAPES:
        found = [s for s in found if not any(o != s and _covers(o, s) for o in found)]
    if len(found) > ann.MAX_NODE_SHAPES:
        keep, rest = found[: ann.MAX_NODE_SHAPES - 1], found[ann.MAX_NODE_SHAPES - 1 :]
        merged = Resources()
        for shape in rest:
            merged = merged.maximum(shape)
        found = [*keep, merged]
    body = [{r: quantity_text(r, v) for r, v in s.items()} for s in found]
    return json.dumps(body, separators=(",", ":"))


def _covers(big: Resources, small: Resources) -> bool:
    return all(big.get_amount(r) >= v for r, v in small.items())


def quantity_text(name: str, value: Fraction) -> str:
    """An exact quantity; whole byte amounts of memory-like resources with a binary suffix."""
    if ("memory" in name or "storage" in name) and value.denominator == 1 and value > 0:
        for suffix, size in _BINARY:
            if value % size == 0:
                return f"{value // size}{suffix}"
    return format_quantity(value)
