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
    """The waiting decisions found written, by binding (see the module docstring)."""

    def __init__(self, *, tracks: bool = False) -> None:
        # binding ref → (its version, the decision found written on it, the policy version)
        self._known: dict[str, tuple[str, Decision, str]] = {}
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
        or dirty; ``dirty``: those refs, always looked up). ``decisions`` name each binding
        once, as a cycle's do (``tests/cycle/test_properties.py`` holds the cycle to it).

        A pass after one change hands over thousands of the very decision objects of the last
        (``engine.cycle`` reruns keep them): those, under the same policy version on bindings
        that did not change, are passed over at the cost of a lookup. The entries stay the
        same objects, those of the bindings sent dropped and those found alike replaced; only
        when a binding is decided no more are the kept ones picked out into a new mapping."""
        self.changed(dirty)
        every = self._every or not self.tracks
        changed = self._changed
        self._every, self._changed = False, set()
        known = self._known
        get = known.get
        send: list[Decision] = []
        alike: list[Decision] = []  # found written (the very object too, after a look-up)
        for decision in decisions:
            ref = decision.binding
            entry = get(ref)
            if entry is None or entry[2] != policy_version:
                send.append(decision)
            elif entry[1] is decision and not every and ref not in changed:
                continue
            elif ((not every and ref not in changed) or entry[0] == version_of(ref)) and (
                entry[1] == decision or writes_alike(entry[1], decision)
            ):
                alike.append(decision)
            else:
                send.append(decision)
        # only the entries of this pass are kept: every entry is found again, or its binding
        # is sent (it changed); else (a binding decided no more) the kept ones are picked out.
        # Either way each entry found as the very decision stays the same object (10,000 new
        # ones a pass are work for the garbage collector)
        stale = [d.binding for d in send if d.binding in known]
        if len(decisions) - len(send) + len(stale) != len(known):
            sent = {d.binding for d in send}
            known = self._known = {
                d.binding: known[d.binding] for d in decisions if d.binding not in sent
            }
        for ref in stale:
            known.pop(ref, None)
        for decision in alike:
            ref = decision.binding
            known[ref] = (known[ref][0], decision, policy_version)
        return send, len(decisions) - len(send)

    def record(
        self,
        decisions: Sequence[Decision],
        answers: Sequence[Answer],
        policy_version: str,
    ) -> None:
        """The Applier's outcome, and the version it was given, for each of ``decisions``."""
        for decision, answer in zip(decisions, answers, strict=True):
            if answer.outcome == Outcome.UNCHANGED and decision.action in QUIET and answer.version:
                self._known[decision.binding] = (answer.version, decision, policy_version)

    def clear(self) -> None:
        self._known = {}
        self._every = True


_POSITION = Decision._fields.index("position")


def writes_alike(one: Decision, other: Decision) -> bool:
    """Whether the plans of two waiting decisions write the same on the same binding: the
    same action, ``pending_note`` and nominated cluster (what ``engine.enforce.plan`` compares
    with the binding; the rest only words the Event of a write). Two decisions that differ in
    their queue position alone (a job arrived ahead of a thousand others: each of them) are
    found alike without making either note."""
    if one[:_POSITION] == other[:_POSITION] and one[_POSITION + 1 :] == other[_POSITION + 1 :]:
        return one.action in QUIET
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
