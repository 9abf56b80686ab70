"""PNG plots of simulated runs; the only module that imports matplotlib.

Each plot is drawn on its own :class:`matplotlib.figure.Figure` with the Agg canvas (no pyplot,
so nothing global survives a call) and saved without the "Software" metadata key: the same runs
give the same bytes with the same matplotlib. Times on the x axes are hours since the first
submit of the trace. With several runs (``--compare``), a plot shows them side by side (one
column per run, shared axes) or overlaid (one line style per run), labelled by run label.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import NullLocator

from simulate.results import GPU, RunResult, Series

MAX_SERIES = 12
"""Most series drawn in one panel; the rest are summed (queues) or averaged (clusters) as
"other"."""
OTHER = "\x00other"
"""The key of the "other" series (no queue or cluster name starts with NUL)."""
HOUR = 3600.0
DPI = 100
COLOURS = (
    *("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2"),
    *("#17becf", "#bcbd22", "#393b79", "#ad494a", "#637939"),
)
OTHER_COLOUR = "#9e9e9e"
RUN_STYLES = ("-", "--", ":", "-.")

PLOT_FILES = {
    "utilisation": "utilisation.png",
    "queue_usage": "queue-usage.png",
    "wait_cdf": "wait-cdf.png",
    "fairness": "fairness.png",
}
"""Plot name → file name, in the order the report shows them."""

CAPTIONS = {
    "utilisation": "Utilisation over time: the share of each cluster's allocatable GPU (top) "
    "and CPU (bottom) in use.",
    "queue_usage": "GPUs admitted per queue, stacked; a dashed line in a queue's colour is its "
    "GPU guarantee.",
    "wait_cdf": "Wait time CDF per queue: the fraction of a queue's jobs admitted within a "
    "wait; a curve that ends below 1 has jobs never admitted.",
    "fairness": "Fairness over time: Jain's index of the busy queues' weighted GPU shares "
    "(1 = shares proportional to weights).",
}
"""Plot name → what it shows, one sentence (the report's figure captions)."""


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


def new_figure(columns: int, rows: int = 1, height: float = 4.2) -> Figure:
    figure = Figure(
        figsize=(4.0 + 5.2 * columns, 0.6 + height * rows), dpi=DPI, layout="constrained"
    )
    FigureCanvasAgg(figure)
    return figure


def save(figure: Figure, path: Path) -> Path:
    figure.savefig(path, format="png", dpi=DPI, metadata={"Software": None})
    return path


def no_data(axes: Axes, what: str) -> None:
    axes.text(0.5, 0.5, f"no {what}", ha="center", va="center", transform=axes.transAxes)


def outside_legend(figure: Figure, handles: list, labels: list[str], title: str) -> None:
    if handles:
        figure.legend(handles, labels, loc="outside right upper", title=title, fontsize="small")


def utilisation_plot(runs: Sequence[RunResult], path: Path) -> Path:
    """Fraction of each cluster's allocatable GPU (top row) and cpu (bottom row) in use."""
    scores: dict[str, float] = {}
    for run in runs:
        for cluster, resources in run.series.cluster_utilisation.items():
            score = mean(resources.get(GPU, []))
            scores[cluster] = max(scores.get(cluster, 0.0), score)
    shown, rest = top({cluster: (score,) for cluster, score in scores.items()})
    colours = colour_map(shown)
    figure = new_figure(len(runs), rows=2, height=3.2)
    grid = figure.subplots(2, len(runs), sharex=True, sharey=True, squeeze=False)
    handles: dict[str, Line2D] = {}
    for column, run in enumerate(runs):
        x = hours(run.series.times)
        for row, (resource, title) in enumerate(((GPU, "GPU"), ("cpu", "CPU"))):
            axes = grid[row][column]
            lines = cluster_lines(run.series, resource, shown, rest)
            for name, values in lines.items():
                (line,) = axes.plot(
                    x,
                    [100 * v for v in values],
                    color=colours[name],
                    linewidth=1.3,
                    drawstyle="steps-post",
                )
                handles.setdefault(name, line)
            if not lines:
                no_data(axes, f"{title} samples")
            axes.set_title(f"{text(run.label)}: {title} utilisation per cluster")
            axes.set_ylim(0, 105)
            axes.grid(alpha=0.3)
            if column == 0:
                axes.set_ylabel(f"{title} in use (% of allocatable)")
            if row == 1:
                axes.set_xlabel("time (hours)")
    names = [n for n in [*shown, OTHER] if n in handles]
    labels = [text(n) if n != OTHER else f"other ({len(rest)} clusters, mean)" for n in names]
    outside_legend(figure, [handles[n] for n in names], labels, "cluster")
    return save(figure, path)


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


def queue_usage_plot(runs: Sequence[RunResult], path: Path) -> Path:
    """GPUs admitted per queue, stacked; each queue's GPU guarantee as a dashed line."""
    shown, rest = queue_ranking(runs)
    colours = colour_map(shown)
    figure = new_figure(len(runs))
    grid = figure.subplots(1, len(runs), sharex=True, sharey=True, squeeze=False)
    handles: dict[str, object] = {}
    for column, run in enumerate(runs):
        axes = grid[0][column]
        x = hours(run.series.times)
        bands = queue_bands(run.series, shown, rest)
        if bands and x:
            stepped_x, *stepped = steps(x, *bands.values())
            areas = axes.stackplot(
                stepped_x,
                *stepped,
                colors=[colours[q] for q in bands],
                alpha=0.8,
                linewidth=0,
            )
            for queue, area in zip(bands, areas, strict=True):
                handles.setdefault(queue, area)
        else:
            no_data(axes, "GPU usage samples")
        for queue, guarantee in queue_guarantees(run, shown, rest).items():
            if guarantee > 0:
                axes.axhline(guarantee, color=colours[queue], linestyle="--", linewidth=1.2)
        axes.set_title(f"{text(run.label)}: GPUs in use per queue (stacked)")
        axes.set_xlabel("time (hours)")
        axes.grid(alpha=0.3)
        if column == 0:
            axes.set_ylabel("GPUs admitted (devices)")
    names = [n for n in [*shown, OTHER] if n in handles][::-1]  # top of the stack first
    labels = [text(n) if n != OTHER else f"other ({len(rest)} queues, summed)" for n in names]
    guarantee = Line2D([], [], color="black", linestyle="--", linewidth=1.2)
    outside_legend(
        figure,
        [*(handles[n] for n in names), guarantee],
        [*labels, "guarantee (dashed, queue colour)"],
        "queue",
    )
    return save(figure, path)


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


def wait_cdf_plot(runs: Sequence[RunResult], path: Path) -> Path:
    """Empirical CDF of each queue's waits (submit → last admission) over all its jobs; a job
    never admitted counts as an infinite wait, so a curve ends below 1 by that fraction."""
    shown, rest = queue_ranking(runs)
    colours = colour_map(shown)
    figure = new_figure(1)
    axes = figure.subplots()
    drawn: list[str] = []
    longest = 0.0
    for index, run in enumerate(runs):
        waits: dict[str, list[float]] = {}
        totals: dict[str, int] = {}
        for job in run.jobs:
            key = job.queue if job.queue in shown else OTHER
            totals[key] = totals.get(key, 0) + 1
            if job.wait is not None:
                waits.setdefault(key, []).append(job.wait / HOUR)
        for queue in [n for n in [*shown, OTHER] if n in totals]:
            x, y = cdf(waits.get(queue, []), totals[queue])
            longest = max(longest, x[-1])
            style = RUN_STYLES[index % len(RUN_STYLES)]
            axes.step(x, y, where="post", color=colours[queue], linestyle=style, linewidth=1.4)
            if queue not in drawn:
                drawn.append(queue)
    if not drawn:
        no_data(axes, "jobs")
    axes.set_title("Wait time CDF per queue (submit to admission)")
    wait_axis(axes, longest)
    axes.set_ylabel("fraction of the queue's jobs admitted")
    axes.set_ylim(0, 1.02)
    axes.grid(alpha=0.3)
    handles = [Line2D([], [], color=colours[q], linewidth=2) for q in drawn]
    labels = [text(q) if q != OTHER else f"other ({len(rest)} queues)" for q in drawn]
    if len(runs) > 1:
        for index, run in enumerate(runs):
            style = RUN_STYLES[index % len(RUN_STYLES)]
            handles.append(Line2D([], [], color="black", linestyle=style))
            labels.append(f"run: {text(run.label)}")
    outside_legend(figure, handles, labels, "queue")
    return save(figure, path)


WAIT_TICKS = ((0.0, "0"), (1 / 60, "1 min"), (1 / 6, "10 min"), (1.0, "1 h"), (10.0, "10 h"))


def wait_axis(axes: Axes, longest: float) -> None:
    """Waits in hours on a scale linear up to a minute and logarithmic beyond: most waits are
    short, and the tail can be days."""
    axes.set_xscale("symlog", linthresh=1 / 60, linscale=0.4)
    ticks = [*WAIT_TICKS, *((10.0**e, f"{10**e:.0f} h") for e in range(2, 6))]
    shown = [(at, label) for at, label in ticks if at <= max(longest, 1.0) * 1.5]
    axes.set_xticks([at for at, _ in shown], labels=[label for _, label in shown])
    axes.xaxis.set_minor_locator(NullLocator())
    axes.set_xlim(0, max(longest, 1.0) * 1.2)
    axes.set_xlabel("wait (hours; linear to 1 min, logarithmic beyond)")


def cdf(waits: list[float], total: int) -> tuple[list[float], list[float]]:
    """Step points of the empirical CDF of ``waits`` among ``total`` jobs, starting at 0 h."""
    ordered = sorted(waits)
    x = [0.0, *ordered]
    y = [0.0, *((i + 1) / total for i in range(len(ordered)))]
    if ordered:
        x.append(ordered[-1] * 1.05 or 1.0)
        y.append(y[-1])
    return x, y


def fairness_plot(runs: Sequence[RunResult], path: Path) -> Path:
    """Jain's index of the busy queues' weighted GPU shares over time, one line per run; gaps
    where fewer than two queues wanted GPUs."""
    figure = new_figure(1, height=3.6)
    axes = figure.subplots()
    handles, labels = [], []
    for index, run in enumerate(runs):
        values = [math.nan if v is None else v for v in run.series.fairness]
        style = RUN_STYLES[index % len(RUN_STYLES)]
        (line,) = axes.plot(
            hours(run.series.times),
            values,
            linestyle=style,
            color=COLOURS[index],
            linewidth=1.4,
            drawstyle="steps-post",
        )
        summary = run.summary.get("fairness", {})
        jain_mean = summary.get("jain_mean") if isinstance(summary, dict) else None
        average = f"mean {jain_mean:.3f}" if isinstance(jain_mean, int | float) else "no mean"
        handles.append(line)
        labels.append(f"{text(run.label)} ({average})")
    if not any(run.series.times for run in runs):
        no_data(axes, "samples")
    axes.set_title("Fairness over time: Jain's index of weighted GPU shares (1 = fair)")
    axes.set_xlabel("time (hours)")
    axes.set_ylabel("Jain's index")
    axes.set_ylim(0, 1.05)
    axes.grid(alpha=0.3)
    outside_legend(figure, handles, labels, "run")
    return save(figure, path)


PLOTTERS: dict[str, Callable[[Sequence[RunResult], Path], Path]] = {
    "utilisation": utilisation_plot,
    "queue_usage": queue_usage_plot,
    "wait_cdf": wait_cdf_plot,
    "fairness": fairness_plot,
}


def write_plots(out_dir: Path, runs: Sequence[RunResult]) -> list[Path]:
    """Draw every plot of ``runs`` into ``out_dir``; the paths in :data:`PLOT_FILES` order."""
    if not runs:
        raise ValueError("write_plots: no runs to plot")
    return [PLOTTERS[name](runs, out_dir / file) for name, file in PLOT_FILES.items()]
