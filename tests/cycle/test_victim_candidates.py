"""``preemption.candidates.Candidates`` (kept between cycles in the ``JobCache``) gives the
victims and the work each would lose that the plain composition gives: ``groups.preemptible``,
``protection.preemptible``, ``VictimIndex`` over ``protection.work_lost`` — over successive
cycles in which jobs come, go and are read again, time passes, and the workloads or the
capacity change."""

from __future__ import annotations

import dataclasses
import datetime as dt
from types import SimpleNamespace
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import annotations as ann
from engine.cycle.groups import formation
from engine.cycle.jobs.model import AdmittedJob, Mapped
from engine.cycle.preemption import protection
from engine.cycle.preemption.candidates import Candidates
from engine.cycle.preemption.victims import VictimIndex
from engine.policy.model import PreemptionLimits
from engine.workloads import hyperjob

NOW = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)
SETTINGS = settings(
    max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)


class Fleet(SimpleNamespace):
    """What the candidates read of a snapshot: the workloads, by the binding's template."""

    def workload_for(self, binding: Any) -> Any:
        return self.workloads.get(binding.template)


@st.composite
def jobs(draw: st.DrawFn, i: int) -> AdmittedJob:
    notes = {}
    if draw(st.booleans()):
        notes[ann.PREEMPTIONS] = draw(st.sampled_from(("0", "1", "2", "5", "x")))
    binding = SimpleNamespace(
        annotations=notes, uid=draw(st.sampled_from(("u1", "u2", f"u{i}"))), template=f"t{i}"
    )
    group = (f"g{i}", 2, 1) if draw(st.integers(0, 5)) == 0 else None
    mapped = Mapped("q", "t", draw(st.integers(0, 2)), 1, False, group=group)
    demand = {
        r: draw(st.integers(0, 16_000))
        for r in ("cpu", "nvidia.com/gpu", "pods")
        if draw(st.booleans())
    }
    usage = {"east": demand} if draw(st.integers(0, 4)) else {}
    admitted = NOW + dt.timedelta(seconds=draw(st.integers(-3600, 3600)))
    return AdmittedJob(binding, mapped, admitted, usage, {}, frozenset(), f"ns/j{i}", demand)  # type: ignore[arg-type]


def workload(draw: st.DrawFn, i: int) -> Any:
    labels, notes = {}, {}
    kind = draw(st.integers(0, 5))
    if kind == 0:
        labels[hyperjob.NAME_LABEL] = f"hj{i % 2}"
    elif kind == 1:
        notes[ann.GROUP] = f"group{i % 2}"
    return SimpleNamespace(labels=labels, annotations=notes, namespace="ns")


@st.composite
def histories(draw: st.DrawFn) -> list[tuple[Any, ...]]:
    """Successive cycles: (admitted jobs, snapshot, limits, now, capacity)."""
    count = draw(st.integers(0, 12))
    pool = [draw(jobs(i)) for i in range(count)]
    pool += [dataclasses.replace(j) for j in pool if draw(st.integers(0, 3)) == 0]  # read again
    fleet = Fleet(workloads={f"t{i}": workload(draw, i) for i in range(count)})
    capacity = {"cpu": 64_000, "nvidia.com/gpu": 16_000, "pods": 110_000}
    limits = PreemptionLimits(
        min_runtime=draw(st.sampled_from((None, 0.0, 600.0))),
        max_per_job=draw(st.sampled_from((None, 1, 3))),
    )
    now, cycles = NOW, []
    for _ in range(draw(st.integers(1, 5))):
        now += dt.timedelta(seconds=draw(st.integers(0, 900)))
        if draw(st.integers(0, 3)) == 0:  # a new snapshot: the same workloads, a new mapping
            fleet = Fleet(workloads=dict(fleet.workloads))
        if draw(st.integers(0, 3)) == 0:
            capacity = {**capacity, "nvidia.com/gpu": draw(st.integers(0, 32_000))}
        picked = sorted(draw(st.sets(st.integers(0, len(pool) - 1)))) if pool else []
        cycles.append(([pool[i] for i in picked], fleet, limits, now, capacity))
    return cycles


@SETTINGS
@given(cycles=histories())
def test_kept_candidates_are_the_plain_victims_in_the_same_order(cycles: list) -> None:
    kept = Candidates()
    for admitted, fleet, limits, now, capacity in cycles:
        plain = VictimIndex(
            protection.preemptible(formation.preemptible(admitted, fleet), limits, now),
            lambda job, now=now, capacity=capacity: protection.work_lost(job, now, capacity),
        )
        order, lost = kept.ordered(admitted, fleet, limits, now, capacity)
        assert [id(j) for j in order] == [id(j) for j in plain.order]
        assert lost == plain.lost_of
        index = VictimIndex.ordered(order, lost)
        assert index.rank == plain.rank and index.by_queue == plain.by_queue
