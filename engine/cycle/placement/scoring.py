"""The rank of a candidate cluster for a job, and what to say when a score expression fails.

Clusters are ranked, best first, by (1) the earliest group of the binding's ordered cluster
affinities that allows them, (2) the cost when the policy has ``spec.placement.cost``, cheapest
first, (3) whether every CEL score succeeded there, (4) the score: the sum of the weighted CEL
scores (``spec.placement.scores``) plus the strategy's term (``strategy_term``: BinPack
prefers the cluster whose fullest node with room for the job's largest pod it fills most
snugly, then the one left fullest in the job's dominant resource; Spread the emptiest), then
(5) the name.

A score that fails on a cluster, or gives no number, counts as 0 there and puts the cluster
after every cluster (of the same affinity group and cost) where all scores succeeded: a broken
score never makes a cluster win. The job is still placed, and its decision names the score and
the clusters (``score NAME failed: ERROR`` among the cluster reasons, as a failing filter's
``filter NAME failed: ERROR``).

The cost of a cluster is the price in its label ``cost.label`` times what the job asks of
``cost.resource`` there (per job when no resource is named). A cluster without a well-formed
price is, for a job that would pay for it, no candidate (``unpriced: Exclude``) or ranked after
every priced one (``Last``).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, MutableMapping, Sequence
from fractions import Fraction
from typing import Any

from engine.cycle.jobs.model import PodGroup
from engine.cycle.placement.capacity import ClusterState
from engine.errors import QuantityError, value_type
from engine.fleet.model import ClusterView
from engine.policy import cel
from engine.policy.model import Cost, PlacementStrategy, Unpriced
from engine.quantity import parse_quantity


def cel_score(
    scores: Sequence[Any],
    results: Sequence[Any],
    cluster: str,
    failed: MutableMapping[str, tuple[str, str]] | None,
) -> tuple[bool, float]:
    """Whether every score succeeded on ``cluster``, and the weighted sum of the ``results``
    of ``scores`` there (a failed one counts 0); the first score that fails is put in
    ``failed`` (when given): cluster → (score name, why)."""
    total, ok = 0.0, True
    for score, result in zip(scores, results, strict=False):
        if isinstance(result, int | float) and not isinstance(result, bool):
            total += score.weight * float(result)
            continue
        ok = False
        if failed is not None and cluster not in failed:
            failed[cluster] = (score.name, failure(score.name, result))
    return ok, total


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
    return f"{message}; {said} (counted as 0), ranked last" if said else message


class CostRanking:
    """``spec.placement.cost`` over one cycle's clusters: prices read once per cluster view."""

    __slots__ = ("_prices", "cost")

    def __init__(self, cost: Cost | None) -> None:
        self.cost = cost
        self._prices: dict[str, tuple[ClusterView, Fraction | None, str]] = {}

    def pays(self, need: Mapping[str, int]) -> bool:
        """Whether a job needing ``need`` pays on a priced cluster (no cost policy: never)."""
        c = self.cost
        return c is not None and (c.resource is None or need.get(c.resource, 0) > 0)

    def price(self, view: ClusterView) -> tuple[Fraction | None, str]:
        """The cluster's price, or None and why it has none."""
        kept = self._prices.get(view.name)
        if kept is None or kept[0] is not view:
            kept = (view, *_price(view, self.cost.label if self.cost else ""))
            self._prices[view.name] = kept
        return kept[1], kept[2]

    def excluded(self, view: ClusterView, need: Mapping[str, int]) -> str:
        """Why the cluster is no candidate for a job needing ``need`` (``""``: it is one)."""
        if self.cost is None or self.cost.unpriced != Unpriced.EXCLUDE or not self.pays(need):
            return ""
        return self.price(view)[1]

    def key(self, view: ClusterView, need: Mapping[str, int]) -> float:
        """Higher is cheaper: minus the cost of placing pods needing ``need`` on the cluster."""
        if not self.pays(need):
            return 0.0
        price = self.price(view)[0]
        if price is None:
            return -math.inf
        c = self.cost
        units = Fraction(need.get(c.resource, 0), 1000) if c and c.resource else 1
        return -float(price * units)

    def said(self, clusters: Mapping[str, ClusterState], placed: Sequence[Any]) -> str:
        """`` at cost N`` for assignments (cluster name, pod groups), ``""`` without a cost
        (no policy, or nothing to pay); `` at an unknown cost`` when an unpriced one pays."""
        c = self.cost
        total, paid = Fraction(0), False
        for name, groups in placed if c is not None else ():
            for group in groups:
                need = group.requests
                if not self.pays(need):
                    continue
                price = self.price(clusters[name].view)[0]
                if price is None:
                    return " at an unknown cost"
                units = Fraction(need.get(c.resource, 0), 1000) if c.resource else 1
                total, paid = total + price * units * group.count, True
        return f" at cost {float(total):.6g}" if paid else ""


def _price(view: ClusterView, label: str) -> tuple[Fraction | None, str]:
    text = view.labels.get(label)
    if text is None:
        return None, f"no price: no label {label}"
    try:
        price = parse_quantity(text)
    except QuantityError:
        price = None
    if price is None or price < 0:
        return None, f"no price: label {label}={text!r} is not a number ≥ 0"
    return price, ""


def strategy_term(
    strategy: PlacementStrategy,
    state: ClusterState,
    need: Mapping[str, int],
    pods: Sequence[PodGroup] = (),
) -> float:
    """The strategy's part of a cluster's score, in [0, 1]: Spread, how empty the cluster is
    left in the job's dominant resource; BinPack, how full, and first of all (nine tenths of
    the term) how snugly the job's largest pod fits the node it would be laid on, where the
    cluster's resource models show its nodes (``snugness``)."""
    full = fullness(state, need)
    if strategy != PlacementStrategy.BIN_PACK:
        return 1.0 - full
    snug = snugness(state, pods)
    return full if snug is None else 0.9 * snug + 0.1 * full


def snugness(state: ClusterState, pods: Sequence[PodGroup]) -> float | None:
    """1 / (1 + the pods of its shape the node would still hold) for the largest pod of
    ``pods`` on the fullest node with room for it (as the cycle lays pods, and as a member
    binding with ``MostAllocated`` does): 1 when it fills that node, lower the emptier the
    node it breaks into, so small pods go where nodes are already in use and whole nodes stay
    free for large pods. None without node models or room."""
    if state.nodes is None or not pods:
        return None
    largest = max(pods, key=lambda g: sorted(g.requests.values(), reverse=True))
    shape = tuple(largest.requests.get(r, 0) for r in state.model)
    if not any(shape):
        return None
    left = state.best_fit_left(shape)
    return None if left is None else 1.0 / (1.0 + max(left, 0.0))


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
