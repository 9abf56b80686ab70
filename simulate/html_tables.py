"""HTML tables of run summaries: a row per key of a section (queues, sizes, …) or per metric of
the whole run, a column (group) per run and, with two runs, a Δ column: the first run minus the
second, in the shown unit. Every string from a trace, a policy or a summary is escaped."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape
from typing import Any

from simulate.results import RunResult

Getter = Callable[[dict[str, Any], str], Any]
"""(summary, row key) → the cell's value, None when absent."""


def number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def dig(value: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def duration(seconds: float, signed: bool = False) -> str:
    sign = "+" if signed and seconds > 0 else ""
    size = abs(seconds)
    if size < 60:
        return f"{sign}{seconds:.0f} s"
    if size < 3600:
        return f"{sign}{seconds / 60:.1f} min"
    return f"{sign}{seconds / 3600:.2f} h"


def percent(fraction: float, signed: bool = False) -> str:
    if signed:
        return f"{100 * fraction:+.1f} pp"
    return f"{100 * fraction:.1f} %"


def count(value: float, signed: bool = False) -> str:
    return f"{value:+.0f}" if signed else f"{value:.0f}"


def decimal(value: float, signed: bool = False) -> str:
    return f"{value:+.2f}" if signed else f"{value:.2f}"


def index(value: float, signed: bool = False) -> str:
    return f"{value:+.3f}" if signed else f"{value:.3f}"


@dataclass(frozen=True, slots=True)
class Metric:
    header: str
    get: Getter
    show: Callable[..., str]
    diff: bool = True
    """With two runs, whether a Δ column follows (not for names)."""


def cells(metric: Metric, summaries: Sequence[dict[str, Any]], key: str) -> list[str]:
    raw = [metric.get(summary, key) for summary in summaries]
    out = [td(raw_value, metric.show) for raw_value in raw]
    if len(summaries) == 2 and metric.diff:
        a, b = number(raw[0]), number(raw[1])
        delta = "—" if a is None or b is None else metric.show(a - b, signed=True)
        if a is not None and b is not None and not any(d in delta for d in "123456789"):
            delta = "0"  # "+0.0 pp", "-0 s": no difference at the precision shown
        out.append(f'<td class="d">{escape(delta)}</td>')
    return out


def td(value: Any, show: Callable[..., str]) -> str:
    if value is None:
        return '<td class="n">—</td>'
    numeric = number(value)
    if numeric is None:
        return f"<td>{escape(str(value))}</td>"
    return f'<td class="n">{escape(show(numeric))}</td>'


def headers(metrics: Sequence[Metric], labels: Sequence[str]) -> tuple[str, str]:
    """Two header rows: metric names, then (with several runs) the run labels and Δ."""
    if len(labels) == 1:
        return "".join(f"<th>{escape(m.header)}</th>" for m in metrics), ""
    names = [escape(label) for label in labels]
    delta = "Δ" if len(labels) == 2 else None
    top, second = [], []
    for metric in metrics:
        group = [*names, delta] if delta and metric.diff else names
        top.append(f'<th colspan="{len(group)}">{escape(metric.header)}</th>')
        second.extend(f"<th>{name}</th>" for name in group)
    return "".join(top), "".join(second)


def keyed_table(
    caption: str,
    key_header: str,
    section: str,
    metrics: Sequence[Metric],
    runs: Sequence[RunResult],
    keys: Sequence[str] | None = None,
) -> str:
    """One row per key of ``summary[section]`` over all runs (by name, or the ``keys`` given),
    one column group per metric."""
    summaries = [run.summary for run in runs]
    if keys is None:
        keys = sorted({str(k) for s in summaries for k in (dig(s, section) or {})})
    if not keys:
        return f"<h3>{escape(caption)}</h3><p>None in this run.</p>"
    top, second = headers(metrics, [run.label for run in runs])
    rowspan = ' rowspan="2"' if second else ""
    head = f"<tr><th{rowspan}>{escape(key_header)}</th>{top}</tr>"
    if second:
        head += f"<tr>{second}</tr>"
    body = []
    for key in keys:
        row = [c for metric in metrics for c in cells(metric, summaries, key)]
        body.append(f"<tr><th>{escape(key)}</th>{''.join(row)}</tr>")
    return (
        f'<h3>{escape(caption)}</h3><div class="scroll"><table><thead>{head}</thead>'
        f"<tbody>{''.join(body)}</tbody></table></div>"
    )


def scalar_table(caption: str, rows: Sequence[Metric], runs: Sequence[RunResult]) -> str:
    """One row per metric of the whole run that some run has; a column per run (and Δ with
    two)."""
    summaries = [run.summary for run in runs]
    rows = [m for m in rows if any(m.get(summary, "") is not None for summary in summaries)]
    if not rows:
        return ""
    labels = [escape(run.label) for run in runs]
    if len(runs) == 2:
        labels.append("Δ")
    head = "<tr><th></th>" + "".join(f"<th>{label}</th>" for label in labels) + "</tr>"
    body = [f"<tr><th>{escape(m.header)}</th>{''.join(cells(m, summaries, ''))}</tr>" for m in rows]
    return (
        f"<h3>{escape(caption)}</h3><table><thead>{head}</thead>"
        f"<tbody>{''.join(body)}</tbody></table>"
    )


def field(section: str, *path: str) -> Getter:
    return lambda summary, key: dig(summary, section, key, *path)


def whole(*path: str) -> Getter:
    return lambda summary, _key: dig(summary, *path)


def percentiles(section: str, what: str) -> list[Metric]:
    return [
        Metric(f"{what} {p}", field(section, f"{what}_s", p), duration)
        for p in ("p50", "p95", "p99", "max")
    ]
