"""A reconciler pass reads a snapshot kept up to date from its informers' changes
(reconciler.kept): after any sequence of lists, watch events, deletes and relists, the pass's
snapshot equals a rebuild from the caches, and its decisions equal a full cycle's on that
rebuild. The informers are the real ones, their caches filled through the methods a list and a
watch call (no API server)."""

from __future__ import annotations

import copy
import datetime as dt
import random
from typing import Any

import kubernetes
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.cycle import CycleResult, Decision, run_cycle
from engine.fleet.snapshot import build_snapshot
from engine.policy.model import Strategy
from reconciler.adopt import ref_of
from reconciler.apply import Outcome
from reconciler.informer import Informer, key_of
from reconciler.informers import Informers
from reconciler.loop import Reconciler
from tests.fleet.builders import binding_for, custom_job, pytorch_job
from tests.reconciler.snapshot_world import (
    NOW,
    FixedPolicies,
    ScriptedApplier,
    policies,
    snapshot_objects,
)

POLICIES = policies()


def example_objects() -> list[dict[str, Any]]:
    """examples/fleet-snapshot.yaml's objects, its Lists unpacked, as informers list them."""
    return [
        item
        for _, obj in snapshot_objects()
        for item in (obj.get("items") or [] if obj.get("kind") == "List" else [obj])
    ]


class Feed:
    """The real informers, told what an API server would send them."""

    def __init__(self) -> None:
        self.informers = Informers(kubernetes.client.ApiClient(), seed=1)
        self.version = 0

    def informer_of(self, obj: dict[str, Any]) -> Informer | None:
        return self.informers.for_object(obj)

    def stamp(self, obj: dict[str, Any]) -> dict[str, Any]:
        self.version += 1
        obj["metadata"]["resourceVersion"] = str(self.version)
        return obj

    def list_all(self, objects: list[dict[str, Any]]) -> None:
        lists: dict[str, dict[Any, Any]] = {key: {} for key in self.informers.informers}
        for obj in objects:
            informer = self.informer_of(obj)
            if informer is not None:
                lists[informer.resource.key][key_of(obj)] = self.stamp(copy.deepcopy(obj))
        for key, items in lists.items():
            self.informers[key]._replace(items, str(self.version))

    def event(self, kind: str, obj: dict[str, Any]) -> None:
        informer = self.informer_of(obj)
        assert informer is not None
        informer._handle({"type": kind, "object": self.stamp(obj)})

    def relist(self, key: str, rng: random.Random) -> None:
        """A relist after 410 Gone: some objects gone, some changed, the rest the same."""
        informer = self.informers[key]
        items = {}
        for name, obj in sorted(informer.snapshot_items().items()):
            roll = rng.random()
            if roll < 0.3:
                continue
            copied = copy.deepcopy(dict(obj))
            if roll < 0.5:
                copied["metadata"].setdefault("labels", {})["relisted"] = "yes"
                self.stamp(copied)
            items[name] = copied
        informer._replace(items, str(self.version))

    def objects(self, key: str) -> list[dict[str, Any]]:
        return [
            copy.deepcopy(dict(o)) for _, o in sorted(self.informers[key].snapshot_items().items())
        ]


RB = "resourcebindings.work.karmada.io"
JOBS = "pytorchjobs.kubeflow.org"


def reconciler_on(feed: Feed) -> Reconciler:
    """A reconciler over ``feed``'s informers at ``NOW``, whose ScriptedApplier sends nothing."""
    rec = Reconciler(
        None,  # type: ignore[arg-type]
        FixedPolicies(POLICIES),
        clock=lambda: NOW,
        informers=feed.informers,
    )
    rec.applier = ScriptedApplier()  # type: ignore[assignment]
    return rec


