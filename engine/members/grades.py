"""Karmada resource models (``spec.resourceModels``) and ``allocatableModelings``.

A node's grade follows Karmada's ``pkg/modeling`` (``engine.fleet.nodeshape.node_grade``): per
modelled resource, the last grade whose minimum is at most what the node has free (the first
grade's minimum acting as 0); the node's grade is the lowest of those. The cycle, like Karmada's
general estimator, then counts the node as having exactly that grade's minimums free. Karmada
requires the first grade's minimums to be 0, each resource's ranges contiguous with
``min < max`` (so every resource's minimums strictly increase), the last max ``MaxInt64``.
Karmada v1.8 and later grade any resource a node reports (``nvidia.com/gpu`` included); earlier
releases read only cpu, memory, storage and ephemeral-storage of a node.

The default grades (a fleet file entry without ``resourceModels``) are built from the member's
node shapes so that **an empty node is one grade whose minimums are its whole allocatable**:

* **modelled resources**: the accelerator (a resource whose name ends in ``gpu``) when every
  node has one, then cpu and memory; a resource some node lacks is left out. With a GPU ladder,
  a node without GPUs has 0 free GPUs, below every grade but the first, so it would be grade 0
  (no room at all) however much CPU it has free. So in a cluster that mixes GPU and CPU-only
  nodes the ladder is on cpu and memory: every node is seen; the cluster's GPUs are bounded by
  its totals (and ``fleetgate.io/node-shapes``), not per node;
* **anchors**: one grade per node shape, at its exact allocatable, led by the first modelled
  resource (most GPUs, else most cores, first). Shapes with the same lead amount share one
  grade at their smallest amounts (the leanest shape); a shape that is not below the anchor
  above it on every resource cannot have a grade of its own (minimums must increase on every
  resource) and gets the one its amounts reach (``fleetgate validate --fleet`` warns of it);
* **intermediate grades** on the lead resource, below the top anchor: every whole GPU count up
  to 16, and 1, 2, 3, 4, 6, 8, 12, 16, 24, … (powers of two and 1.5 times them) of cores or
  GPUs, plus every anchor. The other resources are interpolated linearly between the anchors
  around (0 below the first), floored to 1m cpu and 1Mi memory; a grade whose minimums would
  not increase on every resource is left out. With one GPU shape of 8 GPUs, 96 cores and
  768Gi, that is 0–8 GPUs with 12 cores and 96Gi per GPU: the full share per GPU.

The trade-off the earlier ladder (half the cpu and memory share per GPU) made the other way: a
grade promises one amount of each resource, and only the top one promises every GPU of a node.
At the full share, an empty node is seen whole (a whole-node pod surely fits), and a small CPU
pod on a GPU node hides only the GPUs its cores and memory amount to (a node of 8 GPUs with 1
core used is grade 7: 7 GPUs, 84 cores), because there is a grade at every GPU count. A
GPU-heavy pod that asks less than the full share (8 GPUs, 32 cores) on such a node is then a
"maybe" (``spec.placement.nodeShape`` decides), not a sure fit; at half the share it was a sure
fit, but a whole-node pod never was, and waited forever.

``karmada_default_models`` are Karmada's own defaults (``SetDefaultClusterResourceModels``):
cpu and memory only, nine grades doubling from 1 core / 4Gi up to 128 cores / 1Ti. A fleet file
asks for them with ``resourceModels: KarmadaDefaults``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from fractions import Fraction

from engine.fleet.frozen import FrozenDict
from engine.fleet.model import ResourceModel
from engine.fleet.nodeshape import node_grade, unseen_shapes
from engine.members.spec import FleetSpec, NodeGroup

INFINITE = Fraction(2**63 - 1)  # the last grade's max, as Karmada standardizes it
GI = 2**30
MI = 2**20
_KARMADA_CPU = (0, 1, 2, 4, 8, 16, 32, 64, 128)
_KARMADA_MEMORY_GI = (0, 4, 16, 32, 64, 128, 256, 512, 1024)
_FLOORS = {"cpu": Fraction(1, 1000), "memory": Fraction(MI)}
_UNITS = {"memory": Fraction(GI)}  # of the intermediate steps; 1 for cpu and devices
EVERY_DEVICE = 16  # a grade at every whole device count up to this many

Row = tuple[Fraction, ...]  # a grade's minimums, in modelled-resource order

__all__ = [
    "INFINITE",
    "accelerator",
    "allocatable_modelings",
    "default_models",
    "fleet_warnings",
    "karmada_default_models",
    "modelled_resources",
    "node_grade",
]


def karmada_default_models() -> tuple[ResourceModel, ...]:
    """Karmada's default grades 0–8 on cpu and memory."""
    names = ("cpu", "memory")
    rows = [
        (Fraction(c), Fraction(m * GI))
        for c, m in zip(_KARMADA_CPU, _KARMADA_MEMORY_GI, strict=True)
    ]
    return _models(names, rows)


