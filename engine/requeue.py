"""What happens to an admitted job that failed: the one rule the reconciler
(``engine.enforce.lifecycle``) and the simulator (``simulate.loop``) both apply.

``spec.requeue`` of the SchedulingPolicy (docs/scheduling-cycle.md, "Failure and requeue"):

* ``attempts`` counts admissions that ended in a failure; the failure that makes it
  ``maxAttempts`` gives the job up (it never runs again);
* otherwise the job waits ``min(backoffBase · 2^(attempts−1), backoffMax)`` before it may be
  admitted again;
* every cluster it failed on is excluded for ``backoffMax`` (an exclusion still running keeps
  the later end), so it tries elsewhere first and may come back once the exclusion ends;
  exclusions that have ended are dropped.

A preemption is not a failure: it requeues without counting an attempt or any backoff.
Pure: no clock, no I/O.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from engine.policy.model import Requeue


@dataclass(frozen=True, slots=True)
class AfterFailure:
    give_up: bool
    attempts: int  # including the failure just counted
    backoff: dt.timedelta  # zero when given up
    backoff_until: dt.datetime  # ``now + backoff``
    exclusions: dict[str, dt.datetime]  # cluster → excluded until


def backoff_for(attempts: int, rules: Requeue) -> dt.timedelta:
    """``min(backoffBase · 2^(attempts−1), backoffMax)``, ``attempts`` ≥ 1."""
    exponent = min(max(attempts - 1, 0), 62)
    return dt.timedelta(seconds=min(rules.backoff_base * 2**exponent, rules.backoff_max))


def after_failure(
    rules: Requeue,
    attempts: int,
    exclusions: Mapping[str, dt.datetime],
    clusters: Iterable[str],
    now: dt.datetime,
) -> AfterFailure:
    """The requeue (or give-up) of a job that had failed ``attempts`` times before and now
    failed on ``clusters``; ``exclusions`` are the ones it carries."""
    attempts += 1
    give_up = attempts >= rules.max_attempts
    backoff = dt.timedelta(0) if give_up else backoff_for(attempts, rules)
    excluded = {name: until for name, until in exclusions.items() if until > now}
    hold = now + dt.timedelta(seconds=rules.backoff_max)
    for name in clusters:
        excluded[name] = max(excluded.get(name, hold), hold)
    return AfterFailure(give_up, attempts, backoff, now + backoff, excluded)
