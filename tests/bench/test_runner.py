"""``fleetgate bench`` numbers: the full-cycle p50 is that of the warm cycles, the max that of
all of them (the cold first cycle included)."""

from __future__ import annotations

import statistics

import pytest

from engine.bench.nullcycle import Prepared
from engine.bench.runner import run
from engine.cycle import CycleResult


def test_the_cycle_p50_is_over_the_warm_cycles_and_the_max_over_all() -> None:
    out = run(jobs=60, clusters=2, queues=3, seed=1, repeats=4)
    warm = out["warm_cycle_seconds"]
    assert len(warm) == 3
    assert out["cycle_seconds"]["p50"] == round(statistics.median(warm), 4)
    assert out["cycle_seconds"]["max"] == max(out["first_cycle_seconds"], *warm)
    assert out["cycle_seconds"]["p50_of"] == "warm"


def test_one_cycle_is_its_own_p50() -> None:
    out = run(jobs=60, clusters=2, queues=3, seed=1, repeats=1)
    assert out["warm_cycle_seconds"] == []
    assert out["cycle_seconds"]["p50"] == out["first_cycle_seconds"] == out["cycle_seconds"]["max"]
    assert out["cycle_seconds"]["p50_of"] == "cold"


def test_the_decisions_digest_is_the_same_for_the_same_fleet_and_only_then() -> None:
    first = run(jobs=200, clusters=3, queues=4, seed=1, repeats=2)["decisions_sha256"]
    assert run(jobs=200, clusters=3, queues=4, seed=1, repeats=2)["decisions_sha256"] == first
    assert run(jobs=200, clusters=3, queues=4, seed=2, repeats=2)["decisions_sha256"] != first
    assert len(first) == 64


def test_the_null_cycles_are_timed_between_the_warm_full_cycles(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Interleaved: the machine's wandering speed reaches both sides of the ratio alike."""
    import engine.bench.runner as runner

    calls: list[str] = []
    first_fit = runner.null_cycle

    class Recorded(runner.Cycle):
        def run(self) -> CycleResult:
            calls.append("full")
            return super().run()

    def null(prepared: Prepared) -> int:
        calls.append("null")
        return first_fit(prepared)

    monkeypatch.setattr(runner, "Cycle", Recorded)
    monkeypatch.setattr(runner, "null_cycle", null)
    out = run(jobs=60, clusters=2, queues=3, seed=1, repeats=3)
    nulls = ["null"] * runner.NULL_PER_CYCLE
    assert calls == ["full", "full", *nulls, "full", *nulls]
    assert out["null_admitted"] > 0
    assert len(out["warm_cycle_seconds"]) == 2
    calls.clear()
    run(jobs=60, clusters=2, queues=3, seed=1, repeats=1)
    assert calls == ["full", *nulls]
