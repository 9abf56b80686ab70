"""What one reconciler pass did (:class:`PassSummary`, read by observers: metrics, the read
API) and the shapes of its writes on the writer threads."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from engine.enforce import Confirm, Reclaim, Started
from reconciler.apply import Outcome


@dataclass(slots=True)
class PassSummary:
    """What one pass did: counts per outcome, and how long it took."""

    policy_version: str = ""
    decisions: int = 0
    applied: int = 0
    unchanged: int = 0
    conflicts: int = 0
    gone: int = 0
    skipped: int = 0  # no cached binding, not managed, or dirty and still stale
    errors: int = 0
    requeued: int = 0  # of ``applied``: jobs reclaimed and requeued (engine.enforce.lifecycle)
    gave_up: int = 0  # of ``applied``: jobs given up after requeue.maxAttempts
    seconds: float = 0.0
    # (binding ref, what) of each write that went through: a decision's action (Admit,
    # Preempt, …) or a lifecycle step; observers count transitions from it, once each
    applied_to: list[tuple[str, str]] = field(default_factory=list)
    # (cluster, result) → calls to the members' scheduler estimators before the cycle
    # (reconciler.estimator: ok, timeout, error, unavailable); empty when none is asked
    estimator_requests: dict[tuple[str, str], int] = field(default_factory=dict)

    @property
    def writes(self) -> int:
        return self.applied

    def count(self, attempt: Attempt) -> Outcome | None:
        """Count one write's end; its outcome (None: skipped, or failed)."""
        if attempt.outcome is None:
            if attempt.failed:
                self.errors += 1
            else:
                self.skipped += 1  # no cached binding, not managed, stale, or not leader
        elif attempt.outcome == Outcome.APPLIED:
            self.applied += 1
            self.applied_to.append((attempt.ref, attempt.what))
        elif attempt.outcome == Outcome.UNCHANGED:
            self.unchanged += 1
        elif attempt.outcome == Outcome.CONFLICT:
            self.conflicts += 1
        else:
            self.gone += 1
        return attempt.outcome


# (binding ref, what is written: an action or a lifecycle step, the write on the cached binding)
Write = tuple[str, str, Callable[[Mapping[str, Any]], Outcome]]


@dataclass(frozen=True, slots=True)
class Attempt:
    """One write's end, from a writer thread; ``outcome`` None: skipped or ``failed``."""

    ref: str
    what: str
    outcome: Outcome | None
    version: str  # the resourceVersion written on (dirty on CONFLICT/GONE)
    failed: bool = False


def what_of(change: Started | Reclaim | Confirm) -> str:
    """What ``PassSummary.applied_to`` records for a lifecycle write."""
    if isinstance(change, Reclaim):
        return str(change.trigger)
    return "Confirmed" if isinstance(change, Confirm) else "Started"
