"""What a cluster state has found about fitting pods, kept for one version of the state (see
``capacity.py``): per pod signature whether the pods fit and, when not, what is missing, in
words (``totals_text``, ``room_text``)."""

from __future__ import annotations

import functools
from typing import NamedTuple, TypeAlias

from engine import vectors
from engine.cycle.jobs.model import PodGroup
from engine.vectors import Vec


class Misfit(NamedTuple):  # a named tuple: built often, and faster than a frozen dataclass
    short: Vec  # totals missing, per resource (empty when the totals fit)
    node_pods: int  # pods that found no node with room (0 when the node shape fits)
    message: str


PodKey: TypeAlias = tuple[tuple[tuple[tuple[str, int], ...], int], ...]


class Answers:
    """Fit answers found at one ``version`` of a state (and of its copies at that version)."""

    __slots__ = ("firm", "fits", "left", "maybe", "misfits", "most", "unplaced", "version")

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
        self.maybe: dict[PodKey, bool] = {}  # may the pods fit nodes at their grades' most
        # a pod shape (modelled resources) → ``nodes.best_fit_left`` of it (scoring's snugness)
        self.left: dict[tuple[int, ...], float | None] = {}


@functools.lru_cache(maxsize=4096)  # a pure function of the amounts: safe to share
def _shape_text(amounts: tuple[tuple[str, int], ...]) -> str:
    return vectors.describe_vec(dict(amounts))


# Misfit messages, kept by what they say: many clusters and versions give the same one.
@functools.lru_cache(maxsize=65536)  # pure functions of their arguments: safe to share
def totals_text(resource: str, need: int, free: int) -> str:
    text = vectors.describe
    return f"needs {text(resource, need)} {resource}, {text(resource, free)} free"


@functools.lru_cache(maxsize=65536)
def room_text(missing: int, count: int, amounts: tuple[tuple[str, int], ...], nodes: int) -> str:
    return (
        f"{missing} of {count} pods needing {_shape_text(amounts)} find no node with room "
        f"({nodes} such nodes free)"
    )


@functools.lru_cache(maxsize=65536)
def estimate_text(count: int, amounts: tuple[tuple[str, int], ...], room: int) -> str:
    return (
        f"its scheduler-estimator has room for {room} of {count} pods needing "
        f"{_shape_text(amounts)}"
    )
