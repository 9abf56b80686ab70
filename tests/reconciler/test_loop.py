"""The reconciler loop end to end: the HTTPS sandbox, fleetgate's real webhook, Karmada's
controllers over examples/fleet.yaml, and the real ``kubernetes`` client.

Passes are deterministic: Karmada's controllers and the reconciler each run ``run_once`` on a
shared fake clock; only the informers (and the webhook) run on threads.
"""

from __future__ import annotations

import contextlib
import shutil
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import yaml

from engine import annotations as ann
from engine.cycle.explain import pending_note
from engine.fleet.bindings import job_outcome
from engine.members import Fleet, load_fleet
from engine.policy.policyset import PolicySet
from engine.policy.reload import PolicyHolder
from reconciler import loop
from reconciler.loop import Reconciler
from reconciler.settings import ReconcilerSettings
from sandbox.faults import Faults
from sandbox.karmada import KarmadaControllers
from sandbox.karmada.names import DURATION_ANNOTATION
from sandbox.server import Sandbox
from tests.conftest import REPO
from tests.reconciler.conftest import time_limit
from tests.sandbox.test_webhooks import fleetgate_webhook, pytorchjob, register
from tests.waiting import eventually, never

TEST_SECONDS = 60
NS = "research"
RB = ("work.karmada.io", "v1alpha2", NS, "resourcebindings")
KUBEFLOW = ("kubeflow.org", "v1", NS, "pytorchjobs")
SNAPSHOT = REPO / "examples" / "fleet-snapshot.yaml"


@pytest.fixture(autouse=True)
def bounded() -> Iterator[None]:
    with time_limit(TEST_SECONDS):
        yield


class Clock:
    def __init__(self) -> None:
        self.now = datetime.now(UTC).replace(microsecond=0)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> datetime:
        self.now += timedelta(seconds=seconds)
        return self.now


@pytest.fixture
def custom(api_client: kubernetes.client.ApiClient) -> kubernetes.client.CustomObjectsApi:
    return kubernetes.client.CustomObjectsApi(api_client)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def writes(sandbox: Sandbox) -> list[str]:
    """Every write request to a binding or an Event."""
    seen: list[str] = []

    def record(method: str, path: str, query: dict[str, str]) -> None:
        if method in ("PATCH", "PUT", "POST", "DELETE") and (
            "/resourcebindings" in path or "/events" in path
        ):
            seen.append(f"{method} {path}")

    sandbox.request_hooks.insert(0, record)
    return seen


@pytest.fixture
def fleet_world(
    sandbox: Sandbox, api_client: kubernetes.client.ApiClient, tmp_path: Path, clock: Clock
) -> Iterator[KarmadaControllers]:
    """The webhook registered, the research namespace, PriorityClasses and its policy, and
    Karmada's controllers over examples/fleet.yaml (one pass done: Clusters exist)."""
    with karmada_world(sandbox, api_client, tmp_path, clock) as karmada:
        yield karmada


@contextlib.contextmanager
def karmada_world(
    sandbox: Sandbox,
    api_client: kubernetes.client.ApiClient,
    tmp_path: Path,
    clock: Clock,
    faults: Faults | None = None,
) -> Iterator[KarmadaControllers]:
    """fleet_world's setup, its controllers reading ``faults`` when given."""
    with fleetgate_webhook(tmp_path / "tls") as served:
        register(api_client, *served)
        seed(api_client)
        fleet = Fleet(load_fleet(REPO / "examples" / "fleet.yaml"), clock())
        karmada = KarmadaControllers(sandbox.store, fleet, clock, faults=faults)
        try:
            karmada.run_once()
            yield karmada
        finally:
            karmada.stop()


@contextlib.contextmanager
def started_reconciler(
    api_client: kubernetes.client.ApiClient, clock: Clock
) -> Iterator[Reconciler]:
    """A Reconciler over policies/ on ``clock``, its informers synced, no pass thread."""
    holder = PolicyHolder.for_paths([REPO / "policies"])
    assert holder.reload(), holder.status.errors
    rec = Reconciler(api_client, holder, ReconcilerSettings(request_timeout=10), clock=clock)
    try:
        rec.start(loop=False)
        assert rec.wait_synced(15)
        yield rec
    finally:
        rec.stop()


@pytest.fixture
def reconciler(api_client: kubernetes.client.ApiClient, clock: Clock) -> Iterator[Reconciler]:
    with started_reconciler(api_client, clock) as rec:
        yield rec


