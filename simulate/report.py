"""Write a simulation report: ``summary.json``, ``jobs.csv``, PNG plots and ``report.html``.

``summary.json`` is always ``{"runs": [summary, …]}``, one summary per run in the order given
(one run, or two with ``--compare``); each summary is the object documented in
:mod:`simulate.results`, with any non-finite float written as ``null``.

``jobs.csv`` has one row per job per run, in run order, then by submit time and name; the
columns are :data:`JOB_COLUMNS`. Times are seconds since the start of the simulation; an empty
cell is "never" (not admitted, not finished) or "none" (no cluster, no stage, no reason: the
last decision's ``reason`` is given only for a job still waiting at the end).

``report.html`` refers to the PNGs beside it by relative path, so the report directory opens
from disk in a browser (file://) without a server; it holds no timestamp, so the same runs give
the same report.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from simulate import html, plots
from simulate.results import JobRecord, RunResult

SUMMARY_FILE = "summary.json"
JOBS_FILE = "jobs.csv"
HTML_FILE = "report.html"

JOB_COLUMNS = (
    "run",
    "name",
    "queue",
    "tenant",
    "kind",
    "stage",
    "state",
    "cluster",
    "gpus",
    "submitted_s",
    "admitted_s",
    "finished_s",
    "wait_s",
    "attempts",
    "preemptions",
    "reason",
    "started_s",
    "gpu_hours_lost_to_preemption",
)


def write_report(out_dir: Path, runs: list[RunResult]) -> list[Path]:
    """Write the report of ``runs`` into ``out_dir`` (created if missing) and return the paths
    written: summary.json, jobs.csv, the PNGs, report.html."""
    if not runs:
        raise ValueError("write_report: no runs to report")
    labels = [run.label for run in runs]
    if len(set(labels)) != len(labels):
        raise ValueError(f"write_report: run labels must differ, got {labels}")
    out_dir.mkdir(parents=True, exist_ok=True)
    summary = write_summary(out_dir / SUMMARY_FILE, runs)
    jobs = write_jobs(out_dir / JOBS_FILE, runs)
    images = plots.write_plots(out_dir, runs)
    captions = [plots.CAPTIONS[name] for name in plots.PLOT_FILES]
    figures = [(image.name, caption) for image, caption in zip(images, captions, strict=True)]
    page = out_dir / HTML_FILE
    page.write_text(html.render(runs, figures), encoding="utf-8")
    return [summary, jobs, *images, page]


def finite(value: Any) -> Any:
    """``value`` with every NaN or infinity replaced by None, so the JSON is standard."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite(v) for v in value]
    return value


def write_summary(path: Path, runs: Sequence[RunResult]) -> Path:
    document = {"runs": [finite(run.summary) for run in runs]}
    try:
        body = json.dumps(document, indent=2, sort_keys=True, allow_nan=False)
    except TypeError as error:
        raise ValueError(f"{path.name}: a run summary is not JSON-ready: {error}") from error
    path.write_text(body + "\n", encoding="utf-8")
    return path


def cell(value: float | str | None) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else ""
    return str(value)


def job_row(label: str, job: JobRecord) -> list[str]:
    values = (
        label,
        job.name,
        job.queue,
        job.tenant,
        job.kind,
        job.stage,
        job.state,
        job.cluster,
        float(job.gpus),
        float(job.submitted),
        None if job.admitted is None else float(job.admitted),
        None if job.finished is None else float(job.finished),
        None if job.wait is None else float(job.wait),
        str(int(job.attempts)),
        str(int(job.preemptions)),
        job.reason,
        None if job.started is None else float(job.started),
        round(job.preempted_gpu_s / 3600, 6),
    )
    return [cell(v) for v in values]


def write_jobs(path: Path, runs: Sequence[RunResult]) -> Path:
    with path.open("w", encoding="utf-8", newline="") as stream:
        writer = csv.writer(stream, lineterminator="\n")
        writer.writerow(JOB_COLUMNS)
        for run in runs:
            for job in sorted(run.jobs, key=lambda j: (j.submitted, j.name)):
                writer.writerow(job_row(run.label, job))
    return path
