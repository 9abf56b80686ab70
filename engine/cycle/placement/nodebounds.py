"""Node shape's three answers for a pod on a cluster: it surely fits, it never can, or it may.

Karmada's resource models grade each node by what it has free and promise only the grade's
minimum (``nodes.from_models``: the cycle's room counts, like Karmada's general estimator,
use the minimum). So a pod that asks more than a grade's minimum is not known to fit; it is:

* **never**, when no node of the cluster could hold it even empty: it asks more of some
  resource than every node shape of the cluster offers (``ClusterView.node_shapes``, the
  annotation ``fleetgate.io/node-shapes``; resources no shape names are not bounded by them)
  or than the cluster's whole allocatable;
* **maybe**, when a node of some grade could hold it: each node of grade ``g`` is taken to have
  at most ``max_g − 1`` milli-units free of each modelled resource (Karmada counts a node in the
  lowest grade any resource puts it in), and no more than the largest node shape or the
  totals free; the last grade, whose max Karmada ignores (it must be MaxInt64), at most the
  largest node shape, or only its minimum when no shape is declared (nothing then says how
  large its nodes are). ``Upper`` keeps those bounds as nodes of their own and lays pods onto
  them as the cycle places them, so a second pod does not take the same maybe-room again;
* **fits** otherwise, when the minimums have the room (``ClusterState``).

What a maybe is taken for is the policy's ``spec.placement.nodeShape``: Optimistic admits where
no cluster surely fits; Conservative waits, saying that the models cannot promise the room.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from itertools import chain
from typing import NamedTuple

from engine import vectors
from engine.cycle.jobs.model import PendingJob, PodGroup
from engine.cycle.jobs.reading import pod_groups
from engine.cycle.placement import nodes as nodes_of
from engine.cycle.placement.nodes import Move, Shape
from engine.fleet.model import ClusterView
from engine.resources import Resources
from engine.vectors import Vec

UNBOUNDED = 1 << 62  # no bound: a resource a grade does not model


class Never(NamedTuple):
    """Why one pod can never fit a cluster: it asks ``asked`` of ``resource``, and the
    largest node (or the whole cluster) offers ``largest``."""

    resource: str
    asked: int
    largest: int


class NodeLimits:
    """The most one node of a cluster may offer (per declared node shape; the whole
    allocatable stands for a node when none is declared), and ``never``'s answer per pod."""

    __slots__ = ("allocatable", "answers", "bounds")

    def __init__(self, shapes: tuple[Resources, ...], allocatable: tuple[tuple[str, int], ...]):
        self.allocatable = dict(allocatable)
        self.bounds = tuple(vectors.capacity_milli(s) for s in shapes) or (self.allocatable,)
        self.answers: dict[tuple[tuple[str, int], ...], Never | None] = {}

    def never(self, requests: Mapping[str, int]) -> Never | None:
        key = tuple(requests.items())
        if key in self.answers:  # an answer may be None: looked up by key, not by get
            return self.answers[key]
        if len(self.answers) >= KEPT_ANSWERS:
            self.answers.clear()
        found = self.answers[key] = never(self.bounds, self.allocatable, requests)
        return found


KEPT_ANSWERS = 4096  # pod shapes whose answer one cluster's limits keep


@functools.lru_cache(maxsize=1024)  # a pure function of its arguments: safe to share
def limits(shapes: tuple[Resources, ...], allocatable: tuple[tuple[str, int], ...]) -> NodeLimits:
    """The limits of a cluster with node shapes ``shapes`` and ``allocatable`` (milli-units,
    as items): the same value for every cycle that sees the same cluster."""
    return NodeLimits(shapes, allocatable)


def never(bounds: Sequence[Vec], allocatable: Vec, requests: Mapping[str, int]) -> Never | None:
    """Why no node bounded by ``bounds`` (nor the cluster's ``allocatable``) could hold a pod
    of ``requests``; None when one could."""
    named = {r for b in bounds for r in b}
    asked = {r: v for r, v in requests.items() if v > 0 and r != "pods"}
    for r, v in sorted(asked.items()):
        if v > allocatable.get(r, 0):
            return Never(r, v, allocatable.get(r, 0))
    if not any(all(v <= b.get(r, 0) for r, v in asked.items() if r in named) for b in bounds):
        # a resource that no shape offers as much of, else the one the roomiest shape lacks
        for r, v in sorted(asked.items()):
            if r in named and v > (most := max(b.get(r, 0) for b in bounds)):
                return Never(r, v, most)
        roomiest = max(bounds, key=lambda b: sum(asked[r] <= b.get(r, 0) for r in asked))
        r = min(r for r, v in asked.items() if r in named and v > roomiest.get(r, 0))
        return Never(r, asked[r], roomiest.get(r, 0))
    return None


def never_text(never: Never, declared: bool) -> str:
    where = "the largest node offers" if declared else "the whole cluster has"
    what = vectors.describe
    return (
        f"asks {what(never.resource, never.asked)} {never.resource}; "
        f"{where} {what(never.resource, never.largest)}"
    )


