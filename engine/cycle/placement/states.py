"""The clusters' states for one cycle (``capacity.ClusterState`` each), kept between cycles
where nothing they are read from changed."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from engine.cycle.placement.capacity import ClusterState
from engine.fleet.model import ClusterView, Estimates, PodShape

Kept = dict[str, tuple[ClusterView, Mapping[PodShape, int] | None, str, ClusterState]]


def cluster_states(
    views: Sequence[ClusterView], estimates: Estimates, kept: Kept | None = None
) -> dict[str, ClusterState]:
    """A state per cluster (in ``views``' order), each with its estimator's answers.

    ``kept`` (a ``JobCache``'s, from one cycle to the next): cluster → (view, the estimator's
    answers, its failure, the state read from them), as left by the last call. While a view is
    the very (immutable) object and the estimator said the same, the cycle gets a ``copy`` of
    that state: a state is a function of those alone, and a copy answers as the original
    would (sharing what was found at it) without reading the view again."""
    said, failed = estimates.by_cluster(), estimates.failed
    if kept is None:
        return {v.name: ClusterState(v, said.get(v.name), failed.get(v.name, "")) for v in views}
    states: dict[str, ClusterState] = {}
    now: Kept = {}
    for view in views:
        answers, failure = said.get(view.name), failed.get(view.name, "")
        entry = kept.get(view.name)
        if entry is None or entry[0] is not view or entry[1] != answers or entry[2] != failure:
            entry = (view, answers, failure, ClusterState(view, answers, failure))
        now[view.name] = entry
        states[view.name] = entry[3].copy()
    kept.clear()  # only the clusters of this snapshot
    kept.update(now)
    return states
