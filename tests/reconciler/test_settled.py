"""Pending decisions a binding already carries are not planned again (reconciler.settled):
against the HTTPS sandbox with fleetgate's webhook and Karmada's controllers (test_loop's
fixtures), and as values."""

# ruff: noqa: F811 (test_loop's fixtures, imported, are parameters here)
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from engine.cycle.model import Decision
from engine.cycle.reasons import Action, Reason
from reconciler.apply import Outcome
from reconciler.settled import QUIET, Settled, writes_alike
from tests.reconciler.conftest import time_limit
from tests.reconciler.test_loop import (  # noqa: F401 (fixtures)
    Clock,
    caught_up,
    clock,
    custom,
    fleet_world,
    reconciler,
    submit,
)
from tests.reconciler.test_writers import JOBS, submitted

RB = ("work.karmada.io", "v1alpha2", "research", "resourcebindings")


@pytest.fixture(autouse=True)
def bounded() -> Iterator[None]:
    with time_limit(60):
        yield


def counted_applies(rec: Any) -> list[str]:
    calls: list[str] = []
    apply = rec.applier.apply

    def counting(decision: Decision, binding: Any, **options: Any) -> Outcome:
        calls.append(decision.binding)
        return apply(decision, binding, **options)

    rec.applier.apply = counting
    return calls


def test_a_pending_reason_already_written_is_not_planned_again(custom, fleet_world, reconciler):
    rec = reconciler
    refs = submitted(custom, fleet_world, rec)
    first = rec.run_once()
    assert first.applied == JOBS, first
    caught_up(rec, custom)
    calls = counted_applies(rec)
    second = rec.run_once()  # every binding says what its decision says: the Applier agrees
    decided = sorted(d.binding for d in rec.last_result.decisions)
    waiting = sorted(d.binding for d in rec.last_result.decisions if d.action == Action.PENDING)
    assert waiting and set(decided) <= set(refs), decided
    assert (second.unchanged, second.applied) == (len(decided), 0), second
    assert sorted(calls) == decided

    calls.clear()
    third = rec.run_once()  # the same decisions on the same versions: no plan for the pending
    assert (third.unchanged, third.applied) == (len(decided), 0), third
    assert sorted(calls) == sorted(set(decided) - set(waiting))

    # a new version of one waiting binding (someone labels it): that one is enforced again
    name = waiting[0].split("/")[1]
    custom.patch_namespaced_custom_object(*RB, name, {"metadata": {"labels": {"seen": "yes"}}})
    caught_up(rec, custom)
    calls.clear()
    fourth = rec.run_once()
    assert (fourth.unchanged, fourth.applied) == (len(decided), 0), fourth
    assert sorted(calls) == sorted(set(decided) - set(waiting[1:]))


@dataclass
class Answer:
    outcome: Outcome | None
    version: str


def pending(ref: str, position: int) -> Decision:
    return Decision(
        ref, f"PyTorchJob/{ref}", "q", "t", 0, Action.PENDING, Reason.WAITING_FOR_QUOTA, "m",
        position=position,
    )  # fmt: skip


def test_only_an_unchanged_pending_decision_on_the_same_version_is_skipped():
    settled = Settled()
    a, b, c = pending("ns/a", 1), pending("ns/b", 2), pending("ns/c", 3)
    versions = {"ns/a": "5", "ns/b": "7", "ns/c": "9"}
    answers = [Answer(Outcome.UNCHANGED, "5"), Answer(Outcome.APPLIED, "7"), Answer(None, "9")]
    settled.record([a, b, c], answers, "v1")
    assert settled.split([a, b, c], "v1", versions.get) == ([b, c], 1)
    # a moved in its queue, with a new live message: its binding says the same (the note
    # leaves both out), so it is still settled
    moved = pending("ns/a", 2)._replace(message="m, 3 GPUs in use now")
    assert settled.split([moved], "v1", versions.get) == ([], 1)
    # another reason, or a new binding version, or new policies: enforced again
    other = moved._replace(reason=Reason.NO_CLUSTER_FITS)
    assert settled.split([other], "v1", versions.get) == ([other], 0)
    settled.record([a], [Answer(Outcome.UNCHANGED, "5")], "v1")
    assert settled.split([a], "v1", {"ns/a": "6"}.get) == ([a], 0)
    settled.record([a], [Answer(Outcome.UNCHANGED, "5")], "v1")
    assert settled.split([a], "v2", versions.get) == ([a], 0)
    settled.record([a], [Answer(Outcome.UNCHANGED, "5")], "v1")
    assert settled.split([a], "v1", lambda _ref: None) == ([a], 0)  # dirty, or not cached
    # an Admit the Applier found written is always planned again (its plan reads the clock)
    admit = a._replace(action=Action.ADMIT, reason=Reason.ADMITTED)
    settled.record([admit], [Answer(Outcome.UNCHANGED, "5")], "v1")
    assert settled.split([admit], "v1", versions.get) == ([admit], 0)


def test_tracking_changes_looks_up_only_the_bindings_that_changed():
    settled = Settled(tracks=True)
    a, b = pending("ns/a", 1), pending("ns/b", 2)
    versions = {"ns/a": "5", "ns/b": "7"}
    asked: list[str] = []

    def version_of(ref: str) -> str | None:
        asked.append(ref)
        return versions.get(ref)

    settled.record([a, b], [Answer(Outcome.UNCHANGED, "5"), Answer(Outcome.UNCHANGED, "7")], "v1")
    assert settled.split([a, b], "v1", version_of) == ([], 2)
    assert sorted(asked) == ["ns/a", "ns/b"]  # the first split looks every binding up
    asked.clear()
    assert settled.split([a, b], "v1", version_of) == ([], 2)
    assert asked == []  # nothing changed since: no lookup
    versions["ns/b"] = "8"
    settled.changed(["ns/b"])
    assert settled.split([a, b], "v1", version_of) == ([b], 1)
    assert asked == ["ns/b"]
    asked.clear()
    settled.changed(None)  # a relist: any may have changed
    assert settled.split([a], "v1", version_of) == ([], 1)
    assert asked == ["ns/a"]
    # a decision that writes otherwise is enforced whatever the version
    rejected = a._replace(action=Action.REJECT, reason=Reason.NEVER_FITS)
    assert settled.split([rejected], "v1", version_of) == ([rejected], 0)