def seed(api_client: kubernetes.client.ApiClient) -> None:
    core = kubernetes.client.CoreV1Api(api_client)
    core.create_namespace({"metadata": {"name": NS}})
    scheduling = kubernetes.client.SchedulingV1Api(api_client)
    custom = kubernetes.client.CustomObjectsApi(api_client)
    for item in _snapshot_items():
        meta = item["metadata"]
        clean = {k: v for k, v in meta.items() if k in ("name", "namespace", "labels")}
        if item["kind"] == "PriorityClass" and not meta["name"].startswith("system-"):
            scheduling.create_priority_class({**item, "metadata": clean})
        elif item["kind"] == "PropagationPolicy" and meta["name"] == "research-jobs":
            body = {"apiVersion": item["apiVersion"], "kind": item["kind"]}
            body |= {"metadata": {**clean, "namespace": NS}, "spec": item["spec"]}
            custom.create_namespaced_custom_object(
                "policy.karmada.io", "v1alpha1", NS, "propagationpolicies", body
            )


def _snapshot_items() -> Iterator[dict[str, Any]]:
    for document in yaml.safe_load_all(SNAPSHOT.read_text()):
        if document:
            yield from document.get("items", [document])


def submit(custom: kubernetes.client.CustomObjectsApi, name: str, workers: int) -> None:
    job = pytorchjob(workers)
    job["metadata"]["name"] = name
    job["metadata"]["annotations"] = {DURATION_ANNOTATION: "5m"}
    custom.create_namespaced_custom_object(*KUBEFLOW, job)


def binding(custom: kubernetes.client.CustomObjectsApi, job: str) -> dict[str, Any]:
    return dict(custom.get_namespaced_custom_object(*RB, f"{job}-pytorchjob"))


def caught_up(rec: Reconciler, custom: kubernetes.client.CustomObjectsApi) -> None:
    """Wait until the reconciler's caches of bindings, of PyTorchJobs (their templates) and of
    Clusters (whose status Karmada's controllers may just have written) hold what the server
    holds: the watches are apart, so any of them may lag."""

    def same(served: list[dict[str, Any]], informer: str) -> bool:
        cached = rec.informers[informer]
        return all(
            (cached.get(o["metadata"].get("namespace", ""), o["metadata"]["name"]) or {})
            .get("metadata", {})
            .get("resourceVersion")
            == o["metadata"]["resourceVersion"]
            for o in served
        )

    eventually(
        lambda: (
            same(
                custom.list_namespaced_custom_object(*RB)["items"],
                "resourcebindings.work.karmada.io",
            )
            and same(
                custom.list_namespaced_custom_object(*KUBEFLOW)["items"], "pytorchjobs.kubeflow.org"
            )
            and same(
                custom.list_cluster_custom_object("cluster.karmada.io", "v1alpha1", "clusters")[
                    "items"
                ],
                "clusters.cluster.karmada.io",
            )
        )
    )


def conditions(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in (obj.get("status") or {}).get("conditions") or []}


def test_admit_run_to_success_and_a_waiting_job(
    custom, fleet_world: KarmadaControllers, reconciler: Reconciler, clock: Clock, writes
):
    karmada = fleet_world
    submit(custom, "first", workers=2)  # 24 GPUs
    karmada.run_once()
    held = binding(custom, "first")
    assert held["spec"]["suspension"]["scheduling"] is True
    assert held["metadata"]["labels"][ann.MANAGED] == "true"
    assert not held["spec"].get("clusters")

    caught_up(reconciler, custom)
    summary = reconciler.run_once()
    assert (summary.applied, summary.conflicts, summary.errors) == (1, 0, 0), summary
    bound = binding(custom, "first")
    (target,) = bound["spec"]["clusters"]
    scheduled = conditions(bound)["Scheduled"]
    assert (scheduled["status"], scheduled["reason"]) == ("True", "FleetgateAdmitted")
    assert bound["metadata"]["annotations"][ann.ADMITTED_TO] == target["name"]

    # a second job of 32 GPUs does not fit beside the first (8 GPUs left): it waits, its
    # reason on its binding
    submit(custom, "second", workers=3)
    karmada.run_once()  # the binding controller makes the first's Work; the member runs it
    caught_up(reconciler, custom)
    summary = reconciler.run_once()
    assert summary.errors == 0, summary
    waiting = binding(custom, "second")
    assert not waiting["spec"].get("clusters")
    decided = reconciler.last_result.decision("research/second-pytorchjob")
    assert decided is not None and decided.action == "Pending"
    notes = waiting["metadata"]["annotations"]
    assert notes[ann.PENDING] == pending_note(decided)  # the reason, no live numbers
    assert decided.position == 1 and ann.QUEUE_POSITION not in notes  # the place is the API's

    # level-triggered: a pass over the same state writes nothing
    caught_up(reconciler, custom)
    writes.clear()
    summary = reconciler.run_once()
    assert summary.applied == 0 and writes == [], (summary, writes)

    running = binding(custom, "first")["status"]["aggregatedStatus"]
    assert [(i["clusterName"], i["applied"]) for i in running] == [(target["name"], True)]
    karmada.run_once(clock.advance(5 * 60))
    done = binding(custom, "first")["status"]["aggregatedStatus"][0]["status"]
    assert job_outcome(done) == "Succeeded"
    karmada.run_once(clock.advance(10))  # the next Cluster status shows its GPUs free

    # the first's quota is released: the second is admitted on the next pass
    caught_up(reconciler, custom)
    summary = reconciler.run_once()
    assert summary.applied == 1, summary
    assert binding(custom, "second")["spec"]["clusters"]
    assert ann.PENDING not in binding(custom, "second")["metadata"]["annotations"]


