"""build_snapshot with a ReadMemo kept between builds (engine.fleet.readmemo) gives what a full
rebuild gives, after any sequence of creates, updates, deletes, malformed objects and
duplicates, as an informer's cache sees them: a changed object is a new dict with a higher
resourceVersion."""

from __future__ import annotations

import copy
import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.fleet.readmemo import ReadMemo
from engine.fleet.snapshot import build_snapshot

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
Key = tuple[str, str, str]


class Cache:
    """An informer's cache: objects by (kind, namespace, name), each write a new object."""

    def __init__(self) -> None:
        self.objects: dict[Key, Obj] = {}
        self.version = 0

    def put(self, obj: Obj) -> None:
        self.version += 1
        obj.setdefault("metadata", {})["resourceVersion"] = str(self.version)
        meta = obj["metadata"]
        self.objects[(obj["kind"], meta.get("namespace", ""), meta["name"])] = obj

    def changed(self, key: Key, change: Any) -> None:
        obj = copy.deepcopy(self.objects[key])
        change(obj)
        self.put(obj)

    def pairs(self) -> list[tuple[str, Obj]]:
        return [("watch", obj) for _, obj in sorted(self.objects.items())]


def world() -> Cache:
    cache = Cache()
    for obj in (
        cluster("gpu-east", gpus=32),
        cluster("gpu-west", gpus=16, region="us-west-2"),
        policy("research-jobs"),
        priority_class("high", 1000),
    ):
        cache.put(obj)
    return cache


def add_job(cache: Cache, rng: random.Random, n: int) -> None:
    if rng.random() < 0.7:
        job = pytorch_job(f"job-{n}", workers=rng.randint(1, 4), gpus=rng.choice([1, 8]))
        bound = binding_for(job, clusters=["gpu-east"] if rng.random() < 0.3 else ())
    else:
        job = custom_job(f"run-{n}")
        bound = binding_for(job, replicas=rng.randint(1, 3), requests={"cpu": "2"})
    for obj in (job, bound) if rng.random() < 0.9 else (bound,):  # some templates absent
        cache.put(obj)


def mutate(cache: Cache, rng: random.Random) -> None:
    key = rng.choice(sorted(cache.objects))
    kind = key[0]
    if kind == "PyTorchJob":
        workers = rng.choice([1, 2, 3, "two"])  # "two": a malformed template, an issue

        def change(obj: Obj) -> None:
            obj["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = workers
    elif kind == "ResourceBinding":
        name = rng.choice(["gpu-east", "gpu-west", ""])

        def change(obj: Obj) -> None:
            obj["spec"]["clusters"] = [{"name": name, "replicas": 1}] if name else []
            obj["metadata"].setdefault("annotations", {})["fleetgate.io/pending"] = str(name)
    elif kind == "Cluster":
        gpus = str(rng.choice([8, 16, 64]))

        def change(obj: Obj) -> None:
            obj["status"]["resourceSummary"]["allocatable"]["nvidia.com/gpu"] = gpus
    else:

        def change(obj: Obj) -> None:
            obj["metadata"].setdefault("labels", {})["touched"] = "yes"

    cache.changed(key, change)


def step(cache: Cache, rng: random.Random, n: int) -> list[tuple[str, Any]]:
    """One random change to the cache; the objects a build sees (sometimes with extras)."""
    roll = rng.random()
    if roll < 0.35:
        add_job(cache, rng, n)
    elif roll < 0.75 and cache.objects:
        mutate(cache, rng)
    elif cache.objects:
        del cache.objects[rng.choice(sorted(cache.objects))]
    pairs: list[tuple[str, Any]] = cache.pairs()
    if cache.objects and rng.random() < 0.2:  # an older copy from another source: a duplicate
        _, obj = rng.choice(pairs)
        older = copy.deepcopy(obj)
        older["metadata"]["resourceVersion"] = "0"
        pairs.append(("file.yaml", older))
    if rng.random() < 0.1:  # a List, and a document that is not an object
        pairs += [("file.yaml", as_list([cluster("listed", gpus=8)])), ("file.yaml", "junk")]
    return pairs


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_incremental_snapshots_equal_full_rebuilds(seed: int) -> None:
    rng = random.Random(seed)
    cache, memo = world(), ReadMemo()
    for n in range(40):
        pairs = step(cache, rng, n)
        incremental = build_snapshot(pairs, memo)
        assert incremental == build_snapshot(pairs), f"seed {seed}, step {n}"
    assert memo.hits > 0
    assert len(memo) <= len(cache.objects) + 2  # deleted objects left the memo


def test_an_unchanged_object_is_read_once_and_a_new_version_again() -> None:
    cache = world()
    add_job(cache, random.Random(1), 1)
    memo = ReadMemo()
    build_snapshot(cache.pairs(), memo)
    readable = memo.misses
    assert (memo.hits, readable) == (0, len(cache.objects))
    build_snapshot(cache.pairs(), memo)
    assert (memo.hits, memo.misses) == (readable, readable)

    # the same object changed in place with a new resourceVersion, and a relisted copy
    # (a new object, same version): each read again, the rest kept
    east = cache.objects[("Cluster", "", "gpu-east")]
    east["status"]["resourceSummary"]["allocatable"]["nvidia.com/gpu"] = "4"
    east["metadata"]["resourceVersion"] = "99"
    west = ("Cluster", "", "gpu-west")
    cache.objects[west] = copy.deepcopy(cache.objects[west])
    snap = build_snapshot(cache.pairs(), memo)
    assert memo.misses == readable + 2
    assert {c.name: c.allocatable.get_amount("nvidia.com/gpu") for c in snap.clusters} == {
        "gpu-east": 4,
        "gpu-west": 16,
    }
    assert snap == build_snapshot(cache.pairs())


def test_a_malformed_object_keeps_its_issue_when_read_from_the_memo() -> None:
    cache = world()
    job = pytorch_job("bad")
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = "two"
    cache.put(job)
    cache.put(binding_for(job))
    memo = ReadMemo()
    first = build_snapshot(cache.pairs(), memo)
    second = build_snapshot(cache.pairs(), memo)
    assert memo.hits == len(cache.objects)
    assert second.errors == first.errors and any("replicas" in i.path for i in second.errors)
    assert second == build_snapshot(cache.pairs())
