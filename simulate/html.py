"""``report.html``: the plots and the numbers of one or two runs, readable from disk.

Every string that comes from a trace, a policy or a summary (queue, tenant, cluster and stage
names, run labels, versions) is HTML-escaped. With two runs each number has a column per run and
a Δ column: the first run minus the second (e.g. head − baseline). Jobs never admitted by the
end of a run get a note under the Jobs table and a table by the reason of their last decision.
The tables' machinery is :mod:`simulate.html_tables`; the tables by job size and of the queues'
starts and preemptions are :mod:`simulate.html_jobs`.

The one script only counts the plots that loaded: it sets ``data-plots-loaded`` on ``<body>``
(``data-plots`` says how many there are) and shows a warning when a PNG is missing beside the
page (e.g. report.html copied alone).
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Any

from simulate import html_jobs
from simulate.html_tables import (
    Getter,
    Metric,
    count,
    decimal,
    dig,
    duration,
    field,
    index,
    keyed_table,
    number,
    percent,
    percentiles,
    scalar_table,
    whole,
)
from simulate.results import GPU, RunResult

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; max-width: 1400px; }
h1 { margin-bottom: 0.2em; } h2 { margin-top: 1.6em; border-bottom: 1px solid #ddd; }
figure { margin: 1.2em 0; } figure img { max-width: 100%; border: 1px solid #eee; }
figcaption { color: #555; font-size: 0.9em; }
table { border-collapse: collapse; margin: 0.6em 0 1.2em; font-size: 0.9em; }
th, td { border: 1px solid #ddd; padding: 0.25em 0.6em; }
th { background: #f4f4f4; } tbody th { text-align: left; }
td { white-space: nowrap; } td.n { text-align: right; font-variant-numeric: tabular-nums; }
td.d { text-align: right; color: #555; font-variant-numeric: tabular-nums; }
.scroll { overflow-x: auto; } #missing-plots { color: #b00020; font-weight: bold; }
"""

SCRIPT = """
window.addEventListener("load", function () {
  var images = document.querySelectorAll("img.plot");
  var loaded = 0;
  images.forEach(function (image) {
    if (image.complete && image.naturalWidth > 0) { loaded += 1; }
  });
  document.body.setAttribute("data-plots-loaded", String(loaded));
  if (loaded < images.length) { document.getElementById("missing-plots").hidden = false; }
});
"""


def weight_share(summary: dict[str, Any], key: str) -> float | None:
    """The queue's weight over the sum of all queues' weights: its fair share of a full fleet."""
    queues = dig(summary, "queues") or {}
    weights = {q: number(dig(queues, q, "weight")) for q in queues}
    total = sum(w for w in weights.values() if w is not None)
    mine = weights.get(key)
    return None if mine is None or total <= 0 else mine / total


JOB_COUNTS = ("total", "finished", "succeeded", "failed", "gave_up", "pending", "running")
NEVER_COUNTS = ("never_admitted", "never_fits")
JOB_EVENTS = ("rescheduled", "preemptions")
HEADERS = {"never_fits": "jobs never admitted: NeverFits"}
BY_REASON = "never_admitted_by_reason"


def job_counters(runs: Sequence[RunResult]) -> list[str]:
    """The documented job counters, then any other number the summaries have, by name."""
    known = {*JOB_COUNTS, *NEVER_COUNTS, *JOB_EVENTS, *html_jobs.JOB_KEYS}
    known |= {"gpu_hours_lost", "never_admitted_gpu_hours"}
    extra = {
        str(key)
        for run in runs
        for key, value in (dig(run.summary, "jobs") or {}).items()
        if key not in known and number(value) is not None
    }
    return [*JOB_COUNTS, *NEVER_COUNTS, *JOB_EVENTS, *sorted(extra)]