def step(feed: Feed, op: tuple[int, int, int], rng: random.Random) -> None:
    what, index, variant = op
    name = f"extra-{index}"
    job = pytorch_job(name, workers=1 + variant % 3, queue="research-training")
    if what == 0:  # a new or changed template
        if variant == 3:
            job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = "two"
        feed.event("MODIFIED", job)
    elif what == 1:  # its binding, perhaps before its template
        feed.event("ADDED", binding_for(job, clusters=["gpu-east"] if variant == 1 else ()))
    elif what == 2:  # a binding of a template no reader reads
        run = custom_job(name)
        feed.event("ADDED", binding_for(run, replicas=1 + variant, requests={"cpu": "2"}))
    elif what == 3:  # something deleted
        key = (RB, JOBS, "clusters.cluster.karmada.io")[variant % 3]
        present = feed.objects(key)
        if present:
            feed.event("DELETED", rng.choice(present))
    elif what == 4:  # another controller's label on an existing binding
        present = feed.objects(RB)
        if present:
            chosen = rng.choice(present)
            chosen["metadata"].setdefault("labels", {})["touched"] = str(variant)
            feed.event("MODIFIED", chosen)
    elif what == 5:
        feed.relist((RB, JOBS)[variant % 2], rng)
    else:  # a field no reader reads: a new resourceVersion, nothing a pass reads changed
        present = feed.objects((RB, JOBS)[variant % 2])
        if present:
            chosen = rng.choice(present)
            chosen["metadata"]["managedFields"] = [{"manager": f"m{variant}"}]
            feed.event("MODIFIED", chosen)


@settings(max_examples=12, deadline=None)
@given(
    ops=st.lists(
        st.tuples(st.integers(0, 6), st.integers(0, 3), st.integers(0, 3)),
        min_size=1,
        max_size=12,
    ),
    seed=st.integers(0, 2**16),
)
def test_each_pass_reads_what_a_rebuild_reads_and_decides_the_same(
    ops: list[tuple[int, int, int]], seed: int
) -> None:
    feed, rng = Feed(), random.Random(seed)
    feed.list_all(example_objects())
    rec = reconciler_on(feed)
    for n, op in enumerate(ops):
        step(feed, op, rng)
        if n % 2 and n != len(ops) - 1:
            continue  # changes of two steps in one pass, sometimes
        reruns = rec.cycles.reruns
        ran = rec.run_once(NOW, quiet=rng.random() < 0.5)  # quiet: as events alone ask
        rebuilt = build_snapshot(feed.informers.snapshot_objects())
        assert rec.kept.live.snapshot() == rebuilt, f"after {ops[: n + 1]}"
        if ran is not None:
            assert rec.last_snapshot == rebuilt
        assert rec.last_result is not None
        full = run_cycle(rebuilt, POLICIES, NOW)
        if rec.cycles.reruns == reruns:  # the last decisions stand, or a full cycle's
            assert rec.last_result.decisions == full.decisions
        else:  # a rerun decides the changed jobs last
            assert by_binding(rec.last_result) == by_binding(full)


def by_binding(result: CycleResult) -> list[Decision]:
    """The decisions, whatever order they were made in (a rerun decides the changed last)."""
    return sorted(result.decisions, key=lambda d: (d.binding, str(d.action)))


def test_a_quiet_pass_reruns_only_the_waiting_jobs_that_changed() -> None:
    """With no Cluster, every job waits: the cycle admits, preempts and holds nothing, so a
    pass events alone asked for decides only the jobs that changed (reconciler.cycles), and
    its decisions are the full cycle's."""
    feed = Feed()
    feed.list_all([o for o in example_objects() if o.get("kind") != "Cluster"])
    rec = reconciler_on(feed)
    rec.run_once(NOW)
    waiting = [b for b in feed.objects(RB) if not (b.get("spec") or {}).get("clusters")]
    assert len(waiting) >= 3
    for n, binding in enumerate(waiting[:2]):
        binding = copy.deepcopy(binding)  # a cache's objects are replaced, never changed
        binding["metadata"].setdefault("labels", {})["touched"] = str(n)
        feed.event("MODIFIED", binding)
        later = NOW + dt.timedelta(seconds=n + 1)
        assert rec.run_once(later, quiet=True) is not None and rec.cycles.reruns == n + 1
        rebuilt = build_snapshot(feed.informers.snapshot_objects())
        assert rec.last_result is not None and rec.last_result.now == later  # the pass's time
        # decided as of the last full cycle's time
        assert by_binding(rec.last_result) == by_binding(run_cycle(rebuilt, POLICIES, NOW))
    # a job that leaves (not a StrictFIFO queue's head, which the jobs behind it name)
    strict = {q.name for q in POLICIES.queues if q.strategy == Strategy.STRICT_FIFO}
    queues = {d.binding: d.queue for d in rec.last_result.decisions}
    gone = next(b for b in waiting[2:] if queues[ref_of(b)] not in strict)
    feed.event("DELETED", gone)
    assert rec.run_once(NOW, quiet=True) is not None and rec.cycles.reruns == 3
    assert rec.last_result is not None
    assert ref_of(gone) not in {d.binding for d in rec.last_result.decisions}
    rebuilt = build_snapshot(feed.informers.snapshot_objects())
    assert by_binding(rec.last_result) == by_binding(run_cycle(rebuilt, POLICIES, NOW))
    rec.run_once(NOW)  # not quiet (a resync, wake()): the full cycle
    assert rec.cycles.reruns == 3 and rec.last_result is not None
    assert rec.last_result.decisions == run_cycle(rebuilt, POLICIES, NOW).decisions