def accelerator(nodes: Sequence[NodeGroup]) -> str | None:
    """The accelerator resource the default grades follow, if any node has one."""
    names = sorted({r for g in nodes for r in g.allocatable if r.endswith("gpu")})
    return names[0] if names else None


def modelled_resources(nodes: Sequence[NodeGroup]) -> tuple[str, ...]:
    """The resources the default grades model, the lead one first (see the module doc)."""
    device = accelerator(nodes)
    candidates = ([device] if device else []) + ["cpu", "memory"]
    return tuple(r for r in candidates if all(g.allocatable.get_amount(r) > 0 for g in nodes))


def default_models(nodes: Sequence[NodeGroup]) -> tuple[ResourceModel, ...]:
    """The grades a member gets when its fleet file entry names none (see module doc)."""
    names = modelled_resources(nodes)
    if not nodes or not names:
        return karmada_default_models()
    anchors = _anchors([tuple(g.allocatable.get_amount(r) for r in names) for g in nodes])
    steps = _steps(names[0], anchors)
    origin: Row = tuple(Fraction(0) for _ in names)
    rows: list[Row] = [origin]
    below = origin
    for step in steps:
        above = next(a for a in anchors if a[0] >= step)
        if step == above[0]:
            rows.append(above)  # anchors always increase on every resource
            below = above
            continue
        row = _between(names, below, above, step)
        if all(new > old for new, old in zip(row, rows[-1], strict=True)):
            rows.append(row)
    return _models(names, rows)


def _anchors(shapes: Iterable[Row]) -> list[Row]:
    """One row per lead amount (the smallest amounts of the shapes that have it), kept from
    the top down while each is below the one above on every resource; ascending."""
    lean: dict[Fraction, Row] = {}
    for shape in shapes:
        seen = lean.get(shape[0])
        lean[shape[0]] = shape if seen is None else tuple(map(min, seen, shape))
    chain: list[Row] = []
    for row in sorted(lean.values(), reverse=True):
        if not chain or all(low < high for low, high in zip(row, chain[-1], strict=True)):
            chain.append(row)
    return chain[::-1]


def _steps(lead: str, anchors: Sequence[Row]) -> list[Fraction]:
    top = anchors[-1][0]
    unit = _UNITS.get(lead, Fraction(1))
    steps = {a[0] for a in anchors}
    if lead not in ("cpu", "memory"):
        steps.update(Fraction(n) for n in range(1, EVERY_DEVICE + 1))
    power = unit
    while power < top:
        steps.update((power, power * 3))
        power *= 2
    return sorted(s for s in steps if 0 < s <= top)


def _between(names: Sequence[str], below: Row, above: Row, step: Fraction) -> Row:
    """The minimums at ``step`` of the lead resource, interpolated between two anchors."""
    part = (step - below[0]) / (above[0] - below[0])
    row = [step]
    for name, low, high in zip(names[1:], below[1:], above[1:], strict=True):
        floor = _FLOORS.get(name, Fraction(1))
        row.append((low + (high - low) * part) // floor * floor)
    return tuple(row)


def _models(names: Sequence[str], rows: Sequence[Row]) -> tuple[ResourceModel, ...]:
    models = []
    for grade, row in enumerate(rows):
        ranges = {}
        for i, name in enumerate(names):
            high = rows[grade + 1][i] if grade + 1 < len(rows) else INFINITE
            ranges[name] = (row[i], high)
        models.append(ResourceModel(grade=grade, ranges=FrozenDict(ranges)))
    return tuple(models)


def allocatable_modelings(
    models: Sequence[ResourceModel], free_per_node: Iterable[Mapping[str, Fraction]]
) -> tuple[tuple[int, int], ...]:
    """(grade, node count) for every grade in order, as ``allocatableModelings`` reports it."""
    ordered = sorted(models, key=lambda m: m.grade)
    counts = {m.grade: 0 for m in ordered}
    if ordered:
        for free in free_per_node:
            counts[node_grade(ordered, free)] += 1
    return tuple(counts.items())


def fleet_warnings(fleet: FleetSpec) -> tuple[str, ...]:
    """For each cluster of a fleet file, the node shapes its resource models (given, else the
    defaults) cannot see whole (``engine.fleet.nodeshape.unseen_shapes``)."""
    return tuple(
        warning
        for c in fleet.clusters
        for warning in unseen_shapes(
            c.name, c.resource_models or default_models(c.nodes), [g.allocatable for g in c.nodes]
        )
    )
