"""Two queues that both keep the fleet saturated share its GPUs by their weights."""

from __future__ import annotations


def _saturating(jobs: int, gpus: int, duration: int) -> list[dict[str, object]]:
    """More jobs in each of queues a and b than the fleet can run before ``until``."""
    rows = []
    for i in range(jobs):
        for q in ("a", "b"):
            rows.append({"name": f"{q}-{i}", "submit": i, "duration": duration, "queue": q,
                         "tenant": q, "gpus": gpus})  # fmt: skip
    return rows


def _shares(result) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    queues = result.summary["queues"]
    return queues["a"]["share_mean"], queues["b"]["share_mean"]


def test_equal_weights_share_the_fleet_equally(policies, trace_file, simulate, cluster) -> None:  # type: ignore[no-untyped-def]
    trace = trace_file(_saturating(120, gpus=4, duration=600))
    _, result = simulate(
        policies({"a": 1, "b": 1}), [cluster("gpu", 4)], trace, until=12_000, interval=60
    )
    a, b = _shares(result)
    assert a + b > 0.95  # the fleet is saturated the whole time
    assert abs(a - b) <= 0.05 * (a + b) / 2, (a, b)
    assert result.summary["fairness"]["jain_mean"] > 0.99


def test_a_weight_of_two_gives_twice_the_share(policies, trace_file, simulate, cluster) -> None:  # type: ignore[no-untyped-def]
    # one-GPU jobs: 32 slots, so the 2:1 split is not lost to rounding (8 slots split 6:2)
    trace = trace_file(_saturating(300, gpus=1, duration=1200))
    _, result = simulate(
        policies({"a": 2, "b": 1}), [cluster("gpu", 4)], trace, until=12_000, interval=60
    )
    a, b = _shares(result)
    assert a + b > 0.9  # saturated (a slot stays idle until the next cycle)
    assert abs(a / b - 2.0) <= 0.1 * 2.0, (a, b)
    # Jain's index counts weighted shares: equal once divided by the weights
    assert result.summary["fairness"]["jain_mean"] > 0.99
