"""Arithmetic on groups of identical nodes (free amounts of the modelled resources → how
many such nodes): how many pods of a shape they hold, the best-fit layout of pod groups onto
them, and bringing a count of that room through node changes (a layout, or pods given back
or taken again as nodes of their own)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import TypeAlias

from engine.cycle.jobs.model import PodGroup
from engine.fleet.model import ResourceModel

Shape: TypeAlias = tuple[int, ...]  # amounts of the modelled resources, in model order
# n nodes: free before, after (None: no such node before, or after)
Move: TypeAlias = tuple[Shape | None, Shape | None, int]
KEPT_MOVES = 512  # node changes logged for room counts before they start over


def from_models(
    models: Sequence[ResourceModel], modelings: Sequence[tuple[int, int]]
) -> tuple[tuple[str, ...], dict[Shape, int]]:
    """(the modelled resources, in order; the nodes) of a cluster's resource models and
    ``allocatableModelings``: each node of a grade has at least the grade's minimum free of
    every modelled resource, the first grade's minimum being 0 (as Karmada documents)."""
    names, shapes = _grade_shapes(models)
    nodes: dict[Shape, int] = {}
    for grade, count in modelings:
        shape = shapes.get(grade)
        if shape is None or count <= 0:
            continue
        nodes[shape] = nodes.get(shape, 0) + count
    return names, nodes


# (models, modelled resources, each grade's node shape) by the identity of the models: a
# cluster's models stay one object while its modelings move with every pod bound or freed
_GRADES: dict[int, tuple[Sequence[ResourceModel], tuple[str, ...], dict[int, Shape]]] = {}
KEPT_GRADES = 1024


def _grade_shapes(models: Sequence[ResourceModel]) -> tuple[tuple[str, ...], dict[int, Shape]]:
    """The modelled resources and each grade's node shape (its minimums; the first grade's
    are 0), kept while ``models`` is the object they were found for."""
    kept = _GRADES.get(id(models))
    if kept is not None and kept[0] is models:
        return kept[1], kept[2]
    grades = {m.grade: m for m in models}
    names = tuple(sorted({r for m in models for r in m.ranges}))
    shapes: dict[int, Shape] = {}
    if grades:
        first = min(grades)
        for grade, model in grades.items():
            floor = {
                r: 0 if grade == first else math.floor(lo * 1000)
                for r, (lo, _) in model.ranges.items()
            }
            shapes[grade] = tuple(floor.get(r, 0) for r in names)
    if len(_GRADES) >= KEPT_GRADES:
        _GRADES.clear()
    _GRADES[id(models)] = (models, names, shapes)  # the entry keeps the models alive
    return names, shapes


def per_node(free: Shape, need: Shape) -> int:
    """How many pods needing ``need`` fit a node with ``free`` (0 when ``need`` is all 0)."""
    by_free = _PER_NODE.get(need)
    if by_free is None:
        by_free = _kept_for(need)
    found = by_free.get(free)
    if found is None:
        found = _remember(by_free, free, need)
    return found


def _per_node(free: Shape, need: Shape) -> int:
    most = None
    for f, q in zip(free, need, strict=True):
        if q > 0:
            n = f // q
            if most is None or n < most:
                most = n
    return 0 if most is None else most


# per_node's answers, by pod shape then node shape: a pure function of two shapes, and few node
# and pod shapes recur all through a cycle (a fifth of a 50,000-job cycle went to computing
# them again). Kept by pod shape first so that ``room``, which asks of one pod shape for every
# node shape, hashes the pod shape once rather than a pair per node.
_PER_NODE: dict[Shape, dict[Shape, int]] = {}
_KEPT = [0]  # answers kept, over every pod shape
KEPT_PER_NODE = 1 << 16


def _kept_for(need: Shape) -> dict[Shape, int]:
    """The answers kept for pod shape ``need`` (new and empty when there are none)."""
    return _PER_NODE.setdefault(need, {})


def _remember(by_free: dict[Shape, int], free: Shape, need: Shape) -> int:
    """Compute and keep ``per_node(free, need)``; every answer is dropped past the bound."""
    if _KEPT[0] >= KEPT_PER_NODE:
        _PER_NODE.clear()
        _KEPT[0] = 0
        by_free = _PER_NODE[need] = {}
    found = by_free[free] = _per_node(free, need)
    _KEPT[0] += 1
    return found


def room(nodes: Mapping[Shape, int], shape: Shape, enough: float = math.inf) -> tuple[int, int]:
    """(pods of ``shape`` the nodes hold, nodes with room for one); with ``enough``, the count
    stops once the pods reach it (so both numbers may fall short of the whole)."""
    by_free = _PER_NODE.get(shape)
    if by_free is None:
        by_free = _kept_for(shape)
    pods = count = 0
    for free, n in nodes.items():
        per = by_free.get(free)
        if per is None:
            per = _remember(by_free, free, shape)
            by_free = _PER_NODE[shape]  # new when the answers were dropped
        if per:
            pods += n * per
            count += n
            if pods >= enough:
                break
    return pods, count


def room_reaches(nodes: Mapping[Shape, int], shape: Shape, pods: int) -> bool:
    """``room(nodes, shape)[0] >= pods``, counting no further than it must: for nodes with no
    negative room (a node with less than nothing would lower the count after it stopped)."""
    return pods <= 0 or room(nodes, shape, pods)[0] >= pods


