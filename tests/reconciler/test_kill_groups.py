"""The kill test's check of co-admission groups (tests/reconciler/killjobs.py), on histories
made up for it: a rollback and a rebind are allowed, nothing else is."""

from __future__ import annotations

from typing import Any

from engine.cycle.reasons import Reason
from sandbox.writelog import Write
from tests.reconciler.killjobs import NS, RECONCILER, Group, Move, group_violations

RB_KEY = "resourcebindings.work.karmada.io"


def test_the_group_check_allows_a_rollback_and_a_rebind_and_nothing_else():
    group = Group("g", ("a", "b"), 2, False)
    members = {"a": group, "b": group}
    waits = f"{Reason.WAITING_FOR_GROUP}: group {group.label}: 1 of at least 2 members placed"
    writers: dict[str, Any] = {}

    def move(name: str, was: bool, now: bool, user: str = RECONCILER + "r", why: str = "") -> Move:
        version = str(len(writers) + 1)
        writers[version] = Write(0, 0.0, user, "patch", "", RB_KEY, NS, name, version, "")
        return Move(name, was, now, version, why or None)

    def check(*moves: Move) -> tuple[list[str], dict[str, int]]:
        return group_violations(list(moves), members, writers)

    bind_a, bind_b = move("a", False, True), move("b", False, True)
    assert check(bind_a, bind_b) == ([], {})
    rolled = move("a", True, False, why=waits)
    assert check(bind_a, rolled, move("a", False, True), bind_b) == ([], {"a": 1})
    # anything else: taken off by someone else, or without saying it waits for its group
    (found,), _ = check(bind_a, move("a", True, False, user="sandbox:in-process", why=waits))
    assert found.startswith("a unbound by other than a rollback")
    (found,), _ = check(bind_a, move("a", True, False, why="Backoff: requeued"))
    assert found.startswith("a unbound by other than a rollback")
    (found,), _ = check(bind_a, bind_b, move("a", True, False, why=waits))
    assert found.startswith("a rolled back with its group at its min")
    (found,), _ = check(bind_a, move("a", True, True), bind_b)
    assert found.startswith("a: its clusters rewritten")
    assert check(bind_a) == (["a left bound with group g below its min"], {})
