"""What the report's plots draw, without drawing it (no matplotlib here): which queues and
clusters get a series of their own and which are summed or averaged as "other", their colours
and guarantee dashes, step and CDF points, and names as matplotlib text. The same runs give the
same choices in every plot, so a queue keeps its colour and dash.
"""

from __future__ import annotations

from collections.abc import Sequence

from simulate.results import GPU, RunResult, Series

MAX_SERIES = 12
"""Most series drawn in one panel; the rest are summed (queues) or averaged (clusters) as
"other"."""
OTHER = "\x00other"
"""The key of the "other" series (no queue or cluster name starts with NUL)."""
HOUR = 3600.0
COLOURS = (
    *("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2"),
    *("#17becf", "#bcbd22", "#393b79", "#ad494a", "#637939"),
)
OTHER_COLOUR = "#9e9e9e"
RUN_STYLES = ("-", "--", ":", "-.")
GUARANTEE_DASHES = (
    *((0, (5, 2)), (0, (1, 1.5)), (0, (5, 1.5, 1, 1.5)), (0, (8, 2)), (0, (3, 1, 1, 1, 1, 1))),
    *((0, (2, 2)), (0, (6, 1.5, 1, 1.5, 1, 1.5)), (0, (3, 3)), (0, (8, 1.5, 2, 1.5))),
    *((0, (1, 3)), (0, (4, 1)), (0, (2, 1, 2, 3))),
)
"""One dash pattern per queue drawn on its own (in the order of their colours), so that
guarantee lines of equal height or similar colour stay apart; each repeats within a legend
handle's length. "other" (grey) is solid."""


def text(name: str) -> str:
    """``name`` as matplotlib text: a ``$`` in a queue name must not start mathtext."""
    return name.replace("$", r"\$")


def hours(times: Sequence[float]) -> list[float]:
    return [t / HOUR for t in times]


def steps(x: Sequence[float], *ys: Sequence[float]) -> tuple[list[float], ...]:
    """Points that draw each ``y`` as a step held from one sample to the next (the simulator's
    quantities are piecewise constant), for plots such as stackplot that cannot step."""
    if not x:
        return [], *([] for _ in ys)
    xs = [x[0]]
    for t in x[1:]:
        xs.extend((t, t))
    stepped = []
    for y in ys:
        values = []
        for i, v in enumerate(y):
            values.extend((v, v) if i < len(y) - 1 else (v,))
        stepped.append(values)
    return xs, *stepped


def colour_map(names: Sequence[str]) -> dict[str, str]:
    mapping = {name: COLOURS[i % len(COLOURS)] for i, name in enumerate(names)}
    mapping[OTHER] = OTHER_COLOUR
    return mapping


def top(
    scores: dict[str, tuple[float, ...]], limit: int = MAX_SERIES
) -> tuple[list[str], list[str]]:
    """The ``limit`` names with the highest scores (compared in order, then by name) and the
    rest, both by name; when only one name would be left over it is kept, not called "other"."""
    ranked = sorted(scores, key=lambda n: (tuple(-x for x in scores[n]), n))
    if len(ranked) <= limit + 1:
        return sorted(ranked), []
    return sorted(ranked[:limit]), sorted(ranked[limit:])


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def cluster_lines(
    series: Series, resource: str, shown: list[str], rest: list[str]
) -> dict[str, list[float]]:
    lines = {
        c: series.cluster_utilisation[c][resource]
        for c in shown
        if resource in series.cluster_utilisation.get(c, {})
    }
    others = [
        series.cluster_utilisation[c][resource]
        for c in rest
        if resource in series.cluster_utilisation.get(c, {})
    ]
    if others:
        lines[OTHER] = [mean(column) for column in zip(*others, strict=True)]
    return lines


def queue_ranking(runs: Sequence[RunResult]) -> tuple[list[str], list[str]]:
    """The queues drawn on their own (most mean GPU usage in any run, then most jobs) and the
    rest, the same in every queue plot so that a queue keeps its colour."""
    usage: dict[str, float] = {}
    jobs: dict[str, int] = {}
    for run in runs:
        for queue, resources in run.series.queue_usage.items():
            usage[queue] = max(usage.get(queue, 0.0), mean(resources.get(GPU, [])))
        for queue in run.series.queue_guarantee:
            usage.setdefault(queue, 0.0)
        for job in run.jobs:
            usage.setdefault(job.queue, 0.0)
            jobs[job.queue] = jobs.get(job.queue, 0) + 1
    return top({q: (u, jobs.get(q, 0)) for q, u in usage.items()})


def dash_map(names: Sequence[str]) -> dict[str, object]:
    mapping: dict[str, object] = {
        name: GUARANTEE_DASHES[i % len(GUARANTEE_DASHES)] for i, name in enumerate(names)
    }
    mapping[OTHER] = "-"
    return mapping


def guarantee_name(queue: str, others: int) -> str:
    return text(queue) if queue != OTHER else f"other ({others} queues, summed)"


def queue_bands(series: Series, shown: list[str], rest: list[str]) -> dict[str, list[float]]:
    width = len(series.times)
    bands = {q: series.queue_usage[q][GPU] for q in shown if GPU in series.queue_usage.get(q, {})}
    others = [series.queue_usage[q][GPU] for q in rest if GPU in series.queue_usage.get(q, {})]
    if others:
        bands[OTHER] = [sum(column) for column in zip(*others, strict=True)]
    for queue, values in bands.items():
        if len(values) != width:
            raise ValueError(
                f"series.queue_usage[{queue!r}][{GPU!r}] has {len(values)} samples, "
                f"series.times has {width}"
            )
    return bands


def guarantee(run: RunResult, queue: str) -> float:
    """The queue's GPU guarantee: from the series, else from the summary's queue entry."""
    found = run.series.queue_guarantee.get(queue, {}).get(GPU)
    if found is None:
        entry = run.summary.get("queues", {}).get(queue, {})
        found = entry.get("guarantee", {}).get(GPU) if isinstance(entry, dict) else None
    return float(found) if isinstance(found, int | float) else 0.0


def queue_guarantees(run: RunResult, shown: list[str], rest: list[str]) -> dict[str, float]:
    guarantees = {q: guarantee(run, q) for q in shown}
    if rest:
        guarantees[OTHER] = sum(guarantee(run, q) for q in rest)
    return guarantees


def cdf(waits: list[float], total: int) -> tuple[list[float], list[float]]:
    """Step points of the empirical CDF of ``waits`` among ``total`` jobs, starting at 0 h."""
    ordered = sorted(waits)
    x = [0.0, *ordered]
    y = [0.0, *((i + 1) / total for i in range(len(ordered)))]
    if ordered:
        x.append(ordered[-1] * 1.05 or 1.0)
        y.append(y[-1])
    return x, y
