"""What a policy change does: two cycles on one snapshot → the decisions and queues that differ.

Pure, like the cycle: ``diff_results(base, head)`` compares two ``CycleResult`` values (the same
snapshot and ``now`` under two policy sets) and returns a ``Diff``. ``fleetgate diff`` runs the
cycles and prints the Diff (``engine.diffreport``); nothing here reads files or git.

A decision is matched by its binding. A job with a decision on one side only is a victim
(``Preempt``) that the other side leaves running: its missing side is ``None``. Changes are
listed by queue, then job, so the same two results always give the same Diff.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from dataclasses import dataclass

from engine import vectors
from engine.cycle import CycleResult, Decision, QueueReport

# What a reviewer reads in a decision; a difference in any of them is a change. The cluster
# notes (why a cluster was not chosen) are part of the message's story, compared too.
DECISION_FIELDS = (
    "action",
    "reason",
    "clusters",
    "position",
    "queue",
    "tenant",
    "priority",
    "message",
    "victims",
    "preemptor",
    "cluster_reasons",
)
QUEUE_FIELDS = ("parent", "share", "usage", "guarantee", "max", "admitted", "pending")
SHARE_DIGITS = 6  # shares are compared as printed in the JSON contract


@dataclass(frozen=True, slots=True)
class DecisionChange:
    binding: str
    workload: str
    queue: str  # the head's queue, or the base's when the head has no decision
    before: Decision | None  # None: no decision under the base (the job ran on untouched)
    after: Decision | None
    fields: tuple[str, ...]  # the DECISION_FIELDS that differ, in that order

    @property
    def transition(self) -> str:
        """``Pending → Admit``, ``- → Preempt`` (no decision before), ``Pending → Pending``."""
        return f"{_action(self.before)} → {_action(self.after)}"


@dataclass(frozen=True, slots=True)
class QueueChange:
    name: str
    before: QueueReport | None  # None: the queue is defined on one side only
    after: QueueReport | None
    fields: tuple[str, ...]  # the QUEUE_FIELDS that differ


@dataclass(frozen=True, slots=True)
class Diff:
    base_version: str
    head_version: str
    now: dt.datetime
    decisions: tuple[DecisionChange, ...]
    queues: tuple[QueueChange, ...]
    compared: int  # jobs with a decision on either side

    @property
    def changed(self) -> bool:
        return bool(self.decisions or self.queues)

    def summary(self) -> str:
        """One line: how many decisions differ and how (counted by action pair), queues."""
        if not self.decisions:
            head = f"no decision changes ({self.compared} decisions compared)"
        else:
            pairs = Counter(c.transition for c in self.decisions)
            how = ", ".join(f"{n} {pair}" for pair, n in sorted(pairs.items(), key=_by_count))
            head = f"{len(self.decisions)} of {self.compared} decisions differ ({how})"
        queues = f"{len(self.queues)} queue(s) change" if self.queues else "no queue changes"
        return f"{head}; {queues}"


def diff_results(base: CycleResult, head: CycleResult) -> Diff:
    """Every decision and queue report that differs between ``base`` and ``head``."""
    before = {d.binding: d for d in base.decisions}
    after = {d.binding: d for d in head.decisions}
    changes = []
    for binding in before.keys() | after.keys():
        old, new = before.get(binding), after.get(binding)
        fields = _decision_fields(old, new)
        if fields:
            either = new or old
            assert either is not None
            changes.append(DecisionChange(binding, either.workload, either.queue, old, new, fields))
    changes.sort(key=lambda c: (c.queue, c.workload, c.binding))
    old_queues = {q.name: q for q in base.queues}
    new_queues = {q.name: q for q in head.queues}
    queues = []
    for name in sorted(old_queues.keys() | new_queues.keys()):
        old_q, new_q = old_queues.get(name), new_queues.get(name)
        fields = _queue_fields(old_q, new_q)
        if fields:
            queues.append(QueueChange(name, old_q, new_q, fields))
    return Diff(
        base_version=base.policy_version,
        head_version=head.policy_version,
        now=head.now,
        decisions=tuple(changes),
        queues=tuple(queues),
        compared=len(before.keys() | after.keys()),
    )


def vector_changes(
    before: vectors.Vec, after: vectors.Vec
) -> tuple[tuple[str, int | None, int | None], ...]:
    """(resource, before, after) for every resource whose amount differs, by name; None when
    the resource is absent on that side (for a max: no limit). ``pods`` is left out: it is
    counted for capacity, not a quota people set."""
    names = sorted((before.keys() | after.keys()) - {"pods"})
    return tuple((r, before.get(r), after.get(r)) for r in names if before.get(r) != after.get(r))


def _decision_fields(old: Decision | None, new: Decision | None) -> tuple[str, ...]:
    if old is None or new is None:
        return DECISION_FIELDS
    return tuple(f for f in DECISION_FIELDS if getattr(old, f) != getattr(new, f))


def _queue_fields(old: QueueReport | None, new: QueueReport | None) -> tuple[str, ...]:
    if old is None or new is None:
        return QUEUE_FIELDS
    changed = []
    for f in QUEUE_FIELDS:
        a, b = getattr(old, f), getattr(new, f)
        if f == "share":
            a, b = round(a, SHARE_DIGITS), round(b, SHARE_DIGITS)
        elif f in ("usage", "guarantee", "max"):
            a, b = bool(vector_changes(a, b)), False
        if a != b:
            changed.append(f)
    return tuple(changed)


def _action(decision: Decision | None) -> str:
    return "-" if decision is None else str(decision.action)


def _by_count(item: tuple[str, int]) -> tuple[int, str]:
    return -item[1], item[0]
