"""The sandbox's detector with several workers, as Karmada's --concurrent-resource-template-syncs:
the same bindings as one worker, and one template's error fails the pass only after every other
template was reconciled."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

import pytest

from engine.members import ClusterSpec, Fleet, FleetSpec, NodeGroup
from engine.workloads.registry import known_kinds
from sandbox.karmada import KarmadaControllers
from sandbox.store import Store
from tests.sandbox.builders import pytorchjob
from tests.sandbox.test_karmada_units import GPU_NODE, PP, RB, pp

T0 = datetime(2026, 1, 1, tzinfo=UTC)
JOBS = 24


def controllers(workers: int) -> KarmadaControllers:
    cluster = ClusterSpec("a", kinds=tuple(known_kinds()), nodes=(NodeGroup.of(4, GPU_NODE),))
    made = KarmadaControllers(
        Store(), Fleet(FleetSpec((cluster,)), T0), lambda: T0, template_syncs=workers
    )
    made.run_once()
    made.store.create(PP, pp("PyTorchJob", "kubeflow.org/v1"))
    for i in range(JOBS):
        made.store.create("pytorchjobs.kubeflow.org", pytorchjob(f"train-{i:02d}"))
    return made


def bindings(store: Store) -> dict[str, dict]:
    return {rb["metadata"]["name"]: rb["spec"]["resource"] for rb in store.list(RB)["items"]}


def test_five_workers_make_the_bindings_one_worker_makes():
    serial, parallel = controllers(1), controllers(5)
    serial.run_once()
    parallel.run_once()
    assert len(bindings(parallel.store)) == JOBS
    assert bindings(parallel.store).keys() == bindings(serial.store).keys()


def test_workers_overlap_and_an_error_fails_the_pass_after_the_others():
    karmada = controllers(5)
    seen: list[str] = []
    at_once = {"now": 0, "most": 0}
    lock = threading.Lock()
    reconcile = karmada.detector.reconcile

    def slow(rt, template, policies, classes):
        name = template["metadata"]["name"]
        with lock:
            at_once["now"] += 1
            at_once["most"] = max(at_once["most"], at_once["now"])
        try:
            threading.Event().wait(0.02)
            if name == "train-03":
                raise RuntimeError("boom")
            with lock:
                seen.append(name)
            return reconcile(rt, template, policies, classes)
        finally:
            with lock:
                at_once["now"] -= 1

    karmada.detector.reconcile = slow  # type: ignore[method-assign]
    with pytest.raises(RuntimeError, match="boom"):
        karmada.run_once()
    assert len(seen) == JOBS - 1  # every other template was reconciled
    assert 1 < at_once["most"] <= 5
    assert len(bindings(karmada.store)) == JOBS - 1


def test_the_worker_count_is_checked():
    with pytest.raises(ValueError, match="at least 1"):
        controllers(0)