def never_admitted(runs: Sequence[RunResult]) -> str:
    """A note on the jobs never admitted (they count in the waits until the end) and a table of
    them by the reason of their last decision; nothing when every job was admitted."""
    if not any(number(dig(run.summary, "jobs", "never_admitted")) for run in runs):
        return ""
    notes = []
    for run in runs:
        jobs = dig(run.summary, "jobs") or {}
        never, asked, fits = (
            escape(str(jobs.get(k, "—")))
            for k in ("never_admitted", "never_admitted_gpu_hours", "never_fits")
        )
        notes.append(
            f"<b>{escape(run.label)}</b>: {never} jobs never admitted ({asked} GPU-hours asked), "
            f"of which NeverFits {fits}"
        )
    reasons = sorted({str(k) for run in runs for k in dig(run.summary, "jobs", BY_REASON) or {}})

    def per_reason(reason: str) -> Getter:
        return lambda s, _key: (dig(s, "jobs", BY_REASON) or {}).get(reason, 0)

    rows = [Metric(reason, per_reason(reason), count) for reason in reasons]
    return (
        f"<p>{'; '.join(notes)}. Every wait (all jobs, queues, tenants, stages) counts a job "
        "never admitted as waiting until the end of the run: a lower bound of its wait.</p>"
        + scalar_table("Jobs never admitted, by the reason of their last decision", rows, runs)
    )


def overview(runs: Sequence[RunResult]) -> str:
    jobs = [
        Metric(HEADERS.get(n, f"jobs {n.replace('_', ' ')}"), whole("jobs", n), count)
        for n in job_counters(runs)
    ]
    jobs.append(Metric("GPU-hours lost", whole("jobs", "gpu_hours_lost"), decimal))
    asked = Metric(
        "GPU-hours asked, never admitted", whole("jobs", "never_admitted_gpu_hours"), decimal
    )
    jobs.append(asked)
    for what, whom in (("wait", "all jobs, never admitted: until the end"), ("completion", "")):
        jobs.extend(
            Metric(f"{what} {p} ({whom or 'all jobs'})", whole("jobs", f"{what}_s", p), duration)
            for p in ("p50", "p95", "p99", "max")
        )
    jobs.extend(html_jobs.job_rows())
    fleet = [
        Metric("GPU utilisation (mean)", whole("gpu_utilisation_mean"), percent),
        Metric(
            "GPU utilisation, first to last submit", whole("gpu_utilisation_arrival_span"), percent
        ),
        Metric("first to last submit", whole("arrival_span_s"), duration),
        Metric("fragmented GPUs (mean)", whole("fragmentation_gpu_mean"), decimal),
        Metric("simulated time", whole("until_s"), duration),
        Metric("scheduling cycles", whole("cycles"), count),
    ]
    fairness = [
        Metric("Jain's index, mean", whole("fairness", "jain_mean"), index),
        Metric("Jain's index, min", whole("fairness", "jain_min"), index),
        Metric("fair-share attainment, mean", whole("fairness", "attainment_mean"), index),
        Metric("fair-share attainment, min", whole("fairness", "attainment_min"), index),
        Metric("window", whole("fairness", "window_s"), duration),
        Metric("windows", whole("fairness", "windows"), count),
    ]
    return "".join(
        (
            scalar_table("Jobs", jobs, runs),
            never_admitted(runs),
            scalar_table("Fleet", fleet, runs),
            scalar_table("Fairness", fairness, runs),
        )
    )


def queue_tables(runs: Sequence[RunResult]) -> str:
    counts = [
        Metric("tenant", field("queues", "tenant"), str, diff=False),
        Metric("jobs", field("queues", "jobs"), count),
        Metric("admitted", field("queues", "admitted"), count),
    ]
    share = [
        Metric("weight", field("queues", "weight"), decimal),
        Metric("weight share", weight_share, percent),
        Metric("GPU share (mean while busy)", field("queues", "share_mean"), percent),
        Metric("GPU guarantee", field("queues", "guarantee", GPU), decimal),
        Metric("fair-share attainment", field("queues", "attainment_mean"), index),
    ]
    return "".join(
        (
            keyed_table("Queues: jobs", "queue", "queues", counts, runs),
            keyed_table("Queues: wait", "queue", "queues", percentiles("queues", "wait"), runs),
            keyed_table(
                "Queues: completion (submit to finish)",
                "queue",
                "queues",
                percentiles("queues", "completion"),
                runs,
            ),
            keyed_table("Queues: share vs weight", "queue", "queues", share, runs),
            html_jobs.queue_tables(runs),
        )
    )


