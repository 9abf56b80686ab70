"""LiveSnapshot (engine.fleet.live), kept up to date from changes, equals build_snapshot of the
same objects after any sequence of changes, as informers and snapshot files give them:
creates, updates, deletes, relists (only what differs is heard, and unchanged objects come
back as new copies), objects replaced by one of another kind or version (moving between
readers), broken templates and HyperJobs, bindings seen before or without their templates,
duplicates from other sources, Lists and documents that are not objects."""

from __future__ import annotations

import copy
import random
from typing import Any

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import annotations as ann
from engine.fleet.live import LiveSnapshot
from engine.fleet.snapshot import build_snapshot
from tests.conftest import REPO

from .builders import (
    as_list,
    binding_for,
    cluster,
    custom_job,
    policy,
    priority_class,
    pytorch_job,
)

Obj = dict[str, Any]
Key = tuple[str, str, str]  # (source, namespace, name): an informer's cache and its key
NAMES = [f"j{i}" for i in range(6)]
SOURCES = ("watch:rb", "watch:jobs", "watch:runs", "watch:fleet", "file.yaml")
NOTABLE = {ann.BACKOFF_UNTIL, ann.EXCLUDED_CLUSTERS, ann.GROUP_PLAN}
HYPERJOB = next(yaml.safe_load_all((REPO / "examples" / "hyperjob" / "hyperjobs.yaml").read_text()))


class World:
    """Caches by source, and the LiveSnapshot told of every change as an informer tells it."""

    def __init__(self) -> None:
        self.caches: dict[Key, Any] = {}
        self.version = 0
        self.live = LiveSnapshot()

    def stamp(self, obj: Any) -> Any:
        self.version += 1
        if isinstance(obj, dict):
            obj.setdefault("metadata", {})["resourceVersion"] = str(self.version)
        return obj

    def put(self, key: Key, obj: Any) -> None:
        self.caches[key] = obj
        self.live.put(key, key[0], obj)

    def delete(self, key: Key) -> None:
        self.caches.pop(key, None)
        self.live.delete(key)

    def relist(self, source: str, keep: random.Random) -> None:
        """A relist of ``source``: some objects gone, the rest listed again as new copies
        (the same resourceVersion: not heard), a few changed (heard), as Informer._replace."""
        for key in sorted(k for k in self.caches if k[0] == source):
            roll = keep.random()
            if roll < 0.3:
                self.delete(key)
            elif roll < 0.5 and isinstance(self.caches[key], dict):
                changed = copy.deepcopy(self.caches[key])
                changed.setdefault("metadata", {}).setdefault("labels", {})["relisted"] = "yes"
                self.put(key, self.stamp(changed))
            else:
                self.caches[key] = copy.deepcopy(self.caches[key])  # same version: not heard

    def pairs(self) -> list[tuple[str, Any]]:
        return [(key[0], obj) for key, obj in sorted(self.caches.items())]


def template(kind: int, name: str, variant: int) -> Obj:
    """A job template of one of several kinds and readers, sometimes broken."""
    if kind == 0:
        job = pytorch_job(name, workers=1 + variant % 3, gpus=(1, 8)[variant % 2])
        if variant == 5:
            job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = "two"  # broken
        return job
    if kind == 1:
        return custom_job(name)  # no reader: the demand comes from the binding
    hyper = copy.deepcopy(HYPERJOB)
    hyper["metadata"]["name"] = name
    hyper["metadata"]["namespace"] = "research"
    if variant >= 4:
        hyper["spec"]["replicatedJobs"][0]["templateSpec"]["tasks"][0]["replicas"] = "x"
        if variant == 5:
            hyper.pop("status", None)
    return hyper


def binding(kind: int, name: str, variant: int) -> Obj:
    job = template(kind, name, 0)
    if variant == 3:  # of a template of the other kind, same name
        job = template(1 - kind % 2, name, 0)
    found = binding_for(
        job,
        clusters=["gpu-east"] if variant == 1 else (),
        replicas=None if variant == 4 else 1 + variant % 3,
        requests=None if variant == 4 else {"cpu": "2"},
        policy_id=("id-research-jobs", "id-other")[variant % 2],
    )
    # what makes a waiting binding notable (a backoff, exclusions, a group plan), or a note
    # that does not
    note = {2: ann.GROUP_PLAN, 3: ann.QUEUED_AT, 5: ann.BACKOFF_UNTIL}.get(variant)
    if note is not None:
        found["metadata"].setdefault("annotations", {})[note] = "2026-01-01T00:00:00Z"
    if variant == 4:
        found["metadata"].setdefault("annotations", {})[ann.EXCLUDED_CLUSTERS] = (
            "gpu-east=2026-01-01T00:00:00Z"
        )
    return found