def test_without_tracking_every_split_looks_every_binding_up():
    settled = Settled()
    a = pending("ns/a", 1)
    settled.record([a], [Answer(Outcome.UNCHANGED, "5")], "v1")
    assert settled.split([a], "v1", {"ns/a": "5"}.get) == ([], 1)
    assert settled.split([a], "v1", {"ns/a": "6"}.get) == ([a], 0)


def rejected(ref: str) -> Decision:
    return Decision(
        ref, f"PyTorchJob/{ref}", "q", "t", 0, Action.REJECT, Reason.NEVER_FITS, "m"
    )  # fmt: skip


class Reference:
    """What ``Settled`` answers, as one loop over every decision (how it was first written):
    a decision is written already when the last split or record left an entry for its binding,
    under the same policy version, on the binding version looked up now (or, when tracking and
    the binding did not change, the one checked before), writing the same."""

    def __init__(self, tracks: bool) -> None:
        self.known: dict[str, tuple[str, Decision, str]] = {}
        self.tracks, self.every, self.changed = tracks, True, set[str]()

    def split(self, decisions, policy, version_of, dirty=()):  # type: ignore[no-untyped-def]
        self.changed |= set(dirty)
        known, self.known = self.known, {}
        every, changed = self.every or not self.tracks, self.changed
        self.every, self.changed = False, set()
        send = []
        for d in decisions:
            entry = known.get(d.binding)
            if (
                entry is not None
                and entry[2] == policy
                and ((not every and d.binding not in changed) or entry[0] == version_of(d.binding))
                and (entry[1] == d or writes_alike(entry[1], d))
            ):
                self.known[d.binding] = (entry[0], d, policy)
                continue
            send.append(d)
        return send, len(decisions) - len(send)

    def record(self, decisions, answers, policy):  # type: ignore[no-untyped-def]
        for d, a in zip(decisions, answers, strict=True):
            if a.outcome == Outcome.UNCHANGED and d.action in QUIET and a.version:
                self.known[d.binding] = (a.version, d, policy)


PASSES = st.lists(
    st.tuples(
        st.lists(st.integers(0, 11), max_size=8),  # decisions made anew (others kept)
        st.lists(st.integers(0, 7), max_size=3),  # bindings written since (a new version)
        st.integers(0, 6),  # 0: a relist, 1: a policy change, 2: a policy change back, 3: no
        # lease (nothing split, the answers recorded), 4: a change and no lease, else none
        st.lists(st.sampled_from([*Outcome, None]), min_size=8, max_size=8),  # answers
        st.sets(st.integers(0, 7), max_size=3),  # bindings not decided this pass (admitted)
    ),
    max_size=8,
)


@settings(max_examples=200, deadline=None)
@given(passes=PASSES, tracks=st.booleans())
@example(  # written under v1; a pass under v2 without the lease writes nothing; v1 again
    passes=[
        ([], [], 6, [Outcome.UNCHANGED] * 8, set()),
        ([], [], 4, [None] * 8, set()),
        ([], [], 2, [], set()),
    ],
    tracks=False,
)
def test_settled_answers_as_a_loop_over_every_decision(passes, tracks) -> None:  # type: ignore[no-untyped-def]
    """Passes as the reconciler runs them: a cycle that keeps most decision objects and makes
    some anew (equal, moved in their queue, or of another action), bindings written between
    passes, relists, policy changes; the Applier's answers recorded. ``Settled`` sends and
    keeps what the reference does, pass after pass."""
    settled, reference = Settled(tracks=tracks), Reference(tracks)
    refs = [f"ns/j{i}" for i in range(8)]
    versions = dict.fromkeys(refs, "1")
    decisions = [pending(ref, 1) for ref in refs]
    policy = "v1"
    for made, written, event, outcomes, absent in passes:
        for n in made:  # anew: equal (n < 8), moved (position), or rejected
            i = n % 8
            old = decisions[i]
            decisions[i] = (
                pending(old.binding, old.position)
                if n < 8
                else pending(old.binding, old.position + 1)
                if n < 10
                else rejected(old.binding)
            )
        for i in written:
            versions[refs[i]] = str(int(versions[refs[i]]) + 1)
            settled.changed([refs[i]])
            reference.changed.add(refs[i])
        if event == 0:
            settled.changed(None)
            reference.every = True
        later, earlier = f"v{int(policy[1:]) + 1}", f"v{max(int(policy[1:]) - 1, 1)}"
        policy = {1: later, 4: later, 2: earlier}.get(event, policy)
        if event in (3, 4):  # as a pass without the lease: every decision goes to the Applier
            got = (list(decisions), 0)
        else:
            now = [d for i, d in enumerate(decisions) if i not in absent]
            got = settled.split(now, policy, versions.get)
            want = reference.split(now, policy, versions.get)
            assert got == want
        answers = [Answer(o, versions[d.binding]) for d, o in zip(got[0], outcomes, strict=False)]
        settled.record(got[0][: len(answers)], answers, policy)
        reference.record(got[0][: len(answers)], answers, policy)