def other_tables(runs: Sequence[RunResult]) -> str:
    tenants = [
        Metric("jobs", field("tenants", "jobs"), count),
        Metric("admitted", field("tenants", "admitted"), count),
        *percentiles("tenants", "wait")[:2],
        Metric("GPU share (mean while busy)", field("tenants", "share_mean"), percent),
    ]
    clusters = [
        Metric("GPU utilisation", field("clusters", "utilisation", GPU), percent),
        Metric("CPU utilisation", field("clusters", "utilisation", "cpu"), percent),
        Metric("memory utilisation", field("clusters", "utilisation", "memory"), percent),
        Metric("fragmented GPUs (mean)", field("clusters", "fragmentation_gpu_mean"), decimal),
    ]
    stages = [Metric("jobs", field("stages", "jobs"), count), *percentiles("stages", "wait")]
    parts = [
        keyed_table("Tenants", "tenant", "tenants", tenants, runs),
        keyed_table("Clusters (time-weighted means)", "cluster", "clusters", clusters, runs),
    ]
    if any(dig(run.summary, "stages") for run in runs):
        parts.append(keyed_table("Pipeline stages", "stage", "stages", stages, runs))
    return "".join(parts)


def run_line(run: RunResult) -> str:
    s = run.summary
    facts = [
        ("policy version", dig(s, "policy_version")),
        ("seed", dig(s, "seed")),
        ("simulated", None if number(dig(s, "until_s")) is None else duration(s["until_s"])),
        ("wall time", None if number(dig(s, "wall_s")) is None else f"{s['wall_s']:.1f} s"),
    ]
    shown = ", ".join(f"{name} {escape(str(v))}" for name, v in facts if v is not None)
    return f"<li><b>{escape(run.label)}</b>{': ' + shown if shown else ''}</li>"


def difference_note(runs: Sequence[RunResult]) -> str:
    if len(runs) != 2:
        return ""
    first, second = (f"<b>{escape(run.label)}</b>" for run in runs)
    return f"<p>Δ = {first} − {second}; pp = percentage points; — = no value.</p>"


def figures(images: Sequence[tuple[str, str]]) -> str:
    out = []
    for name, caption in images:
        out.append(
            f'<figure><img class="plot" src="{escape(name)}" alt="{escape(caption)}">'
            f"<figcaption>{escape(caption)}</figcaption></figure>"
        )
    return "".join(out)


def render(runs: Sequence[RunResult], images: Sequence[tuple[str, str]]) -> str:
    """The page for ``runs`` whose plots are ``images``: (file name beside it, caption)."""
    labels = " vs ".join(run.label for run in runs)
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>fleetgate simulation: {escape(labels)}</title>
<style>{STYLE}</style>
</head>
<body data-plots="{len(images)}">
<h1>fleetgate simulation report</h1>
<ul>{"".join(run_line(run) for run in runs)}</ul>
<p id="missing-plots" hidden>Some plots did not load: keep the PNG files beside
report.html.</p>
<p>Files beside this page: summary.json (these numbers), jobs.csv (one row per job).
Times are since the first submit of the trace.</p>
<h2>Plots</h2>
{figures(images)}
<h2>Numbers</h2>
{difference_note(runs)}
{overview(runs)}
{html_jobs.size_tables(runs)}
{queue_tables(runs)}
{other_tables(runs)}
<script>{SCRIPT}</script>
</body>
</html>
"""