class Upper:
    """The nodes of a cluster at the most each may have free (see the module doc), changed as
    pods are placed and released, and which grade's nodes each untouched bound stands for."""

    __slots__ = ("grades", "negative", "nodes")

    def __init__(
        self, nodes: dict[Shape, int], grades: dict[Shape, list[list]], negative: bool | None = None
    ) -> None:
        self.nodes = nodes
        # an untouched upper bound → [the minimums of a grade it stands for, its nodes left]
        self.grades = grades
        # whether a node may have less than nothing free of a resource (the cluster's totals
        # overdrawn): only the bounds can, as built; placing takes no more than a node has, and
        # what is given back is pods' requests, so this stays true of the nodes once false
        if negative is None:
            negative = min(chain.from_iterable(nodes), default=0) < 0
        self.negative = negative

    @classmethod
    def of(cls, view: ClusterView, names: tuple[str, ...], free: Vec) -> Upper:
        """The bounds of the nodes ``view``'s ``allocatableModelings`` counts (``free``: the
        cluster's totals free, which no node can exceed). The last grade has no max: its
        nodes are bounded by the largest declared node shape, else taken at its minimum."""
        grades = {m.grade: m for m in view.resource_models}
        first, last = min(grades), max(grades)
        declared = [vectors.capacity_milli(s) for s in view.node_shapes]
        largest = {r: max(b.get(r, 0) for b in declared) for b in declared for r in b}
        nodes: dict[Shape, int] = {}
        stands: dict[Shape, list[list]] = {}
        for grade, count in view.allocatable_modelings:
            model = grades.get(grade)
            if model is None or count <= 0:
                continue
            low, high = [], []
            for r in names:
                lo, hi = model.ranges.get(r, (0, UNBOUNDED))
                floor = 0 if grade == first else int(lo * 1000)
                top = int(hi * 1000) - 1 if grade != last else largest.get(r, floor)
                top = min(top, largest.get(r, top), free.get(r, 0))
                low.append(floor)
                high.append(max(top, floor))
            shape = tuple(high)
            nodes[shape] = nodes.get(shape, 0) + count
            stands.setdefault(shape, []).append([tuple(low), count])
        return cls(nodes, stands)

    def copy(self) -> Upper:
        grades = {k: [list(e) for e in v] for k, v in self.grades.items()}
        return Upper(dict(self.nodes), grades, self.negative)

    def holds(self, shaped: Sequence[tuple[Shape, PodGroup]]) -> bool:
        """Whether every pod may fit these nodes. Pods of one shape fit exactly when the
        nodes hold that many side by side (each node its own count), so one group needs no
        layout."""
        nodes = self.nodes
        if len(shaped) == 1:
            need, group = shaped[0]
            if not any(need):
                return True
            if self.negative:  # a node with less than nothing lowers the count: count it all
                return nodes_of.room(nodes, need)[0] >= group.count
            return nodes_of.room_reaches(nodes, need, group.count)
        if self.negative:  # the bounds below need room ≥ 0; the layout is exact either way
            return nodes_of.place(dict(nodes), shaped)[1] is None
        # as ClusterState's: a group that lacks room alone lacks it beside the others
        for need, group in shaped:
            if any(need) and not nodes_of.room_reaches(nodes, need, group.count):
                return False
        if nodes_of.room_for_all(shaped, lambda shape: nodes_of.room(nodes, shape)[0]):
            return True
        return nodes_of.place(dict(nodes), shaped)[1] is None

    def take(self, shaped: Sequence[tuple[Shape, PodGroup]]) -> list[tuple[Shape, int]]:
        """Lay the pods onto the nodes (those that find none are dropped); (minimums, nodes)
        of the untouched grades' nodes they took, highest grade first, for the caller to take
        from the minimums too."""
        moved: list[Move] = []
        for need, group in sorted(shaped, key=lambda x: x[0], reverse=True):
            nodes_of.place(self.nodes, [(need, group)], moved)
        taken: list[tuple[Shape, int]] = []
        for before, _, n in moved:
            stands = self.grades.get(before) if before is not None else None
            while stands and n:
                entry = stands[-1]
                used = min(n, entry[1])
                taken.append((entry[0], used))
                entry[1] -= used
                n -= used
                if not entry[1]:
                    stands.pop()
        return taken

    def give(self, shapes: Iterable[tuple[Shape, int]]) -> None:
        """Released pods: each pod's room as a node of its own."""
        for shape, count in shapes:
            self.nodes[shape] = self.nodes.get(shape, 0) + count

    def take_back(self, shapes: Iterable[tuple[Shape, int]]) -> None:
        """Undo ``give``."""
        for shape, count in shapes:
            left = self.nodes.get(shape, 0) - count
            if left > 0:
                self.nodes[shape] = left
            else:
                self.nodes.pop(shape, None)


def never_message(job: PendingJob, never: Mapping[str, tuple[PodGroup, Never]]) -> str:
    """What a job no candidate cluster could ever hold asks, and the most any node offers."""
    group, why = max(never.values(), key=lambda x: (x[1].asked - x[1].largest, x[1].resource))
    largest = max((n.largest for _, n in never.values() if n.resource == why.resource), default=0)
    role = _role_of(job, group)
    text = vectors.describe
    return (
        f"a {role}pod asks {text(why.resource, why.asked)} {why.resource}; the largest node of "
        f"any candidate cluster offers {text(why.resource, largest)}: it can never start"
    )


def _role_of(job: PendingJob, group: PodGroup) -> str:
    """``"<role> "`` for the role whose pods ``group`` holds, or ``""``."""
    if job.workload is None:
        return ""
    for role in job.workload.roles:
        if role.replicas > 0 and pod_groups((role,))[0].requests == group.requests:
            return f"{role.name} "
    return ""
