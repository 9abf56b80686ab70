"""A cluster's free capacity during a cycle: totals per resource and node shape.

Totals are Karmada's estimate: allocatable − allocated − allocating. Node shape comes from the
cluster's resource models: ``allocatableModelings`` counts nodes per grade, and a node in a grade
has at least the grade's minimum free of every modelled resource (the first grade's minimum is
0, as Karmada documents). Pods are placed best-fit onto groups of identical nodes
(``nodes.py``), so later jobs in the cycle see what earlier admissions took. Without resource
models only totals are checked.

Caches: the fit answer per pod signature (``pod_key``) is kept while ``version`` is the one it
was found at (for one pod shape, how many pods fit is kept too, so jobs of any count share it);
every change (``place``, ``release``, ``retake``, ``take``) bumps ``version``, except that a
"does not fit" decided by the totals or the room per pod shape survives ``place`` (placing only
takes room away; the greedy layout of several pod groups is not monotone). What the nodes hold
per pod shape is counted once and brought through the node changes logged since
(``nodes.RoomCounts``). A ``copy`` shares answers and counts until either changes.

Beyond the minimums (``beyond.Beyond``): a pod no node could ever hold never fits; where the
minimums have no room, pods may still fit nodes at the most their grades allow (``may_hold``,
``nodeShape: Optimistic``); where the member's scheduler-estimator answered for a pod shape,
its answer decides instead of the models. One class past 400 lines: every question the cycle
asks of a cluster's room, and the changes that keep the answers right, share one state."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from engine import vectors
from engine.cycle.jobs.model import PodGroup
from engine.cycle.jobs.reading import pod_key
from engine.cycle.placement import nodes as nodes_of
from engine.cycle.placement.answers import Answers, Misfit, PodKey, room_text, totals_text
from engine.cycle.placement.beyond import Beyond
from engine.cycle.placement.nodes import Move, RoomCounts
from engine.fleet.model import ClusterView, PodShape
from engine.vectors import Vec

Moved = list[Move] | None  # where node changes are recorded, when they are


class ClusterState:
    __slots__ = (
        "_answers",
        "_counts",
        "_own_counts",
        "_room_bounds",
        "_shapes",
        "allocatable",
        "beyond",
        "free",
        "model",
        "nodes",
        "version",
        "view",
    )

    def __init__(
        self,
        view: ClusterView,
        estimates: Mapping[PodShape, int] | None = None,
        estimator_failed: str = "",
    ) -> None:
        self.view = view
        self.allocatable: Vec = vectors.capacity_milli(view.allocatable)
        self.free: Vec = vectors.capacity_milli(view.free)
        self.model: tuple[str, ...] = ()
        # free amounts of the modelled resources (in ``model`` order) → number of such nodes
        self.nodes: dict[tuple[int, ...], int] | None = None
        self.version = 0
        self._answers = Answers(0)
        self._counts = RoomCounts()  # what the nodes hold per pod shape
        self._own_counts = True  # False while a copy may share ``_counts``
        # whether a group can never place more pods than ``_room`` says, however the nodes
        # fill: true unless a resource model's minimum is negative (no node has less than 0
        # free at first; placing and releasing keep it so)
        self._room_bounds = True
        # id(requests) → (requests, their shape): kept with the requests, so ids stay theirs
        self._shapes: dict[int, tuple[Mapping[str, int], tuple[int, ...]]] = {}
        if view.resource_models and view.allocatable_modelings:
            self.model, nodes = nodes_of.from_models(
                view.resource_models, view.allocatable_modelings
            )
            self.nodes = nodes
            self._room_bounds = all(v >= 0 for shape in nodes for v in shape)
        # what is known beyond the minimums: never, maybe, the scheduler-estimator's answers
        self.beyond = Beyond(view, self.model, self._shape, estimates, estimator_failed)

    @property
    def name(self) -> str:
        return self.view.name

    def copy(self) -> ClusterState:
        other = ClusterState.__new__(ClusterState)
        other.view, other.allocatable, other.model = self.view, self.allocatable, self.model
        other.free = dict(self.free)
        other.nodes = None if self.nodes is None else dict(self.nodes)
        other.version, other._room_bounds = self.version, self._room_bounds
        # shared until either changes (both then start anew): the same state until then
        other._answers = self._answers
        other._counts = self._counts
        other._own_counts = self._own_counts = False
        other._shapes = self._shapes  # the same model
        other.beyond = self.beyond.copy()
        return other

    # --- what fits -----------------------------------------------------------------------------
    def could_ever_hold(self, groups: Sequence[PodGroup], need: Vec | None = None) -> bool:
        """Whether the gang's totals (``need``, when given) fit the cluster's allocatable."""
        if need is None:
            need = vectors.total((g.requests, g.count) for g in groups)
        allocatable = self.allocatable
        for r, v in need.items():  # a plain loop: twice as fast as all() over a generator
            if v > allocatable.get(r, 0):
                break
        else:
            return True
        return False

    def fits(self, groups: Sequence[PodGroup], need: Vec, key: PodKey | None = None) -> bool:
        """Whether every pod of ``groups`` (totals ``need``; ``key``: their ``pod_key``, when
        the caller has it) fits now. Answers are cached by ``key`` alone: ``need`` must be the
        groups' totals (``PendingJob.demand`` is)."""
        if key is None:
            key = pod_key(groups)
        answers = self._current()
        found = answers.fits.get(key)
        if found is None:
            most = None
            if (
                self.beyond.never(groups, self.allocatable) is not None
            ):  # no node could hold a pod, even empty
                answers.fits[key] = False
                answers.firm.add(key)
                return False
            if len(groups) == 1:  # jobs of one pod shape and any count share one answer
                shape = key[0][0]
                if shape in answers.most:
                    most = answers.most[shape]
                else:
                    most = answers.most[shape] = self._most(groups[0].requests)
            if most is not None:
                found, firm = groups[0].count <= most, True
            else:
                found, firm = self._fits(groups, need, key)
            answers.fits[key] = found
            if firm and not found:
                answers.firm.add(key)
        return found

    def _most(self, requests: Mapping[str, int]) -> int | None:
        """How many pods with ``requests`` fit now, by totals and node shape: a group of them
        fits exactly when its count is at most this (None for a negative request)."""
        most = 1 << 62
        free = self.free
        for r, v in requests.items():
            if v > 0:
                n = free.get(r, 0) // v
                if n < most:
                    most = n
            elif v < 0:
                return None
            elif free.get(r, 0) < 0:  # a zero request on an overdrawn resource: as _fits
                most = -1
        if self.beyond.estimates and (room := self.beyond.room(requests)) is not None:
            return min(most, room)
        if self.nodes is not None:
            shape = self._shape(requests)
            if any(shape):
                most = min(most, self._room(shape))
        return most

    def misfit(
        self, groups: Sequence[PodGroup], need: Vec | None = None, key: PodKey | None = None
    ) -> Misfit | None:
        """None when every pod of ``groups`` (totals ``need``, when given; ``key``: their
        ``pod_key``) fits now; otherwise what is missing."""
        if key is None:
            key = pod_key(groups)
        answers = self._current().misfits
        if key in answers:  # an answer may be None: looked up by key, not by get
            return answers[key]
        found = answers[key] = self._misfit(groups, need, key)
        return found

    def _current(self) -> Answers:
        """The answers cached for this version (new ones when the state changed since)."""
        answers = self._answers
        if answers.version != self.version:
            answers = self._answers = Answers(self.version)
        return answers

    def _fits(self, groups: Sequence[PodGroup], need: Vec, key: PodKey) -> tuple[bool, bool]:
        """(``_misfit(...) is None``, whether a "no" is firm), without the message and without
        placing the pods when a group alone already has too little room."""
        free = self.free
        for r, v in need.items():
            if v > free.get(r, 0):
                return False, True
        if self.beyond.estimates and (short := self.beyond.short(groups)) is not None:
            return short[0] is None, True  # placing more only lowers what the estimator said
        if self.nodes is None:
            return True, False
        if len(groups) > 1 and self._room_bounds:
            # an exact, cheap "no": placing the groups together cannot put more pods of one
            # group on the nodes than they hold of it now
            for g in groups:
                shape = self._shape(g.requests)
                if any(shape) and self._room(shape) < g.count:
                    return False, True
        fits = self._unplaced(groups, key) is None
        return fits, not fits and len(groups) == 1  # one shape: decided by room alone

    def _misfit(self, groups: Sequence[PodGroup], need: Vec | None, key: PodKey) -> Misfit | None:
        if need is None:
            need = vectors.total((g.requests, g.count) for g in groups)
        free = self.free
        for r, v in need.items():  # a plain loop: faster than any() over a generator
            if v > free.get(r, 0):
                short = vectors.shortfall(need, free)
                r = min(short)
                return Misfit(short, 0, totals_text(r, need[r], max(free.get(r, 0), 0)))
        if self.beyond.estimates and (said := self.beyond.misfit(groups))[0]:
            return said[1]
        if self.nodes is None:
            return None
        if len(groups) == 1:  # as ``_unplaced``, with the count of nodes found on the way
            group = groups[0]
            missing, with_room = self._short_of_room(group)
            if not missing:
                return None
        else:
            left = self._unplaced(groups, key)
            if left is None:
                return None
            group, missing = left
            with_room = self.nodes_with_room(group.requests)
        amounts = tuple([(r, group.requests[r]) for r in self.model if r in group.requests])
        return Misfit({}, missing, room_text(missing, group.count, amounts, with_room))

    def _short_of_room(self, group: PodGroup) -> tuple[int, int]:
        """(pods of ``group`` that find no node with room, nodes with room for one): each
        node takes what it can of one pod shape, independently."""
        shape = self._shape(group.requests)
        if not any(shape):
            return 0, 0
        room, with_room, _ = self._counts.entry(self.nodes, shape)
        return max(group.count - room, 0), with_room

    def _unplaced(self, groups: Sequence[PodGroup], key: PodKey) -> tuple[PodGroup, int] | None:
        """The first pod group that finds no node with room, with its pods left over (for
        several groups kept with the fit answers, so ``misfit`` after ``fits`` places once)."""
        assert self.nodes is not None
        if len(groups) == 1:
            missing = self._short_of_room(groups[0])[0]
            return (groups[0], missing) if missing else None
        answers = self._current()
        if key not in answers.unplaced:
            answers.unplaced[key] = self._unplaced_groups(groups)
        return answers.unplaced[key]

    def _unplaced_groups(self, groups: Sequence[PodGroup]) -> tuple[PodGroup, int] | None:
        """``_unplaced`` for several pod groups: what ``_place_nodes`` leaves over, without
        laying the pods out when the answer is known. Placed first (the largest shape; of
        equal ones, the last listed), a group finds the room it would find alone."""
        first: tuple[tuple[int, ...], PodGroup] | None = None
        for g in groups:
            shape = self._shape(g.requests)
            if any(shape) and (first is None or shape >= first[0]):
                first = (shape, g)
        if (
            first is not None
            and self._room_bounds
            and (room := self._room(first[0])) < first[1].count
        ):
            return first[1], first[1].count - room
        if self._room_for_all(groups):
            return None
        return self._place_nodes(dict(self.nodes), groups)[1]

    def _room_for_all(self, groups: Sequence[PodGroup]) -> bool:
        """``nodes.room_for_all`` of the groups (False where room may be negative)."""
        shaped = [(self._shape(g.requests), g) for g in groups]
        return self._room_bounds and nodes_of.room_for_all(shaped, self._room)

    def _room(self, shape: tuple[int, ...]) -> int:
        """How many pods of ``shape`` (modelled resources) the nodes hold now."""
        return self._counts.entry(self.nodes, shape)[0]

    def node_deficits(self, groups: Sequence[PodGroup]) -> list[tuple[tuple[int, ...], int]]:
        """(pod shape, pods short) for each group whose pods the nodes lack room for even
        alone: however pods are placed or released, the gang fits only once the nodes hold
        that many more pods of the shape. Empty without a node model that bounds room."""
        if self.nodes is None or not self._room_bounds:
            return []
        found = []
        for g in groups:
            if self.beyond.estimates and self.beyond.room(g.requests) is not None:
                continue  # the estimator's room, not the models', says whether it fits
            shape = self._shape(g.requests)
            if any(shape) and (short := g.count - self._room(shape)) > 0:
                found.append((shape, short))
        return found

    def room_freed(self, groups: Sequence[PodGroup], shape: tuple[int, ...]) -> int:
        """Pods of ``shape`` the nodes hold more once ``groups`` are released (``release``
        gives each pod's room back as a node of its own)."""
        return self.rooms_freed([groups], shape)[0]

    def rooms_freed(
        self, released: Sequence[Sequence[PodGroup]], shape: tuple[int, ...]
    ) -> list[int]:
        """``room_freed`` of each of ``released``."""
        return nodes_of.rooms_freed(
            [[(self._shape(g.requests), g.count) for g in groups] for groups in released], shape
        )

    def nodes_with_room(self, requests: Mapping[str, int]) -> int:
        if self.nodes is None:
            return 0
        return self._counts.entry(self.nodes, self._shape(requests))[1]

    def max_pods(self, requests: Mapping[str, int]) -> int:
        """How many pods of this shape fit now (for splitting a resizable job)."""
        if self.beyond.never([PodGroup(requests, 1)], self.allocatable) is not None:
            return 0
        most = min((self.free.get(r, 0) // v for r, v in requests.items() if v > 0), default=10**9)
        if self.beyond.estimates and (room := self.beyond.room(requests)) is not None:
            return max(min(most, room), 0)
        need = self._shape(requests)
        if self.nodes is not None and any(need):
            most = min(most, self._room(need))
        return max(most, 0)

    def best_fit_left(self, shape: tuple[int, ...]) -> float | None:
        """``nodes.best_fit_left`` of ``shape`` on the nodes now (kept with the fit answers;
        an answer may be None: looked up by key, not by get)."""
        if shape not in (left := self._current().left):
            left[shape] = nodes_of.best_fit_left(self.nodes or {}, shape)
        return left[shape]

    # --- beyond the minimums ------------------------------------------------------------------
    def may_hold(self, groups: Sequence[PodGroup], need: Vec, key: PodKey) -> bool:
        """Whether the pods, which the minimums of the resource models have no room for, may
        fit nodes at the most their grades allow (``nodebounds``); False where the estimator
        answered for them (its answer is exact) or there are no models."""
        if self.nodes is None:
            return False
        answers = self._current()
        found = answers.maybe.get(key)
        if found is None:
            free = self.free
            found = all(v <= free.get(r, 0) for r, v in need.items())
            if found and self.beyond.estimates and self.beyond.short(groups) is not None:
                found = False
            found = answers.maybe[key] = found and self.beyond.may_hold(groups)
        return found

    # --- changes -------------------------------------------------------------------------------
    def place(self, groups: Sequence[PodGroup]) -> None:
        """Take the pods' resources: after ``misfit`` returned None, for a job admitted where
        it may fit (``may_hold``), or for a job admitted but not yet in the cluster's status.
        Pods the minimums have no room for take the nodes of the grade they may fit (or, when
        none, only the totals)."""
        for g in groups:
            vectors.add_into(self.free, g.requests, -g.count)
        moved: list[Move] = []
        left = [0] * len(groups)
        if self.nodes is not None:
            shaped = [(self._shape(g.requests), g) for g in groups]
            left = nodes_of.place_each(self.nodes, shaped, moved)
        for low, n in self.beyond.placed(groups, left):
            if self.nodes is not None and (taken := min(n, self.nodes.get(low, 0))):
                nodes_of.drop(self.nodes, low, taken)
                moved.append((low, None, taken))
        before = self._answers
        self.version += 1
        self._logged(moved)
        # placing only takes room away: what firmly did not fit just before still does not
        if before.version == self.version - 1 and before.firm:
            self._answers = Answers(self.version)
            self._answers.fits = dict.fromkeys(before.firm, False)
            self._answers.firm = set(before.firm)

    def release(self, groups: Sequence[PodGroup]) -> None:
        """Give back a victim's pods: totals, and each pod's room as a node of its own shape
        (where on its node it ran is unknown, so nothing more is assumed)."""
        moved: list[Move] = []
        for g in groups:
            vectors.add_into(self.free, g.requests, g.count)
            if self.nodes is not None:
                shape = self._shape(g.requests)
                self.nodes[shape] = self.nodes.get(shape, 0) + g.count
                moved.append((None, shape, g.count))
        self._changed(-1, groups, moved)

    def retake(self, groups: Sequence[PodGroup]) -> None:
        """Undo ``release(groups)`` on a state where nothing was placed since (a trial copy
        that only releases), so a search can put one victim back without starting over."""
        moved: list[Move] = []
        for g in groups:
            vectors.add_into(self.free, g.requests, -g.count)
            if self.nodes is not None:
                shape = self._shape(g.requests)
                nodes_of.drop(self.nodes, shape, g.count)
                moved.append((shape, None, g.count))
        self._changed(-2, groups, moved)

    def take(self, amounts: Vec) -> None:
        """Room withheld from the cycle's later jobs (a preemptor nominated here, a hold)."""
        vectors.add_into(self.free, amounts, -1)
        self.version += 1

    def _changed(self, sign: int, groups: Sequence[PodGroup], moved: Sequence[Move]) -> None:
        """After ``release`` (sign -1) or ``retake`` (-2)."""
        self.beyond.released(groups, again=sign == -2)
        self.version += 1
        self._logged(moved)

    def _logged(self, moved: Sequence[Move]) -> None:
        """Bring the room counts through node changes, on counts of this state's own (a copy
        shares them until either changes)."""
        if moved:
            self._counts = self._counts.logged(moved, shared=not self._own_counts)
            self._own_counts = True

    def _shape(self, requests: Mapping[str, int]) -> tuple[int, ...]:
        """The pod's requests of the modelled resources, in ``model`` order."""
        kept = self._shapes.get(id(requests))
        if kept is not None and kept[0] is requests:
            return kept[1]
        shape = tuple([requests.get(r, 0) for r in self.model])
        self._shapes[id(requests)] = (requests, shape)
        return shape

    def _place_nodes(
        self, nodes: dict[tuple[int, ...], int], groups: Sequence[PodGroup], moved: Moved = None
    ) -> tuple[dict[tuple[int, ...], int], tuple[PodGroup, int] | None]:
        """``nodes.place`` of the groups, each with its shape."""
        return nodes_of.place(nodes, [(self._shape(g.requests), g) for g in groups], moved)
