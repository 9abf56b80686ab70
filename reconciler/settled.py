"""Pending and Reject decisions a binding already carries, remembered between passes.

Each pass decides again every job still waiting, and most decisions are what their binding
already says: the Applier plans, finds nothing to write and answers UNCHANGED, for thousands of
bindings every pass. ``Settled`` remembers, per binding, the resourceVersion, decision and
policy version of the last such answer; a decision that writes the same on the same version is
UNCHANGED again, so no plan is made. ``engine.enforce.plan`` writes a waiting job's
``pending_note`` and nominated cluster only when they differ from the binding's, and reads
nothing else (no clock): a decision that differs only in what the note leaves out (its live
message, its queue position) writes the same. Any other decision, or a new version of the
binding, goes to the Applier as before. Only the entries of the latest pass are kept.

With ``tracks`` (the reconciler's informers tell it each binding they changed: ``changed``),
the version of a binding is looked up only when it changed since the last ``split``; the others
still hold the version their entry was checked against, so a pass after one change does not
look up every waiting binding again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

from engine.cycle import Action, Decision, Reason, pending_note
from reconciler.apply import Outcome


class Answer(Protocol):
    """A write's end (``reconciler.loop``): its outcome, and the binding version written on."""

    @property
    def outcome(self) -> Outcome | None: ...

    @property
    def version(self) -> str: ...


QUIET = frozenset({Action.PENDING, Action.REJECT})  # their plan reads no clock


class Settled:
    def __init__(self, *, tracks: bool = False) -> None:
        self._decided: dict[str, Decision] = {}  # binding ref → the decision found written
        self._versions: dict[str, str] = {}  # … and the binding version it was found on
        self._policy = ""  # the policy version of every entry
        self.tracks = tracks
        self._every = True  # every binding's version is looked up at the next split
        self._changed: set[str] = set()  # bindings whose version is looked up then

    def changed(self, refs: Iterable[str] | None) -> None:
        """The bindings ``refs`` changed (None: any may have, e.g. after a relist) since the
        last ``split``: their versions are looked up at the next."""
        if refs is None:
            self._every = True
        else:
            self._changed.update(refs)

    def split(
        self,
        decisions: Sequence[Decision],
        policy_version: str,
        version_of: Callable[[str], str | None],
        dirty: Iterable[str] = (),
    ) -> tuple[list[Decision], int]:
        """(the decisions to enforce, how many others are already written). ``version_of``:
        the cached binding's resourceVersion, None when it must be enforced anyway (absent,
        or dirty; ``dirty``: those refs, always looked up).

        A pass after one change hands over thousands of the very decision objects of the last
        (``engine.cycle`` reruns keep them): those, on bindings that did not change, are passed
        over at the cost of a lookup, and the entries stay as they are."""
        self.changed(dirty)
        every = self._every or not self.tracks
        changed = self._changed
        self._every, self._changed = False, set()
        if self._policy != policy_version:
            decided, versions = {}, {}
        else:
            decided, versions = self._decided, self._versions
        get = decided.get
        send: list[Decision] = []
        alike: list[Decision] = []  # written, but not as the very object of the last split
        for decision in decisions:
            ref = decision.binding
            old = get(ref)
            if old is None:
                send.append(decision)
            elif old is decision and not every and ref not in changed:
                continue
            elif ((not every and ref not in changed) or versions[ref] == version_of(ref)) and (
                old == decision or writes_alike(old, decision)
            ):
                alike.append(decision)
            else:
                send.append(decision)
        if decided is self._decided and len(decisions) - len(send) == len(decided):
            # every entry found again (bindings are unique): the same entries, a few replaced
            for decision in alike:
                decided[decision.binding] = decision
        else:
            sent = {d.binding for d in send}
            self._decided = {d.binding: d for d in decisions if d.binding not in sent}
            self._versions = {ref: versions[ref] for ref in self._decided}
        self._policy = policy_version
        return send, len(decisions) - len(send)

    def record(
        self,
        decisions: Sequence[Decision],
        answers: Sequence[Answer],
        policy_version: str,
    ) -> None:
        """The Applier's outcome, and the version it was given, for each of ``decisions``."""
        if policy_version != self._policy:
            self._decided, self._versions, self._policy = {}, {}, policy_version
        for decision, answer in zip(decisions, answers, strict=True):
            if answer.outcome == Outcome.UNCHANGED and decision.action in QUIET and answer.version:
                self._decided[decision.binding] = decision
                self._versions[decision.binding] = answer.version

    def clear(self) -> None:
        self._decided, self._versions = {}, {}
        self._every = True


def writes_alike(one: Decision, other: Decision) -> bool:
    """Whether the plans of two waiting decisions write the same on the same binding: the
    same action, ``pending_note`` and nominated cluster (what ``engine.enforce.plan`` compares
    with the binding; the rest only words the Event of a write)."""
    return (
        one.action == other.action
        and one.action in QUIET
        and _nominated(one) == _nominated(other)
        and pending_note(one) == pending_note(other)
    )


def _nominated(decision: Decision) -> str | None:
    if decision.reason == Reason.PREEMPTING and decision.clusters:
        return decision.clusters[0].name
    return None
