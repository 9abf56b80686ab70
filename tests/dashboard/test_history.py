"""``reconciler.history``: what the dashboard draws over time, in bounded memory."""

from __future__ import annotations

import dataclasses
import datetime as dt
import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.cycle import QueueReport
from reconciler.fleetview import queue_history
from reconciler.history import FleetHistory, Spell
from tests.cycle import builders

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
MINUTE = dt.timedelta(minutes=1)


def report(name: str, share: float, gpus: int) -> QueueReport:
    return QueueReport(name, "", {"nvidia.com/gpu": gpus * 1000}, {}, {}, share, 1, 0)


def cluster(name: str, ready: bool, changed: dt.datetime | None):
    view = builders.cluster({"name": name, "nodes": 1, "node": {"nvidia.com/gpu": 8}})
    return dataclasses.replace(view, ready=ready, ready_changed_at=changed)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=400), min_size=1, max_size=80))
def test_samples_stay_apart_bounded_and_end_at_the_latest_pass(gaps: list[int]) -> None:
    history = FleetHistory(every=MINUTE, keep=10)
    now = T0
    for i, gap in enumerate(gaps):
        now += dt.timedelta(seconds=gap)
        history.observe(now, [report("q", i / 100, i)], [])
    samples = history.samples()
    assert 1 <= len(samples) <= 10
    assert samples[-1].at == now and samples[-1].queues["q"].gpus == len(gaps) - 1
    kept = [s.at for s in samples[:-1]]
    assert all(b - a >= MINUTE for a, b in itertools.pairwise(kept))
    assert history.started == T0 + dt.timedelta(seconds=gaps[0])


def test_an_older_pass_never_moves_the_history_back() -> None:
    history = FleetHistory(every=MINUTE)
    history.observe(T0 + 2 * MINUTE, [report("q", 0.5, 8)], [])
    history.observe(T0, [report("q", 0.1, 1)], [])
    assert [s.queues["q"].gpus for s in history.samples()] == [8]


def test_a_cluster_not_ready_opens_a_spell_closed_when_it_is_back() -> None:
    history = FleetHistory(spells=2)
    went = T0 + MINUTE
    history.observe(T0, [], [cluster("east", True, None)])
    history.observe(T0 + 2 * MINUTE, [], [cluster("east", False, went)])
    history.observe(T0 + 3 * MINUTE, [], [cluster("east", False, went)])
    assert history.spells("east") == [Spell(went)]
    back = T0 + 4 * MINUTE
    history.observe(T0 + 5 * MINUTE, [], [cluster("east", True, back)])
    assert history.spells("east") == [Spell(went, back)]
    for k in range(3):  # two spells are kept: the newest
        at = T0 + (10 + 2 * k) * MINUTE
        history.observe(at, [], [cluster("east", False, at)])
        history.observe(at + MINUTE, [], [cluster("east", True, at + MINUTE)])
    assert [s.since for s in history.spells("east")] == [T0 + 12 * MINUTE, T0 + 14 * MINUTE]
    history.observe(T0 + 20 * MINUTE, [], [])  # gone from the fleet: forgotten
    assert history.spells("east") == []


def test_a_queues_history_is_at_most_the_points_asked_and_ends_now() -> None:
    history = FleetHistory(every=MINUTE, keep=500)
    for i in range(200):
        history.observe(T0 + i * MINUTE, [report("q", i / 200, i)], [])
    drawn = queue_history(history.samples(), "q", points=60)
    points = drawn["points"]
    assert len(points) <= 60 and points[-1] == [points[-1][0], 199 / 200, 199]
    assert [p[0] for p in points] == sorted(p[0] for p in points) and points[0][0] == 0
    assert queue_history(history.samples(), "other") == {"start": None, "points": []}
