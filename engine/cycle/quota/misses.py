"""Why a job does not pass quota now: :class:`QuotaMiss`, its reason and the sentence a user
reads (``QuotaTree.check`` finds the miss; these say it)."""

from __future__ import annotations

from typing import NamedTuple

from engine import vectors
from engine.cycle.reasons import Reason
from engine.vectors import Vec


class QuotaMiss(NamedTuple):  # a named tuple: faster to build than a frozen dataclass
    reason: Reason  # WAITING_FOR_QUOTA, or EXCEEDS_MAX_QUOTA when it can never fit
    message: str
    short: Vec  # per resource, how much is missing


def above_max(queue: str, r: str, need: int, cap: int) -> QuotaMiss:
    """The job alone asks more of ``r`` than the ``max`` of ``queue``: it never fits."""
    text = vectors.describe
    return QuotaMiss(
        Reason.EXCEEDS_MAX_QUOTA,
        f"needs {text(r, need)} {r}, more than the max {text(r, cap)} of queue {queue}",
        {r: need - cap},
    )


def beyond_reach(queue: str, r: str, need: int, most: int) -> QuotaMiss:
    """More than ``queue`` could get even with every other queue idle."""
    text = vectors.describe
    return QuotaMiss(
        Reason.WAITING_FOR_QUOTA,
        f"needs {text(r, need)} {r}; queue {queue} can get at most {text(r, most)} with the "
        "fleet as it is, even if every other queue were idle (guarantees, borrowing limits, "
        "Ready capacity)",
        {r: need - most},
    )


def at_max(queue: str, r: str, need: int, cap: int, used: int) -> QuotaMiss:
    """``queue`` (the job's or an ancestor) would pass its ``max`` of ``r``."""
    text = vectors.describe
    return QuotaMiss(
        Reason.WAITING_FOR_QUOTA,
        f"queue {queue} max {text(r, cap)} {r}: {text(r, used)} in use, job needs {text(r, need)}",
        {r: used + need - cap},
    )


def short_of(
    queue: str, r: str, short: Vec, *, need: int, free: int, guarantee: int, used: int
) -> QuotaMiss:
    """Not enough unused quota of ``r`` (the first resource short, by name) for ``queue``.

    ``free`` (``QuotaTree.available``) is below 0 when the quota the queue draws on is
    overcommitted: a preemptor's quota is held beside its victims' until they leave
    (docs/scheduling-cycle.md, Preemption), or Ready capacity, a guarantee or a borrowing
    limit fell below what is in use. The sentence then says 0 available and how much would
    have to be freed before any is, rather than a negative amount."""
    text = vectors.describe
    over = ""
    if free < 0:
        over = (
            f"; {text(r, -free)} more would have to be freed before any is: the quota it draws "
            "on is overcommitted while preempted jobs leave, or since capacity or quota fell"
        )
    return QuotaMiss(
        Reason.WAITING_FOR_QUOTA,
        f"insufficient unused quota for {r} in queue {queue}: needs {text(r, need)}, "
        f"{text(r, max(free, 0))} available (guarantee {text(r, guarantee)}, in use "
        f"{text(r, used)}{over})",
        short,
    )
