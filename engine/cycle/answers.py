"""What a cluster state has found about fitting pods, kept for one version of the state (see
``capacity.py``): per pod signature whether the pods fit and, when not, what is missing."""

from __future__ import annotations

from typing import NamedTuple, TypeAlias

from engine.cycle.jobs import PodGroup
from engine.cycle.vectors import Vec


class Misfit(NamedTuple):  # a named tuple: built often, and faster than a frozen dataclass
    short: Vec  # totals missing, per resource (empty when the totals fit)
    node_pods: int  # pods that found no node with room (0 when the node shape fits)
    message: str


PodKey: TypeAlias = tuple[tuple[tuple[tuple[str, int], ...], int], ...]


class Answers:
    """Fit answers found at one ``version`` of a state (and of its copies at that version)."""

    __slots__ = ("firm", "fits", "misfits", "most", "unplaced", "version")

    def __init__(self, version: int) -> None:
        self.version = version
        self.fits: dict[PodKey, bool] = {}
        # one pod shape (its requests' items) → how many such pods fit now (or None)
        self.most: dict[tuple[tuple[str, int], ...], int | None] = {}
        self.misfits: dict[PodKey, Misfit | None] = {}
        self.unplaced: dict[PodKey, tuple[PodGroup, int] | None] = {}  # several pod groups
        # keys whose "does not fit" came from totals or room per shape, not from how the
        # greedy placement of several pod groups happened to lay them out: placing more pods
        # cannot change it
        self.firm: set[PodKey] = set()
