"""Demand-aware fairness: how close each queue came to its weighted max-min fair share.

Jain's index compares the queues' weighted shares with each other, as if every queue wanted
without limit; a queue that asked for little and got all of it lowers the index. Here each
queue's share is compared with what weighted max-min fairness (water-filling) would give it,
given what it asked for:

* ``fair_shares(capacity, demands, weights)``: raise a level λ from 0; queue q gets
  ``min(demand_q, λ·weight_q)``; stop when the capacity is given out or every demand is met;
* ``attainment(used, demands, weights)``: the capacity is what the queues used together
  (``Σ used``), so the measure looks at how it was divided, not at idle capacity
  (utilisation's part); per queue ``min(1, used_q / fair_q)`` (1 when its fair share is 0),
  and their mean. 1 when every queue got its fair share; since the shares sum to the same
  total, some queue always reaches 1, so the mean is at least ``1/n``.

In the simulator (``simulate.metrics``) a window's ``used`` is GPU-seconds admitted and
``demand`` GPU-seconds admitted plus GPU-seconds of the jobs waiting, over the queues that
wanted GPUs in it (the queues of Jain's index).
"""

from __future__ import annotations

from collections.abc import Mapping


def fair_shares(
    capacity: float, demands: Mapping[str, float], weights: Mapping[str, float]
) -> dict[str, float]:
    """Weighted max-min fair division of ``capacity`` among ``demands`` (water-filling).
    Weights must be positive; ties are broken by name, so the result does not depend on the
    mappings' order."""
    fair: dict[str, float] = {}
    left = max(0.0, capacity)
    weight_left = sum(weights[q] for q in demands)
    for queue in sorted(demands, key=lambda q: (demands[q] / weights[q], q)):
        level = left / weight_left if weight_left > 0 else 0.0
        fair[queue] = min(max(0.0, demands[queue]), level * weights[queue])
        left = max(0.0, left - fair[queue])
        weight_left -= weights[queue]
    return fair


def attainment(
    used: Mapping[str, float], demands: Mapping[str, float], weights: Mapping[str, float]
) -> tuple[float | None, dict[str, float]]:
    """The mean over the queues of ``min(1, used / fair share)`` and each queue's term, the
    capacity being ``Σ used``; None (and no terms) for fewer than two queues, as Jain's index."""
    if len(demands) < 2:
        return None, {}
    fair = fair_shares(sum(used.get(q, 0.0) for q in demands), demands, weights)
    terms = {
        q: 1.0 if fair[q] <= 0 else min(1.0, used.get(q, 0.0) / fair[q]) for q in sorted(demands)
    }
    return sum(terms.values()) / len(terms), terms
