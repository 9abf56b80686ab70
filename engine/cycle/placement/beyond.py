"""What is known of a cluster's nodes beyond the minimums of its resource models, during a
cycle: the pods no node could ever hold (``nodebounds.never``), the most its nodes may have
free (``nodebounds.Upper``, for a maybe), and the scheduler-estimator's answers (``estimates``).

The last two must follow what the cycle places and releases on the cluster, so every change
is logged (a linked list that copies share: a trial copy of a cluster state adds to its own
end without touching the original's); the estimator's room for a pod shape is its answer
brought through that log, and the upper bounds are built from the log the first time a maybe
is asked, then kept up to date.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TypeAlias

from engine import vectors
from engine.cycle.jobs.model import PodGroup
from engine.cycle.placement import estimates, nodebounds
from engine.cycle.placement.answers import Misfit, estimate_text
from engine.cycle.placement.nodebounds import Never, Upper
from engine.fleet.model import ClusterView, PodShape
from engine.vectors import Vec

# what happened to the cluster's pods since the snapshot, newest first: (sign, pods, older),
# sign 1 placed, -1 released, -2 released and taken again (``ClusterState.retake``)
Log: TypeAlias = "tuple[int, Sequence[PodGroup], Log] | None"
Shaper = Callable[[Mapping[str, int]], tuple[int, ...]]  # requests → modelled amounts


class Beyond:
    __slots__ = (
        "_limits",
        "_log",
        "_upper",
        "estimates",
        "failed",
        "model",
        "shape",
        "tracks",
        "view",
    )

    def __init__(
        self,
        view: ClusterView,
        model: tuple[str, ...],
        shape: Shaper,
        said: Mapping[PodShape, int] | None,
        failed: str,
    ) -> None:
        self.view, self.model, self.shape = view, model, shape
        self.estimates = said or {}  # pod shape → pods the estimator said fit at the snapshot
        self.failed = failed  # why the estimator gave no answer this time, or ""
        # whether anything needs the log: resource models (a maybe) or the estimator's answers
        self.tracks = bool(model) or bool(self.estimates)
        self._log: Log = None
        self._upper: Upper | None = None  # built when a maybe is first asked
        self._limits: nodebounds.NodeLimits | None = None  # for ``never``, when first asked

    def copy(self) -> Beyond:
        other = Beyond.__new__(Beyond)
        other.view, other.model, other.shape = self.view, self.model, self.shape
        other.estimates, other.failed, other.tracks = self.estimates, self.failed, self.tracks
        other._log, other._limits = self._log, self._limits  # shared: only ever added to
        other._upper = None if self._upper is None else self._upper.copy()
        return other

    # --- never -----------------------------------------------------------------------------------
    def never(self, groups: Sequence[PodGroup], allocatable: Vec) -> tuple[PodGroup, Never] | None:
        """The first pod group no node of the cluster (``allocatable`` in all) could hold even
        empty, with why."""
        limits = self._limits
        if limits is None:
            key = tuple(sorted(allocatable.items()))
            limits = self._limits = nodebounds.limits(self.view.node_shapes, key)
        for g in groups:
            found = limits.never(g.requests)
            if found is not None:
                return g, found
        return None

    # --- the estimator ---------------------------------------------------------------------------
    def room(self, requests: Mapping[str, int]) -> int | None:
        """Pods with ``requests`` that fit now by the estimator's answer, brought through what
        was placed and released since; None when it gave no answer for them."""
        said = self.estimates.get(estimates.pod_shape(requests))
        if said is None:
            return None
        entry = self._log
        while entry is not None:
            sign, groups, entry = entry
            if sign == 1:
                said -= estimates.displaced(groups, requests)
            else:
                freed = estimates.freed(groups, requests)
                said += freed if sign == -1 else -freed
        return max(said, 0)

    def short(self, groups: Sequence[PodGroup]) -> tuple[PodGroup | None, int] | None:
        """By the estimator's answers: (the first group short of room, the room it has), or
        (None, 0) when every group fits beside the others; None when it did not answer for
        every group."""
        rooms = []
        for g in groups:
            room = self.room(g.requests)
            if room is None:
                return None
            rooms.append(room)
        for i, g in enumerate(groups):
            room = rooms[i]
            if len(groups) > 1:
                room -= estimates.displaced([h for h in groups if h is not g], g.requests)
            if g.count > room:
                return g, max(room, 0)
        return None, 0

    def misfit(self, groups: Sequence[PodGroup]) -> tuple[bool, Misfit | None]:
        """(whether the estimator answered for every group, what is missing by its answers)."""
        found = self.short(groups)
        if found is None or found[0] is None:
            return found is not None, None
        group, room = found
        amounts = tuple(sorted((r, v) for r, v in group.requests.items() if r != "pods"))
        return True, Misfit({}, group.count - room, estimate_text(group.count, amounts, room))

    def note(self) -> str:
        """Said beside a misfit when the cluster's estimator gave no answer this time."""
        return (
            f" (its scheduler-estimator: {self.failed}; resource models used)"
            if self.failed
            else ""
        )

    # --- maybe -----------------------------------------------------------------------------------
    def may_hold(self, groups: Sequence[PodGroup]) -> bool:
        """Whether the pods may fit nodes at the most their grades allow."""
        return self.upper().holds([(self.shape(g.requests), g) for g in groups])

    def upper(self) -> Upper:
        """The nodes at the most they may have free, with what was placed and released since
        the snapshot laid onto them."""
        if self._upper is None:
            upper = Upper.of(self.view, self.model, vectors.capacity_milli(self.view.free))
            entries = []
            entry = self._log
            while entry is not None:
                entries.append(entry[:2])
                entry = entry[2]
            for sign, groups in reversed(entries):
                if sign == 1:
                    upper.take([(self.shape(g.requests), g) for g in groups])
                elif sign == -1:
                    upper.give([(self.shape(g.requests), g.count) for g in groups])
                else:
                    upper.take_back([(self.shape(g.requests), g.count) for g in groups])
            self._upper = upper
        return self._upper

    # --- changes ---------------------------------------------------------------------------------
    def placed(self, groups: Sequence[PodGroup], left: Sequence[int]) -> list[tuple[tuple, int]]:
        """Log pods placed (``left``: per group, the pods the minimums had no room for); the
        (minimums, count) of the grades' nodes the pods left over took, which the caller
        takes from its minimums too. With nothing left over and no upper bounds yet, only the
        log changes."""
        taken: list[tuple[tuple, int]] = []
        if any(left) or self._upper is not None:
            upper = self.upper()
            shaped = [(self.shape(g.requests), g) for g in groups]
            upper.take(
                [
                    (s, PodGroup(g.requests, g.count - n))
                    for (s, g), n in zip(shaped, left, strict=True)
                ]
            )
            over = [
                (s, PodGroup(g.requests, n)) for (s, g), n in zip(shaped, left, strict=True) if n
            ]
            if over:
                taken = upper.take(over)
        if self.tracks:
            self._log = (1, groups, self._log)
        return taken

    def released(self, groups: Sequence[PodGroup], again: bool = False) -> None:
        """Log pods released (``again``: taken back after a release)."""
        if self.tracks:
            self._log = (-2 if again else -1, groups, self._log)
        if self._upper is not None:
            shaped = [(self.shape(g.requests), g.count) for g in groups]
            if again:
                self._upper.take_back(shaped)
            else:
                self._upper.give(shaped)