def test_waiting_bindings_are_not_rewritten_when_their_queue_moves(
    custom, fleet_world: KarmadaControllers, reconciler: Reconciler, clock: Clock, writes
):
    # catches: live usage numbers, queue positions or the head's name in what a waiting
    # binding carries, which rewrote every waiting job of a queue each time the queue moved
    # (issue 29, item 5)
    karmada = fleet_world
    submit(custom, "first", workers=2)  # 24 GPUs, admitted
    karmada.run_once()
    caught_up(reconciler, custom)
    assert reconciler.run_once().applied == 1
    waiting = ("w1", "w2", "w3")
    for name in waiting:
        submit(custom, name, workers=3)  # 32 GPUs each: research-training's max is 48
    karmada.run_once()
    caught_up(reconciler, custom)
    assert reconciler.run_once().errors == 0

    def order() -> list[str]:
        found = {n: reconciler.last_result.decision(f"{NS}/{n}-pytorchjob") for n in waiting}
        return sorted(
            (n for n, d in found.items() if d and d.position), key=lambda n: found[n].position
        )

    head, second, third = order()
    said = {n: binding(custom, n)["metadata"]["annotations"][ann.PENDING] for n in waiting}
    assert said[second] == said[third]  # both blocked behind the head, no name, no place
    karmada.run_once(clock.advance(5 * 60))  # the first succeeds
    karmada.run_once(clock.advance(10))
    caught_up(reconciler, custom)
    writes.clear()
    assert reconciler.run_once().errors == 0
    assert [n for n in waiting if binding(custom, n)["spec"].get("clusters")] == [head]
    assert order() == [second, third]  # each moved up one place; the queue's usage changed
    # the new head's reason changed (it now waits for quota); the third's did not
    assert binding(custom, second)["metadata"]["annotations"][ann.PENDING] != said[second]
    assert binding(custom, third)["metadata"]["annotations"][ann.PENDING] == said[third]
    touched = {w.split("/resourcebindings/")[1] for w in writes if "/resourcebindings/" in w}
    assert f"{third}-pytorchjob" not in {t.split("/")[0] for t in touched}, writes


def test_a_conflict_marks_dirty_and_the_next_pass_admits(
    sandbox: Sandbox, custom, fleet_world: KarmadaControllers, reconciler: Reconciler
):
    faults = Faults(seed=1).attach(sandbox)
    submit(custom, "first", workers=2)
    fleet_world.run_once()
    caught_up(reconciler, custom)
    faults.fail_requests(409, method="PATCH", path="/resourcebindings/first-pytorchjob$", count=1)
    summary = reconciler.run_once()
    assert (summary.applied, summary.conflicts) == (0, 1), summary
    assert "research/first-pytorchjob" in reconciler.dirty
    assert not binding(custom, "first")["spec"].get("clusters")

    summary = reconciler.run_once()  # nothing changed since: a fresh read says so; admit
    assert (summary.applied, summary.conflicts) == (1, 0), summary
    assert not reconciler.dirty
    assert binding(custom, "first")["spec"]["clusters"]