def fleet_object(kind: int, name: str, variant: int) -> Any:
    if kind == 0:
        return cluster(f"c-{name}", gpus=(8, 16, 64)[variant % 3], ready=variant != 4)
    if kind == 1:
        return policy("research-jobs") if variant < 3 else policy(f"p-{name}")
    if kind == 2:
        return priority_class(f"pc-{name}", 100 * variant, default=variant == 5)
    if kind == 3:
        return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": f"ns-{name}"}}
    return as_list([cluster(f"listed-{name}", gpus=8)]) if variant < 3 else "junk"


OPS = st.lists(
    st.tuples(
        st.integers(0, 9),  # what happens
        st.integers(0, len(NAMES) - 1),  # to which name
        st.integers(0, 5),  # and how
        st.integers(0, 2),  # of which kind
    ),
    max_size=50,
)


def apply(world: World, op: tuple[int, int, int, int], rng: random.Random) -> None:
    what, index, variant, kind = op
    name = NAMES[index]
    if what <= 1:  # a template: created, replaced (perhaps by one of another kind), broken
        world.put(("watch:jobs", "research", name), world.stamp(template(kind, name, variant)))
    elif what == 2:  # its binding, with or without the template
        world.put(("watch:rb", "research", name), world.stamp(binding(kind, name, variant)))
        if variant == 4 and kind == 1:  # a template no reader reads, a binding without demand
            world.put(("watch:jobs", "research", name), world.stamp(template(1, name, 0)))
    elif what == 3:  # a template kind watched by another informer: the same identity twice
        world.put(("watch:runs", "research", name), world.stamp(template(kind, name, variant)))
    elif what == 4:
        world.put(
            ("watch:fleet", "", f"{kind}-{name}"), world.stamp(fleet_object(kind, name, variant))
        )
    elif what == 5:
        world.put(
            ("watch:fleet", "", f"{variant % 5}-{name}"),
            world.stamp(fleet_object(variant % 5, name, kind)),
        )
    elif what == 6:  # deletes
        source = SOURCES[variant % len(SOURCES)]
        for key in [k for k in sorted(world.caches) if k[0] == source and name in k[2]]:
            world.delete(key)
    elif what == 7:  # a relist
        world.relist(SOURCES[variant % 4], rng)
    elif what == 8:  # a copy from a file: older or newer than the watched one, or junk
        watched = [o for k, o in sorted(world.caches.items()) if k[0] != "file.yaml"]
        if watched and variant < 4:
            copied = copy.deepcopy(rng.choice(watched))
            if isinstance(copied, dict) and variant % 2:
                copied.setdefault("metadata", {})["resourceVersion"] = str(world.version + 5)
            world.put(("file.yaml", "", f"copy-{name}-{variant}"), copied)
        else:
            world.put(("file.yaml", "", f"junk-{name}"), "junk" if variant == 4 else as_list([]))
    else:  # the same object put again (a resync): nothing changes
        for key, obj in sorted(world.caches.items())[:3]:
            world.live.put(key, key[0], obj)


@settings(max_examples=150, deadline=None)
@given(ops=OPS, seed=st.integers(0, 2**16))
def test_a_live_snapshot_equals_a_rebuild_after_any_changes(
    ops: list[tuple[int, int, int, int]], seed: int
) -> None:
    world, rng = World(), random.Random(seed)
    last = world.live.snapshot()
    for step, op in enumerate(ops):
        apply(world, op, rng)
        if step % 3 == 2 or step == len(ops) - 1:
            live, rebuilt = world.live.snapshot(), build_snapshot(world.pairs())
            assert live == rebuilt, f"after {ops[: step + 1]}"
            # each map says which keys changed since the last snapshot's (by identity, at least)
            for part in ("workloads", "hyperjobs", "namespaces"):
                before, now = getattr(last, part), getattr(live, part)
                said = now.changed_since(before)
                assert (said is None) == (now is before), part
                moved = {
                    k
                    for k in before.keys() | now.keys()
                    if k not in before or k not in now or before[k] is not now[k]
                }
                assert said is None or moved <= set(said), part
            last = live
            # the notable bindings kept as they came and went, as found in the rebuild
            assert live.notable is not None and live.notable.among is live.bindings
            assert live.notable_bindings() == rebuilt.notable_bindings()
            assert rebuilt.notable_bindings() == tuple(
                b for b in rebuilt.bindings if b.clusters or b.annotations.keys() & NOTABLE
            )
            for part in ("workloads", "hyperjobs", "namespaces"):  # and in the rebuild's order
                assert list(getattr(live, part)) == list(getattr(rebuilt, part)), part
    pairs = world.pairs()
    rng.shuffle(pairs)
    assert world.live.snapshot() == build_snapshot(pairs)  # the input's order never decides


