"""The score of a candidate cluster for a job, and what to say when a score expression fails.

The score is the sum of the weighted CEL scores of the SchedulingPolicy
(``spec.placement.scores``) plus the strategy's term: BinPack prefers the cluster left fullest
in the job's dominant resource, Spread the emptiest. A score that fails on a cluster, or gives
no number, counts as 0 there: the job is still placed, and its decision names the score and
the clusters (``score NAME failed: ERROR`` among the cluster reasons, as a failing filter's
``filter NAME failed: ERROR``).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, MutableMapping, Sequence
from typing import Any

from engine.cycle.capacity import ClusterState
from engine.errors import value_type
from engine.policy import cel
from engine.policy.model import PlacementStrategy


def cel_score(
    scores: Sequence[Any],
    results: Sequence[Any],
    cluster: str,
    failed: MutableMapping[str, tuple[str, str]] | None,
) -> float:
    """The weighted sum of the ``results`` of ``scores`` on ``cluster``; the first score that
    fails there is put in ``failed`` (when given): cluster → (score name, why)."""
    total = 0.0
    for score, result in zip(scores, results, strict=False):
        if isinstance(result, int | float):
            total += score.weight * float(result)
        elif failed is not None and cluster not in failed:
            failed[cluster] = (score.name, failure(score.name, result))
    return total


def failure(name: str, result: Any) -> str:
    if isinstance(result, cel.CelError):
        return f"score {name} failed: {result.message}"
    return f"score {name} failed: expected a number, got {value_type(result)}"


def with_failed_scores(message: str, failed: Mapping[str, tuple[str, str]]) -> str:
    """``message``, then which scores failed on which clusters (they counted as 0)."""
    by_score: dict[str, list[str]] = {}
    for cluster, (score, _) in sorted(failed.items()):
        by_score.setdefault(score, []).append(cluster)
    said = "; ".join(
        f"score {score} failed on {', '.join(names)}" for score, names in sorted(by_score.items())
    )
    return f"{message}; {said} (counted as 0)" if said else message


def strategy_term(
    strategy: PlacementStrategy, state: ClusterState, need: Mapping[str, int]
) -> float:
    full = fullness(state, need)
    return full if strategy == PlacementStrategy.BIN_PACK else 1.0 - full


def fullness(state: ClusterState, need: Mapping[str, int]) -> float:
    """How full the cluster is after placing pods needing ``need`` in all, in the job's
    dominant resource."""
    best, share = 0.0, -1.0
    for r, amount in need.items():
        capacity = state.allocatable.get(r, 0)
        if capacity <= 0 or r == "pods":
            continue
        if amount / capacity > share:
            share = amount / capacity
            best = 1.0 - (state.free.get(r, 0) - amount) / capacity
    return best


@functools.lru_cache(maxsize=4096)  # a pure function of the name: safe to share
def reverse(name: str) -> tuple[int, ...]:
    """A key under which ``max`` picks the alphabetically first name among equals."""
    return (*tuple(-ord(ch) for ch in name), 0)