def test_a_dirty_binding_waits_for_the_watch_to_bring_its_new_version(
    sandbox: Sandbox, custom, fleet_world: KarmadaControllers, reconciler: Reconciler
):
    submit(custom, "first", workers=2)
    fleet_world.run_once()
    caught_up(reconciler, custom)
    current = binding(custom, "first")
    reconciler.dirty["research/first-pytorchjob"] = current["metadata"]["resourceVersion"]
    # someone else touches the binding; until the watch brings it, a pass skips it
    custom.patch_namespaced_custom_object(
        *RB, "first-pytorchjob", {"metadata": {"labels": {"touched": "yes"}}}
    )
    caught_up(reconciler, custom)
    summary = reconciler.run_once()
    assert (summary.applied, summary.skipped) == (1, 0), summary
    assert not reconciler.dirty


def test_the_thread_admits_on_events(
    custom, fleet_world: KarmadaControllers, api_client, clock: Clock
):
    holder = PolicyHolder.for_paths([REPO / "policies"])
    assert holder.reload()
    rec = Reconciler(api_client, holder, ReconcilerSettings(debounce=0.05, resync=5.0), clock=clock)
    try:
        rec.start()
        assert rec.wait_synced(15)
        submit(custom, "first", workers=2)
        fleet_world.run_once()
        eventually(lambda: bool(binding(custom, "first")["spec"].get("clusters")))
        eventually(lambda: rec.last is not None and rec.last.applied == 0)
    finally:
        rec.stop()


def test_no_pass_runs_before_every_informer_has_listed(
    sandbox: Sandbox,
    api_client: kubernetes.client.ApiClient,
    fleet_world: KarmadaControllers,
    clock: Clock,
):
    listing, release = threading.Event(), threading.Event()

    def hold_the_priority_class_list(method: str, path: str, query: dict[str, str]) -> None:
        if method == "GET" and path.endswith("/priorityclasses") and query.get("watch") != "true":
            listing.set()
            release.wait(TEST_SECONDS)  # served once the test lets it go

    sandbox.request_hooks.insert(0, hold_the_priority_class_list)
    holder = PolicyHolder.for_paths([REPO / "policies"])
    assert holder.reload(), holder.status.errors
    rec = Reconciler(
        api_client, holder, ReconcilerSettings(request_timeout=30, debounce=0.05), clock=clock
    )
    try:
        rec.start()
        assert listing.wait(TEST_SECONDS)
        others = [i for key, i in rec.informers.informers.items() if "priorityclasses" not in key]
        eventually(lambda: all(i.synced.is_set() for i in others), what="the other lists")
        rec.wake()  # an event: a loop that did not wait for every list would pass now
        never(lambda: rec.passes > 0, what="a pass before the PriorityClasses are listed")
        assert not rec.wait_synced(0)
        release.set()
        assert rec.wait_synced(TEST_SECONDS)
        eventually(lambda: rec.passes > 0, what="the first pass")
    finally:
        release.set()
        rec.stop()


class CountedLooks:
    """A PolicyHolder whose ``current`` (read once at the start of each pass) is counted."""

    def __init__(self, holder: PolicyHolder) -> None:
        self.holder = holder
        self.looks = 0

    @property
    def current(self) -> PolicySet:
        self.looks += 1
        return self.holder.current


def test_with_no_policy_set_the_loop_keeps_looking_and_passes_once_one_loads(
    fleet_world: KarmadaControllers,
    api_client: kubernetes.client.ApiClient,
    clock: Clock,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
):
    monkeypatch.setattr(loop, "NO_POLICIES_RETRY", 0.05)
    policies = tmp_path / "policies"
    shutil.copytree(REPO / "policies", policies)
    queues = policies / "queues.yaml"
    good = queues.read_text()
    queues.write_text(good.replace("weight: ", "weight: heavy # ", 1))
    holder = PolicyHolder.for_paths([policies])
    assert not holder.reload()
    counted = CountedLooks(holder)
    # a resync far beyond the test's bound: with no event, only the loop's own looks for a
    # policy set (every NO_POLICIES_RETRY) can start a pass
    settings = ReconcilerSettings(request_timeout=30, debounce=0.05, resync=3600)
    rec = Reconciler(api_client, counted, settings, clock=clock)  # type: ignore[arg-type]
    try:
        rec.start()
        eventually(lambda: counted.looks >= 10, what="ten looks for a policy set")
        assert rec.passes == 0
        queues.write_text(good)
        assert holder.reload(), holder.status.errors  # nothing wakes the loop
        eventually(lambda: rec.passes > 0, what="a pass once the policies loaded")
    finally:
        rec.stop()
