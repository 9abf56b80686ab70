"""A real :class:`Reconciler` over a snapshot file, without an API server.

``SnapshotInformers`` stands in for :class:`reconciler.informers.Informers`: its "caches" hold
the snapshot file's objects (synced from the start), so ``run_once`` builds the very snapshot
``fleetgate dry-run --snapshot FILE`` builds. ``ScriptedApplier`` stands in for the Applier: it
answers ``Applied`` the first time a binding gets a given action and ``Unchanged`` afterwards,
as the real one does once the binding says what the decision says, and records every call.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from engine.cycle.model import Decision
from engine.fleet.files import read_objects
from engine.policy.policyset import PolicySet, load_policy_set
from reconciler.apply import Outcome
from reconciler.loop import Reconciler
from reconciler.resources import CLUSTER_RESOURCE_BINDINGS, RESOURCE_BINDINGS
from tests.conftest import REPO

SNAPSHOT = REPO / "examples" / "fleet-snapshot.yaml"
POLICIES = REPO / "policies"
NOW = dt.datetime(2025, 3, 10, 10, 0, tzinfo=dt.UTC)
NOW_TEXT = "2025-03-10T10:00:00Z"


class _Cache:
    def __init__(self, objects: Mapping[tuple[str, str], Mapping[str, Any]]) -> None:
        self.objects = objects

    def get(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        return self.objects.get((namespace, name))


class SnapshotInformers:
    def __init__(self, objects: Sequence[tuple[str, Mapping[str, Any]]]) -> None:
        self.objects = [  # a List's items, as the informers of the API server list them
            (source, item)
            for source, obj in objects
            for item in (obj.get("items") or [] if obj.get("kind") == "List" else [obj])
        ]
        self.synced = True
        caches: dict[str, dict[tuple[str, str], Mapping[str, Any]]] = {
            RESOURCE_BINDINGS.key: {},
            CLUSTER_RESOURCE_BINDINGS.key: {},
        }
        for _, obj in self.objects:
            meta = obj.get("metadata") or {}
            key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
            if obj.get("kind") == "ResourceBinding":
                caches[RESOURCE_BINDINGS.key][key] = obj
            elif obj.get("kind") == "ClusterResourceBinding":
                caches[CLUSTER_RESOURCE_BINDINGS.key][key] = obj
        self.caches = {k: _Cache(v) for k, v in caches.items()}

    def __getitem__(self, key: str) -> _Cache:
        return self.caches[key]

    def add_listener(self, _listener: object) -> None:
        pass

    def start(self) -> SnapshotInformers:
        return self

    def stop(self, _timeout: float = 5.0) -> None:
        pass

    def wait_synced(self, _timeout: float) -> bool:
        return self.synced

    def snapshot_objects(self) -> list[tuple[str, Mapping[str, Any]]]:
        return list(self.objects)


class ScriptedApplier:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, Outcome]] = []
        self.written: set[tuple[str, str]] = set()
        self.answer: Outcome | None = None  # set: every call answers this

    def apply(
        self, decision: Decision, binding: Mapping[str, Any], policy_version: str = "", **_: Any
    ) -> Outcome:
        return self._answer(decision.binding, str(decision.action))

    def transition(
        self, change: Any, binding: Mapping[str, Any], policy_version: str = ""
    ) -> Outcome:
        return self._answer(change.binding, type(change).__name__)

    def write_plan(
        self, member: Any, binding: Mapping[str, Any]
    ) -> tuple[Outcome, Mapping[str, Any]]:
        """Phase 1 of a group's binding (engine.enforce.groupphase), answered like the rest."""
        meta = binding.get("metadata") or {}
        ref = (
            f"{meta.get('namespace')}/{meta.get('name')}" if meta.get("namespace") else meta["name"]
        )
        return self._answer(ref, "GroupPlanned"), binding

    def _answer(self, ref: str, what: str) -> Outcome:
        if self.answer is not None:
            outcome = self.answer
        elif (ref, what) in self.written:
            outcome = Outcome.UNCHANGED
        else:
            outcome = Outcome.APPLIED
        if outcome == Outcome.APPLIED:
            self.written.add((ref, what))
        self.calls.append((ref, what, outcome))
        return outcome


class FixedPolicies:
    def __init__(self, policies: PolicySet) -> None:
        self.current = policies


def policies(path: Path = POLICIES) -> PolicySet:
    return load_policy_set([path])


def snapshot_objects(path: Path = SNAPSHOT) -> list[tuple[str, Mapping[str, Any]]]:
    objects, problems = read_objects([path])
    assert not problems, problems
    return objects


def reconciler(
    objects: Sequence[tuple[str, Mapping[str, Any]]] | None = None,
    policy_set: PolicySet | None = None,
) -> tuple[Reconciler, ScriptedApplier]:
    """A Reconciler (not started) over ``objects`` (default: the example snapshot)."""
    informers = SnapshotInformers(objects if objects is not None else snapshot_objects())
    rec = Reconciler(
        None,  # type: ignore[arg-type]  # no server: the Applier below never sends anything
        FixedPolicies(policy_set or policies()),
        clock=lambda: NOW,
        informers=informers,  # type: ignore[arg-type]
    )
    applier = ScriptedApplier()
    rec.applier = applier  # type: ignore[assignment]
    return rec, applier