def test_only_changed_objects_are_read_again() -> None:
    feed = Feed()
    feed.list_all(example_objects())
    rec = reconciler_on(feed)
    rec.run_once(NOW)
    assert len(feed.objects(RB)) >= 5 and len(rec.last_snapshot.bindings) >= 5
    reads = rec.kept.live.reads
    first = rec.last_snapshot
    rec.run_once(NOW)
    assert rec.kept.live.reads == reads and rec.last_snapshot is first  # nothing heard
    chosen = feed.objects(RB)[0]
    chosen["metadata"].setdefault("labels", {})["touched"] = "yes"
    feed.event("MODIFIED", chosen)
    rec.run_once(NOW)
    assert rec.kept.live.reads == reads + 1
    assert rec.last_snapshot == build_snapshot(feed.informers.snapshot_objects())


def test_a_pass_events_alone_ask_for_runs_no_cycle_when_they_changed_nothing_it_reads() -> None:
    feed = Feed()
    feed.list_all(example_objects())
    rec = reconciler_on(feed)
    applier = rec.applier
    assert isinstance(applier, ScriptedApplier)
    assert rec.run_once(NOW, quiet=True) is not None  # the first pass always runs
    decisions = rec.last_result.decisions if rec.last_result else ()
    # a field no reader reads: the very same snapshot, no cycle, the decisions stand
    binding = feed.objects(RB)[0]
    binding["metadata"]["managedFields"] = [{"manager": "someone"}]
    feed.event("MODIFIED", binding)
    assert rec.run_once(NOW, quiet=True) is None and rec.quiet_passes == 1
    assert run_cycle(rec.kept.live.snapshot(), POLICIES, NOW).decisions == decisions
    assert rec.run_once(NOW) is not None  # not quiet (a resync, wake()): it runs
    # a change a pass reads: it runs
    binding = copy.deepcopy(binding)  # a cache's objects are replaced, never changed
    binding["metadata"].setdefault("labels", {})["touched"] = "yes"
    feed.event("MODIFIED", binding)
    assert rec.run_once(NOW, quiet=True) is not None and rec.quiet_passes == 1
    # a pass whose writes met conflicts leaves them to retry: the next quiet one runs
    applier.written.clear()
    applier.answer = Outcome.CONFLICT
    summary = rec.run_once(NOW)
    assert summary is not None and summary.conflicts
    applier.answer = Outcome.UNCHANGED
    rec.dirty.clear()  # even with nothing marked dirty
    assert rec.run_once(NOW, quiet=True) is not None
    assert rec.run_once(NOW, quiet=True) is None and rec.quiet_passes == 2
    # a pass that ended without the lease held its writes back: the next quiet one runs
    leading = False
    rec.gate = lambda: leading
    rec.run_once(NOW)
    leading = True
    assert rec.run_once(NOW, quiet=True) is not None
    assert rec.run_once(NOW, quiet=True) is None and rec.quiet_passes == 3


def test_a_recorder_hears_each_change_as_the_cache_makes_it() -> None:
    """What the cache holds, a recorder has heard of (it is told under the cache's lock); a
    relist is heard as its differences, as the listeners hear it."""
    feed = Feed()
    informer = feed.informers[RB]
    heard: list[tuple[Any, bool]] = []
    told: list[tuple[Any, bool]] = []

    def recorder(_resource: str, key: Any, obj: Any) -> None:
        assert not informer._lock.acquire(blocking=False)  # told with the lock held
        heard.append((key, obj is not None))

    informer.add_recorder(recorder)
    informer.add_listener(lambda _r, key, obj: told.append((key, obj is not None)))
    a, b = (binding_for(pytorch_job(n)) for n in ("a", "b"))
    feed.list_all([a, b])
    feed.event("DELETED", copy.deepcopy(a))
    feed.event("ADDED", copy.deepcopy(a))
    relisted = {key_of(a): feed.stamp(copy.deepcopy(a))}  # a changed, b gone
    informer._replace(relisted, str(feed.version))
    a_key, b_key = key_of(a), key_of(b)
    assert heard == told
    assert heard[2:] == [(a_key, False), (a_key, True), (a_key, True), (b_key, False)]
