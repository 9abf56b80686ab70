"""PNG plots of simulated runs; the only module that imports matplotlib (what to draw, without
drawing it, is :mod:`simulate.plotdata`).

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

from simulate.plotdata import (
    COLOURS,
    HOUR,
    OTHER,
    RUN_STYLES,
    cdf,
    cluster_lines,
    colour_map,
    dash_map,
    guarantee_name,
    hours,
    mean,
    queue_bands,
    queue_guarantees,
    queue_ranking,
    steps,
    text,
    top,
)
from simulate.plotdata import (
    MAX_SERIES as MAX_SERIES,  # re-exported: the report tests read plots.MAX_SERIES
)
from simulate.results import GPU, RunResult

DPI = 100

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
    "queue_usage": "GPUs admitted per queue, stacked; a line in a queue's colour and its own dash "
    "pattern, labelled with the queue's name, is its GPU guarantee.",
    "wait_cdf": "Wait time CDF per queue: the fraction of a queue's jobs admitted within a "
    "wait; a curve that ends below 1 has jobs never admitted.",
    "fairness": "Fairness over time: Jain's index of the busy queues' weighted GPU shares "
    "(1 = shares proportional to weights).",
}
"""Plot name → what it shows, one sentence (the report's figure captions)."""


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


def queue_usage_plot(runs: Sequence[RunResult], path: Path) -> Path:
    """GPUs admitted per queue, stacked; each queue's GPU guarantee as a line in the queue's
    colour with its own dash pattern, labelled at its right end and in the legend."""
    shown, rest = queue_ranking(runs)
    colours = colour_map(shown)
    dashes = dash_map(shown)
    lines: dict[str, Line2D] = {}
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
        guarantees = {q: g for q, g in queue_guarantees(run, shown, rest).items() if g > 0}
        for queue, guarantee in guarantees.items():
            lines[queue] = axes.axhline(
                guarantee, color=colours[queue], linestyle=dashes[queue], linewidth=1.4
            )
        label_guarantees(axes, guarantees, colours, len(rest))
        axes.set_title(f"{text(run.label)}: GPUs in use per queue (stacked)")
        axes.set_xlabel("time (hours)")
        axes.grid(alpha=0.3)
        if column == 0:
            axes.set_ylabel("GPUs admitted (devices)")
    names = [n for n in [*shown, OTHER] if n in handles][::-1]  # top of the stack first
    labels = [text(n) if n != OTHER else f"other ({len(rest)} queues, summed)" for n in names]
    guaranteed = [n for n in [*shown, OTHER] if n in lines]
    outside_legend(
        figure,
        [*(handles[n] for n in names), *(lines[n] for n in guaranteed)],
        [*labels, *(f"{guarantee_name(n, len(rest))} guarantee" for n in guaranteed)],
        "queue",
    )
    return save(figure, path)


def label_guarantees(
    axes: Axes, guarantees: dict[str, float], colours: dict[str, str], others: int
) -> None:
    """Each guarantee line's queue name at its right end, inside the axes; queues with the same
    guarantee share one label (names joined, in the first one's colour)."""
    by_height: dict[float, list[str]] = {}
    for queue, value in guarantees.items():
        by_height.setdefault(value, []).append(queue)
    for value, queues in sorted(by_height.items()):
        axes.annotate(
            ", ".join(guarantee_name(q, others) for q in queues),
            xy=(1.0, value),
            xycoords=("axes fraction", "data"),
            xytext=(-4, 2),
            textcoords="offset points",
            ha="right",
            va="bottom",
            fontsize="x-small",
            color=colours[queues[0]],
        )


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