def test_bindings_before_their_templates_then_a_broken_one_then_gone() -> None:
    world = World()
    job = pytorch_job("a", workers=2)
    world.put(("watch:rb", "research", "a"), world.stamp(binding_for(job)))
    first = world.live.snapshot()
    assert [e.code for e in first.errors] == ["TemplateNotFound"]
    world.put(("watch:jobs", "research", "a"), world.stamp(copy.deepcopy(job)))
    second = world.live.snapshot()
    assert second.errors == () and len(second.workloads) == 1
    broken = copy.deepcopy(job)
    broken["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = "two"
    world.put(("watch:jobs", "research", "a"), world.stamp(broken))
    third = world.live.snapshot()
    assert len(third.workloads) == 0 and third == build_snapshot(world.pairs())
    world.delete(("watch:jobs", "research", "a"))
    assert world.live.snapshot() == first


def test_an_unchanged_set_gives_the_same_snapshot_object_and_reads_nothing_again() -> None:
    world = World()
    for n in range(len(NAMES)):
        apply(world, (0, n, 0, n % 2), random.Random(0))
        apply(world, (2, n, 0, n % 2), random.Random(0))
    world.put(("watch:fleet", "", "east"), world.stamp(cluster("gpu-east", gpus=32)))
    first = world.live.snapshot()
    reads = world.live.reads
    for key, obj in sorted(world.caches.items()):
        world.live.put(key, key[0], obj)  # heard again, unchanged
    assert world.live.snapshot() is first and world.live.reads == reads
    # one binding changes: it alone is read again; the other parts are the very same values
    key = ("watch:rb", "research", NAMES[0])
    changed = copy.deepcopy(world.caches[key])
    changed["metadata"]["labels"]["touched"] = "yes"
    world.put(key, world.stamp(changed))
    second = world.live.snapshot()
    assert world.live.reads == reads + 1
    assert second.clusters is first.clusters and second.workloads is first.workloads
    assert second.bindings != first.bindings and second == build_snapshot(world.pairs())


def test_sync_applies_a_whole_new_set() -> None:
    world = World()
    for n in range(4):
        apply(world, (0, n, n, 0), random.Random(0))
        apply(world, (2, n, n, 0), random.Random(0))
    live = LiveSnapshot()
    live.sync((key, key[0], obj) for key, obj in sorted(world.caches.items()))
    assert live.snapshot() == build_snapshot(world.pairs())
    world.delete(("watch:jobs", "research", NAMES[0]))
    live.sync((key, key[0], obj) for key, obj in sorted(world.caches.items()))
    assert live.snapshot() == build_snapshot(world.pairs()) and len(live) == len(world.caches)


def test_a_change_no_reader_reads_leaves_the_snapshot_the_same_object() -> None:
    world = World()
    job = pytorch_job("a", workers=2)
    world.put(("watch:jobs", "research", "a"), world.stamp(copy.deepcopy(job)))
    world.put(("watch:rb", "research", "a"), world.stamp(binding_for(job)))
    first = world.live.snapshot()
    for key in (("watch:jobs", "research", "a"), ("watch:rb", "research", "a")):
        changed = copy.deepcopy(world.caches[key])
        changed["metadata"]["managedFields"] = [{"manager": "kubectl"}]
        world.put(key, world.stamp(changed))
        assert world.live.snapshot() is first
    assert first == build_snapshot(world.pairs())


def test_a_binding_leaves_the_notable_ones_when_it_stops_being_notable_or_goes() -> None:
    """Pinned (the property above finds a missed removal in only some runs): placed, then
    waiting with nothing notable, then in backoff, then deleted."""
    world = World()
    world.put(("watch:jobs", "research", "j0"), world.stamp(template(0, "j0", 0)))
    world.put(("watch:rb", "research", "j0"), world.stamp(binding(0, "j0", 1)))  # placed
    assert len(world.live.snapshot().notable_bindings()) == 1
    world.put(("watch:rb", "research", "j0"), world.stamp(binding(0, "j0", 0)))  # waiting
    rebuilt = build_snapshot(world.pairs())
    assert world.live.snapshot().notable_bindings() == rebuilt.notable_bindings() == ()
    world.put(("watch:rb", "research", "j0"), world.stamp(binding(0, "j0", 5)))  # backoff
    assert len(world.live.snapshot().notable_bindings()) == 1
    world.delete(("watch:rb", "research", "j0"))
    assert world.live.snapshot().notable_bindings() == ()
