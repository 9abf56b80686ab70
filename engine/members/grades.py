"""Karmada resource models (``spec.resourceModels``) and ``allocatableModelings``.

Karmada's defaults (``SetDefaultClusterResourceModels``) grade cpu and memory only, nine
grades doubling from 1 core / 4Gi up to 128 cores / 1Ti. Those say nothing about GPUs, so a
GPU member graded by them would hide exactly the fragmentation fleetgate must see. Here:

* a member without an accelerator (a resource whose name ends in ``gpu``) gets Karmada's
  defaults;
* a member with one gets a ladder on that resource: 0, 1, 2, 4, … up to the most any node has
  (that amount itself as the top grade), with cpu and memory in each grade at half the share
  per accelerator of the leanest accelerator node shape (floored to 1m and 1Mi): a few small
  CPU pods on a GPU node do not hide its free GPUs, a node whose CPU is used up does not count
  as room for GPU pods. A resource whose minimums would not strictly increase is left out.

A node's grade follows Karmada's ``pkg/modeling``: for each modelled resource, the last grade
whose minimum is at most what the node has free (the first grade's minimum acting as 0);
the node's grade is the lowest of those.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from fractions import Fraction

from engine.fleet.frozen import FrozenDict
from engine.fleet.model import ResourceModel
from engine.members.spec import NodeGroup

INFINITE = Fraction(2**63 - 1)  # the last grade's max, as Karmada standardizes it
GI = 2**30
MI = 2**20
_KARMADA_CPU = (0, 1, 2, 4, 8, 16, 32, 64, 128)
_KARMADA_MEMORY_GI = (0, 4, 16, 32, 64, 128, 256, 512, 1024)
CPU_MEMORY_SHARE = Fraction(1, 2)  # of a node's cpu and memory per accelerator, in a grade
_FLOORS = {"cpu": Fraction(1, 1000), "memory": Fraction(MI)}


def karmada_default_models() -> tuple[ResourceModel, ...]:
    """Karmada's default grades 0–8 on cpu and memory."""
    return _ladders({"cpu": _KARMADA_CPU, "memory": tuple(g * GI for g in _KARMADA_MEMORY_GI)})


def accelerator(nodes: Sequence[NodeGroup]) -> str | None:
    """The accelerator resource the default grades follow, if any node has one."""
    names = sorted({r for g in nodes for r in g.allocatable if r.endswith("gpu")})
    return names[0] if names else None


def default_models(nodes: Sequence[NodeGroup]) -> tuple[ResourceModel, ...]:
    """The grades a member gets when its fleet file entry names none (see module doc)."""
    device = accelerator(nodes)
    if device is None:
        return karmada_default_models()
    with_device = [g.allocatable for g in nodes if g.allocatable.get_amount(device) > 0]
    top = max(a[device] for a in with_device)
    steps = [Fraction(0)]
    step = Fraction(1)
    while step < top:
        steps.append(step)
        step *= 2
    steps.append(top)
    ladders: dict[str, Sequence[Fraction | int]] = {device: steps}
    for name, floor in _FLOORS.items():
        share = min(a.get_amount(name) / a[device] for a in with_device) * CPU_MEMORY_SHARE
        mins = [(share * s // floor) * floor for s in steps]
        if all(low < high for low, high in itertools.pairwise(mins)):
            ladders[name] = mins
    return _ladders(ladders)


def _ladders(ladders: Mapping[str, Sequence[Fraction | int]]) -> tuple[ResourceModel, ...]:
    count = len(next(iter(ladders.values())))
    models = []
    for grade in range(count):
        ranges = {}
        for name, mins in ladders.items():
            high = Fraction(mins[grade + 1]) if grade + 1 < count else INFINITE
            ranges[name] = (Fraction(mins[grade]), high)
        models.append(ResourceModel(grade=grade, ranges=FrozenDict(ranges)))
    return tuple(models)


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