def room_for_all(shaped: Sequence[tuple[Shape, PodGroup]], room_of: Callable[[Shape], int]) -> bool:
    """A cheap "yes" that is the greedy layout's answer too, on nodes with no negative room
    (``room_of``: pods of a shape they hold): every pod fits when the nodes hold as many pods
    as all groups have, each counted at the largest request of any group per resource. A pod
    takes at most one such slot from its node, and the greedy layout leaves a group's pods
    behind only when no node has a slot left."""
    largest: list[int] = []
    pods = 0
    for shape, group in shaped:
        if any(shape):
            largest = [max(a, b) for a, b in zip(largest or [0] * len(shape), shape, strict=True)]
            pods += group.count
    return room_of(tuple(largest)) >= pods if pods else True


def carried(pods: int, count: int, moved: Sequence[Move], shape: Shape) -> tuple[int, int]:
    """``room`` of ``shape``, (pods, count) before the nodes of ``moved`` changed, after."""
    for before, after, n in moved:
        if before is not None and (per := per_node(before, shape)):
            pods -= n * per
            count -= n
        if after is not None and (per := per_node(after, shape)):
            pods += n * per
            count += n
    return pods, count


def place(
    nodes: dict[Shape, int],
    groups: Sequence[tuple[Shape, PodGroup]],
    moved: list[Move] | None = None,
) -> tuple[dict[Shape, int], tuple[PodGroup, int] | None]:
    """Best-fit, largest pods first, the pod groups (each with its shape) onto groups of
    identical nodes (changed in place, each change recorded in ``moved`` when given); returns
    them and, when a pod group did not fit, that group with its pods left over."""
    shaped = sorted(groups, key=lambda x: x[0])
    for need, group in reversed(shaped):
        if not any(need):
            continue
        left = group.count
        for free in sorted(nodes):  # fullest nodes first (smallest free amounts)
            per = per_node(free, need)
            if per == 0:
                continue
            count = nodes[free]
            full, rest = divmod(left, per)
            used = min(full, count)
            moves = [(used, per)] if used else []
            if used < count and used == full and rest:
                moves.append((1, rest))
            for n, pods in moves:
                nodes[free] -= n
                after = tuple([f - pods * q for f, q in zip(free, need, strict=True)])
                nodes[after] = nodes.get(after, 0) + n
                if moved is not None:
                    moved.append((free, after, n))
                left -= n * pods
            if not nodes[free]:
                del nodes[free]
            if not left:
                break
        if left:
            return nodes, (group, left)
    return nodes, None


def best_fit_left(nodes: Mapping[Shape, int], need: Shape) -> float | None:
    """How many more pods of ``need`` the node a first such pod is laid on (best fit: the
    fullest node with room, as ``place`` lays it) would still hold after it, in pods of its
    scarcest resource there (fractional); None when no node has room or ``need`` is all 0."""
    for free in sorted(nodes):
        if per_node(free, need):
            return min(f / q for f, q in zip(free, need, strict=True) if q > 0) - 1
    return None


def rooms_freed(released: Sequence[Sequence[tuple[Shape, int]]], shape: Shape) -> list[int]:
    """Per release of (pod shape, count) pairs, the pods of ``shape`` the released pods' room
    holds, each pod's room a node of its own (pods of few shapes: each counted once)."""
    per_pod: dict[Shape, int] = {}
    found = []
    for pods in released:
        freed = 0
        for pod, count in pods:
            per = per_pod.get(pod)
            if per is None:
                per = per_pod[pod] = per_node(pod, shape)
            freed += count * per
        found.append(freed)
    return found


def place_each(
    nodes: dict[Shape, int], shaped: Sequence[tuple[Shape, PodGroup]], moved: list[Move]
) -> list[int]:
    """``place`` in its order, every group tried even when one finds too little room; the
    pods left over per group, in ``shaped``'s order."""
    order = sorted(range(len(shaped)), key=lambda i: shaped[i][0])
    left = [0] * len(shaped)
    for i in reversed(order):
        unplaced = place(nodes, [shaped[i]], moved)[1]
        if unplaced is not None:
            left[i] = unplaced[1]
    return left


def drop(nodes: dict[Shape, int], shape: Shape, count: int) -> None:
    """Take ``count`` nodes of ``shape`` away."""
    left = nodes[shape] - count
    if left:
        nodes[shape] = left
    else:
        del nodes[shape]


class RoomCounts:
    """How many pods of each shape some nodes hold: counted once, then brought through the
    node changes logged since when asked again (counted anew when that is less work). The log
    starts over past ``KEPT_MOVES`` changes."""

    __slots__ = ("counts", "log")

    def __init__(
        self,
        counts: dict[Shape, tuple[int, int, int]] | None = None,
        log: list[Move] | None = None,
    ) -> None:
        # pod shape → (pods the nodes hold, nodes with room for one, length of ``log`` then)
        self.counts = {} if counts is None else counts
        self.log = [] if log is None else log  # node changes since the counts began

    def entry(self, nodes: Mapping[Shape, int] | None, shape: Shape) -> tuple[int, int, int]:
        """(pods of ``shape`` ``nodes`` hold, nodes with room for one, the length of the log
        they count); ``nodes`` are the ones the logged changes led to."""
        assert nodes is not None
        log = self.log
        found = self.counts.get(shape)
        if found is not None:
            if found[2] == len(log):
                return found
            if len(log) - found[2] <= len(nodes):
                pods, count = carried(found[0], found[1], log[found[2] :], shape)
                found = self.counts[shape] = (pods, count, len(log))
                return found
        pods, count = room(nodes, shape)
        found = self.counts[shape] = (pods, count, len(log))
        return found

    def logged(self, moved: Sequence[Move], shared: bool) -> RoomCounts:
        """These counts with ``moved`` logged: these very ones unless ``shared`` (with a copy
        of the state, which keeps them as they are) or the log is full."""
        if len(self.log) >= KEPT_MOVES:
            counts = RoomCounts()
        elif shared:
            counts = RoomCounts(dict(self.counts), list(self.log))
        else:
            counts = self
        counts.log.extend(moved)
        return counts
