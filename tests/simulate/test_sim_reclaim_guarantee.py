"""Issue 28: "a light tenant under its guarantee is never preempted", measured by the simulator:
``reclaimed_below_guarantee`` counts the preemptions by another queue's job that left the
victim's queue with fewer GPUs than its guarantee (per queue and for the whole run)."""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console

from engine.cycle import run_cycle
from simulate.metrics import Metrics
from simulate.screen import print_summary

QUEUES = """\
apiVersion: fleetgate.io/v1alpha1
kind: Queue
metadata: {name: a}
spec: {weight: 1, guarantee: {nvidia.com/gpu: 8}, preemption: {reclaim: Any}}
---
apiVersion: fleetgate.io/v1alpha1
kind: Queue
metadata: {name: b}
spec: {weight: 1, guarantee: {nvidia.com/gpu: 16}, preemption: {reclaim: Any}}
"""


def job(name: str, queue: str, submit: int, duration: int = 10_000) -> dict[str, Any]:
    return {"name": name, "submit": submit, "queue": queue, "tenant": queue,
            "duration": duration, "gpus": 8}  # fmt: skip


# One cluster of 3 x 8 GPUs. Queue a (guaranteed 8) fills it at 0, borrowing 16 of b's idle
# guarantee. b1 and b2 arrive: each reclaims one of a's jobs, which leaves a with 16, then 8 (its
# guarantee, not below it). b3 would make b borrow, and nobody borrows any more: it waits.
ROWS = [
    job("a1", "a", 0), job("a2", "a", 0), job("a3", "a", 0),
    job("b1", "b", 100, 500), job("b2", "b", 200, 500), job("b3", "b", 300, 500),
]  # fmt: skip


def test_reclaim_takes_only_what_a_queue_borrows(policies, trace_file, simulate, cluster) -> None:  # type: ignore[no-untyped-def]
    policy_set = policies({"other": 1}, extra=QUEUES)
    _, result = simulate(policy_set, [cluster("east", 3)], trace_file(ROWS), interval=10)
    s = result.summary
    assert s["jobs"]["preemptions"] == 2
    assert s["queues"]["a"]["preemptions"] == 2
    assert s["jobs"]["reclaimed_below_guarantee"] == 0
    assert s["queues"]["a"]["reclaimed_below_guarantee"] == 0
    assert s["jobs"]["succeeded"] == len(ROWS)


def test_a_preemption_that_leaves_a_queue_below_its_guarantee_is_counted(policies) -> None:  # type: ignore[no-untyped-def]
    metrics = Metrics(policies({"other": 1}, extra=QUEUES), {"east": (24.0, 96.0, 2.0**40)},
                      24.0, 3600.0, 60.0)  # fmt: skip
    metrics.admit("a", (16.0, 2.0, 0.0))
    metrics.reclaimed("a", (8.0, 1.0, 0.0))  # 16 - 8 = 8: its guarantee, not below
    assert dict(metrics.below_guarantee) == {}
    metrics.admit("a", (8.0, 1.0, 0.0), -1)
    metrics.reclaimed("a", (8.0, 1.0, 0.0))  # 8 - 8 = 0 < 8
    assert dict(metrics.below_guarantee) == {"a": 1}
    metrics.admit("other", (8.0, 1.0, 0.0))
    metrics.reclaimed("other", (8.0, 1.0, 0.0))  # no guarantee: nothing to fall below
    assert dict(metrics.below_guarantee) == {"a": 1}


def test_the_run_counts_each_reclaim_that_breaks_a_guarantee(  # type: ignore[no-untyped-def]
    policies, trace_file, simulate, cluster
) -> None:
    """The cycle is given policies where ``a`` has no guarantee, the report policies where it
    is guaranteed all 24 GPUs: every job of ``a`` that ``b`` reclaims is then counted."""
    cycle_policies = policies({"other": 1}, extra=QUEUES.replace("gpu: 8}", "gpu: 0}"))
    report_policies = policies({"other": 1}, extra=QUEUES.replace("gpu: 8}", "gpu: 24}"))

    def decide(snapshot, _policies, now, cache):  # type: ignore[no-untyped-def]
        return run_cycle(snapshot, cycle_policies, now, cache)

    _, result = simulate(
        report_policies, [cluster("east", 3)], trace_file(ROWS), decide, interval=10
    )
    s = result.summary
    assert s["queues"]["a"]["preemptions"] >= 2
    assert s["queues"]["a"]["reclaimed_below_guarantee"] == s["queues"]["a"]["preemptions"]
    assert s["jobs"]["reclaimed_below_guarantee"] == s["queues"]["a"]["preemptions"]


def test_the_summary_screen_says_it(policies, trace_file, simulate, cluster) -> None:  # type: ignore[no-untyped-def]
    policy_set = policies({"other": 1}, extra=QUEUES)
    _, result = simulate(policy_set, [cluster("east", 3)], trace_file(ROWS), interval=10)
    out = io.StringIO()
    print_summary([result], Console(file=out, width=160, color_system=None))
    line = next(x for x in out.getvalue().splitlines() if "reclaims below a guarantee" in x)
    assert line.split("│")[2].strip() == "0"
