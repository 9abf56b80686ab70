"""``spec.ordering.lateAfter`` (adaptive LIFO): within a priority, jobs queued less than
``lateAfter`` ago go before late ones, in their queue and across queues; late jobs keep their
order among themselves. Scenarios are dicts for tests/cycle/builders.py."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.cycle import run_cycle
from engine.cycle.model import CycleResult
from engine.policy.policyset import PolicySet, load_policy_set
from tests.cycle import builders

GPU = "nvidia.com/gpu"
NODE = {"nvidia.com/gpu": 8, "cpu": 64, "memory": "512Gi"}
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(scope="module")
def load(tmp_path_factory: pytest.TempPathFactory) -> Callable[[int | None, bool], PolicySet]:
    """Two queues of equal weight, fair sharing on or off, ``lateAfter`` in minutes or none."""
    cache: dict[tuple[int | None, bool], PolicySet] = {}

    def loader(late_after: int | None, fair: bool) -> PolicySet:
        if (late_after, fair) not in cache:
            folder = tmp_path_factory.mktemp("policies")
            spec: dict[str, Any] = {"fairSharing": {"enabled": fair, "resources": [GPU]}}
            if late_after is not None:
                spec["ordering"] = {"lateAfter": f"{late_after}m"}
            docs = [
                {"kind": "Queue", "metadata": {"name": "a"}, "spec": {}},
                {"kind": "Queue", "metadata": {"name": "b"}, "spec": {}},
                {"kind": "SchedulingPolicy", "metadata": {"name": "default"}, "spec": spec},
            ]
            for i, doc in enumerate(docs):
                text = yaml.safe_dump({"apiVersion": "fleetgate.io/v1alpha1", **doc})
                (folder / f"{i:02}.yaml").write_text(text)
            cache[late_after, fair] = load_policy_set([folder])
        return cache[late_after, fair]

    return loader


def admitted(result: CycleResult) -> set[str]:
    return {d.workload.split("/")[-1] for d in result.decisions if d.action == "Admit"}


def scenario(free: int, jobs: list[tuple[str, int]]) -> dict[str, Any]:
    """One cluster with ``free`` whole 8-GPU nodes free (and one used); 8-GPU jobs (queue,
    minutes after the epoch it was queued), named j0, j1, …"""
    return {
        "clusters": [{"name": "east", "nodes": free + 1, "used": 1, "node": NODE}],
        "jobs": [
            {"name": f"j{i}", "queue": q, "pod": {GPU: 8}, "at": at}
            for i, (q, at) in enumerate(jobs)
        ],
    }


@SETTINGS
@given(
    free=st.integers(0, 4),
    times=st.lists(st.integers(0, 119), min_size=1, max_size=8, unique=True),
    queues=st.lists(st.sampled_from("ab"), min_size=8, max_size=8),
    late_after=st.integers(1, 120),
    fair=st.booleans(),
)
def test_the_jobs_not_yet_late_take_the_room_first(
    free: int, times: list[int], queues: list[str], late_after: int, fair: bool, load: Callable
) -> None:
    """Whole-node jobs of one priority, one node each: in each queue the jobs go by (late,
    queued); across queues a head that is not late goes first, then the lesser usage (fair
    sharing) or the earlier queued (FIFO). The first ``free`` picks are admitted, the others
    wait in their queue's order."""
    jobs = list(zip(queues, times, strict=False))
    policies = load(late_after, fair)
    result = run_cycle(builders.snapshot(scenario(free, jobs)), policies, builders.NOW)
    now_minutes = (builders.NOW - builders.EPOCH).total_seconds() / 60

    def key(i: int) -> tuple[bool, int]:
        return (now_minutes - jobs[i][1] >= late_after, jobs[i][1])

    lines = {q: sorted((i for i in range(len(jobs)) if jobs[i][0] == q), key=key) for q in "ab"}
    used = dict.fromkeys("ab", 0)
    picked = []
    while len(picked) < free and any(lines.values()):
        heads = [q for q in "ab" if lines[q]]
        queue = min(
            heads,
            key=lambda q: (key(lines[q][0])[0], used[q], q) if fair else key(lines[q][0]),
        )
        picked.append(lines[queue].pop(0))
        used[queue] += 1
    assert admitted(result) == {f"j{i}" for i in picked}
    for queue in "ab":
        waiting = [f"j{i}" for i in lines[queue]]
        positions = {
            d.workload.split("/")[-1]: d.position for d in result.decisions if d.queue == queue
        }
        assert [positions[name] for name in waiting] == list(range(1, len(waiting) + 1))


@SETTINGS
@given(
    free=st.integers(0, 3),
    times=st.lists(st.integers(0, 119), min_size=1, max_size=6, unique=True),
    queues=st.lists(st.sampled_from("ab"), min_size=6, max_size=6),
    fair=st.booleans(),
)
def test_a_late_after_no_job_has_reached_changes_nothing(
    free: int, times: list[int], queues: list[str], fair: bool, load: Callable
) -> None:
    """Every job waited less than 121 minutes: ``lateAfter: 121m`` decides as FIFO does."""
    snapshot = builders.snapshot(scenario(free, list(zip(queues, times, strict=False))))
    without = run_cycle(snapshot, load(None, fair), builders.NOW).decisions
    with_late = run_cycle(snapshot, load(121, fair), builders.NOW).decisions
    assert with_late == without


def test_the_policy_reads_late_after(tmp_path: Path) -> None:
    doc = {
        "apiVersion": "fleetgate.io/v1alpha1",
        "kind": "SchedulingPolicy",
        "metadata": {"name": "default"},
        "spec": {"ordering": {"lateAfter": "45m"}},
    }
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(doc))
    assert load_policy_set([tmp_path]).scheduling.ordering.late_after == 2700
