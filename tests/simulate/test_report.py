"""The simulation report: files, valid PNGs, summary/CSV round trips, escaping, and the page in
headless Chromium (no console message, every plot loaded)."""

from __future__ import annotations

import csv
import json
import math
import os
import random
import re
import signal
import subprocess
from pathlib import Path

import numpy as np
import pytest
from matplotlib.image import imread

from simulate import html, plots
from simulate.report import JOB_COLUMNS, write_report
from simulate.results import GPU, JobRecord, RunResult, Series
from tests.conftest import require_tool

HOSTILE = "<script>alert(1)</script>"
QUEUES = {"train": (2.0, 16.0), "infer": (1.0, 8.0), HOSTILE: (1.0, 0.0)}  # weight, GPU guarantee
CLUSTERS = {"east": 64.0, "west": 32.0}  # GPUs
STEP = 600.0
SAMPLES = 300
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def synthetic_jobs(rng: random.Random, count: int, slowness: float) -> list[JobRecord]:
    jobs = []
    end = STEP * SAMPLES
    for i in range(count):
        queue = rng.choice(sorted(QUEUES))
        submitted = rng.uniform(0, end * 0.8)
        gpus = float(rng.choice((1, 2, 4, 8)))
        state = "pending"
        admitted = finished = cluster = None
        if rng.random() < 0.9:
            admitted = submitted + rng.expovariate(1 / (1800 * slowness))
            finished = admitted + rng.uniform(1800, 6 * 3600)
            cluster = rng.choice(sorted(CLUSTERS))
            state = "succeeded" if finished < end else "running"
            finished = finished if finished < end else None
        jobs.append(
            JobRecord(f"job-{i:03d}", queue, f"team-{queue[:5]}", "Job", submitted, admitted,
                      finished, state, cluster, gpus, attempts=i % 3, preemptions=int(i % 7 == 0),
                      stage=("prepare", "fit", None, None)[i % 4])
        )  # fmt: skip
    return jobs


def running(job: JobRecord, t: float) -> bool:
    return job.admitted is not None and job.admitted <= t and (job.finished or math.inf) > t


def jain(shares: list[float]) -> float | None:
    busy = [s for s in shares if s > 0]
    if len(busy) < 2:
        return None
    return sum(busy) ** 2 / (len(busy) * sum(s * s for s in busy))


def synthetic_series(jobs: list[JobRecord], rng: random.Random) -> Series:
    series = Series(times=[i * STEP for i in range(SAMPLES)])
    series.queue_guarantee = {q: {GPU: g} for q, (_w, g) in QUEUES.items()}
    series.queue_usage = {q: {GPU: [], "cpu": []} for q in QUEUES}
    series.cluster_utilisation = {c: {GPU: [], "cpu": []} for c in CLUSTERS}
    series.cluster_fragmentation = {c: [] for c in CLUSTERS}
    for t in series.times:
        live = [j for j in jobs if running(j, t)]
        for q in QUEUES:
            gpus = sum(j.gpus for j in live if j.queue == q)
            series.queue_usage[q][GPU].append(gpus)
            series.queue_usage[q]["cpu"].append(gpus * 8)
        for c, capacity in CLUSTERS.items():
            used = min(1.0, sum(j.gpus for j in live if j.cluster == c) / capacity)
            series.cluster_utilisation[c][GPU].append(used)
            series.cluster_utilisation[c]["cpu"].append(min(1.0, used * 0.6 + rng.random() * 0.1))
            series.cluster_fragmentation[c].append(float(rng.randint(0, 3)))
        shares = [series.queue_usage[q][GPU][-1] / w for q, (w, _g) in QUEUES.items()]
        series.fairness.append(jain(shares))
    return series


def percentiles(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"p50": None, "p95": None, "p99": None, "max": None}
    ordered = sorted(values)
    pick = lambda p: ordered[min(len(ordered) - 1, int(p * len(ordered)))]  # noqa: E731
    return {"p50": pick(0.5), "p95": pick(0.95), "p99": pick(0.99), "max": ordered[-1]}


def synthetic_summary(label: str, jobs: list[JobRecord], series: Series) -> dict:
    def waits(js):
        return [j.wait for j in js if j.wait is not None]

    queues = {}
    total_gpu = sum(sum(u[GPU]) for u in series.queue_usage.values()) or 1.0
    for q, (weight, guarantee) in QUEUES.items():
        mine = [j for j in jobs if j.queue == q]
        done = [j.finished - j.submitted for j in mine if j.finished is not None]
        queues[q] = {
            "tenant": mine[0].tenant, "weight": weight, "guarantee": {GPU: guarantee},
            "jobs": len(mine), "admitted": len(waits(mine)),
            "wait_s": percentiles(waits(mine)), "completion_s": percentiles(done),
            "share_mean": sum(series.queue_usage[q][GPU]) / total_gpu,
        }  # fmt: skip
    defined = [f for f in series.fairness if f is not None]
    states = [j.state for j in jobs]
    return {
        "label": label, "policy_version": f"v-{label}", "seed": 1,
        "until_s": STEP * SAMPLES, "wall_s": 1.5,
        "jobs": {"total": len(jobs), "finished": states.count("succeeded"),
                 "succeeded": states.count("succeeded"), "failed": 0, "gave_up": 0,
                 "pending": states.count("pending"), "running": states.count("running"),
                 "rescheduled": 0, "preemptions": 0, "gpu_hours_lost": 0.0},
        "queues": queues,
        "tenants": {q["tenant"]: {"jobs": q["jobs"], "admitted": q["admitted"],
                                  "wait_s": q["wait_s"], "share_mean": q["share_mean"]}
                    for q in queues.values()},
        "clusters": {c: {"utilisation": {r: sum(v) / len(v) for r, v in u.items()},
                         "fragmentation_gpu_mean": 1.5}
                     for c, u in series.cluster_utilisation.items()},
        "fairness": {"window_s": 3600.0, "jain_mean": sum(defined) / len(defined),
                     "jain_min": min(defined)},
        "stages": {stage: {"jobs": len([j for j in jobs if j.stage == stage]),
                           "wait_s": percentiles(waits(j for j in jobs if j.stage == stage))}
                   for stage in ("prepare", "fit")},
    }  # fmt: skip


def synthetic_run(label: str, seed: int, slowness: float = 1.0) -> RunResult:
    rng = random.Random(seed)
    jobs = synthetic_jobs(rng, 160, slowness)
    series = synthetic_series(jobs, rng)
    return RunResult(label, synthetic_summary(label, jobs, series), series, jobs)


@pytest.fixture(scope="module")
def one(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[RunResult], list[Path]]:
    out = tmp_path_factory.mktemp("one")
    runs = [synthetic_run("head", seed=1)]
    return out, runs, write_report(out, runs)


@pytest.fixture(scope="module")
def two(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[RunResult], list[Path]]:
    out = tmp_path_factory.mktemp("two")
    runs = [synthetic_run("head", seed=1), synthetic_run("baseline", seed=2, slowness=3.0)]
    return out, runs, write_report(out, runs)


def test_every_file_is_written(one):
    out, _runs, written = one
    expected = ["summary.json", "jobs.csv", *plots.PLOT_FILES.values(), "report.html"]
    assert [p.name for p in written] == expected
    assert all((out / name).is_file() and (out / name).stat().st_size > 0 for name in expected)


@pytest.mark.parametrize("report", ["one", "two"])
def test_plots_are_valid_non_blank_pngs(report, request):
    out, _runs, _written = request.getfixturevalue(report)
    for name in plots.PLOT_FILES.values():
        assert (out / name).read_bytes()[:8] == PNG_SIGNATURE, name
        image = imread(out / name)
        assert image.ndim == 3 and image.shape[0] > 200 and image.shape[1] > 400, name
        assert image.shape[2] in (3, 4), name
        colours = np.unique(image.reshape(-1, image.shape[2]), axis=0)
        assert len(colours) > 1, f"{name} is one colour"


def test_summary_json_round_trips_every_run(two):
    out, runs, _written = two
    assert json.loads((out / "summary.json").read_text()) == {"runs": [r.summary for r in runs]}


def test_summary_json_writes_non_finite_numbers_as_null(tmp_path):
    run = synthetic_run("head", seed=3)
    run.summary["fairness"]["jain_min"] = math.nan
    run.summary["queues"]["train"]["wait_s"]["max"] = math.inf
    write_report(tmp_path, [run])
    (written,) = json.loads((tmp_path / "summary.json").read_text())["runs"]
    assert written["fairness"]["jain_min"] is None
    assert written["queues"]["train"]["wait_s"]["max"] is None
    assert written["fairness"]["jain_mean"] == run.summary["fairness"]["jain_mean"]


def test_jobs_csv_has_a_row_per_job_per_run(two):
    out, runs, _written = two
    with (out / "jobs.csv").open(newline="") as stream:
        rows = list(csv.DictReader(stream))
    assert list(rows[0]) == list(JOB_COLUMNS)
    assert len(rows) == sum(len(r.jobs) for r in runs)
    for run in runs:
        by_name = {row["name"]: row for row in rows if row["run"] == run.label}
        assert set(by_name) == {j.name for j in run.jobs}
        for job in run.jobs:
            row = by_name[job.name]
            assert (row["queue"], row["state"], float(row["gpus"])) == (
                job.queue,
                job.state,
                job.gpus,
            )
            assert float(row["submitted_s"]) == job.submitted
            assert (int(row["attempts"]), int(row["preemptions"])) == (
                job.attempts,
                job.preemptions,
            )
            if job.admitted is None:
                assert row["admitted_s"] == row["wait_s"] == row["cluster"] == ""
            else:
                assert float(row["wait_s"]) == job.wait


def test_html_escapes_names_from_the_trace(two):
    out, _runs, _written = two
    page = (out / "report.html").read_text()
    assert HOSTILE not in page
    assert "alert(1)" in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert page.count("<script>") == 1  # the report's own, which only counts loaded plots


def test_html_has_a_table_per_topic(one):
    out, runs, _written = one
    page = (out / "report.html").read_text()
    for caption in ("Jobs", "Fairness", "Queues: wait", "Queues: share vs weight", "Tenants"):
        assert f"<h3>{caption}</h3>" in page
    for section, header in (("clusters", "cluster"), ("stages", "stage")):
        table = re.search(rf"<th>{header}</th>.*?</table>", page)
        assert table is not None, header
        rows = re.findall(r"<tr><th>([^<]*)</th>", table.group(0))
        assert rows == sorted(runs[0].summary[section]), section


def test_an_empty_run_still_gives_every_file(tmp_path):
    written = write_report(tmp_path, [RunResult("head", {}, Series(), [])])
    assert [p.name for p in written][-1] == "report.html"
    assert all(p.read_bytes()[:8] == PNG_SIGNATURE for p in written if p.suffix == ".png")
    assert (tmp_path / "jobs.csv").read_text().splitlines() == [",".join(JOB_COLUMNS)]


def test_series_of_the_wrong_length_are_named(tmp_path):
    run = synthetic_run("head", seed=8)
    run.series.queue_usage["infer"][GPU].pop()
    with pytest.raises(ValueError, match=r"queue_usage\['infer'\]\['nvidia.com/gpu'\] has 299"):
        write_report(tmp_path, [run])


def test_html_compares_two_runs_with_a_difference_column(two):
    _out, runs, _written = two
    page = (_out / "report.html").read_text()
    assert "Δ = <b>head</b> − <b>baseline</b>" in page
    head, baseline = (r.summary["jobs"]["pending"] for r in runs)
    row = re.search(r"<tr><th>jobs pending</th>(.*?)</tr>", page)
    assert row is not None
    assert re.findall(r"<td[^>]*>([^<]*)</td>", row.group(1)) == [
        str(head),
        str(baseline),
        f"{head - baseline:+d}" if head != baseline else "0",
    ]


def test_same_runs_give_the_same_bytes(tmp_path):
    first = write_report(tmp_path / "a", [synthetic_run("head", seed=4)])
    second = write_report(tmp_path / "b", [synthetic_run("head", seed=4)])
    for a, b in zip(first, second, strict=True):
        assert a.read_bytes() == b.read_bytes(), a.name


def test_queue_plots_draw_the_twelve_busiest_queues_and_sum_the_rest(tmp_path):
    run = synthetic_run("head", seed=7)
    samples = len(run.series.times)
    for i in range(20):  # q00 is the least busy, q19 the busiest, all busier than the rest
        run.series.queue_usage[f"q{i:02d}"] = {GPU: [100.0 + i] * samples}
    shown, rest = plots.queue_ranking([run])
    assert len(shown) == plots.MAX_SERIES
    assert set(rest) == {HOSTILE, "infer", "train"} | {f"q{i:02d}" for i in range(8)}
    bands = plots.queue_bands(run.series, shown, rest)
    assert set(bands) == {*shown, plots.OTHER}
    expected = [sum(run.series.queue_usage[q][GPU][t] for q in rest) for t in range(samples)]
    assert bands[plots.OTHER] == pytest.approx(expected)
    assert plots.queue_usage_plot([run], tmp_path / "q.png").read_bytes()[:8] == PNG_SIGNATURE


def test_plots_show_queue_names_with_dollar_signs_literally(tmp_path):
    run = synthetic_run("head", seed=5)
    for job in run.jobs:
        job.queue = job.queue.replace("train", r"cost$\frac{$")
    images = plots.write_plots(tmp_path, [run])
    assert all(p.read_bytes()[:8] == PNG_SIGNATURE for p in images)


# --- headless Chromium -------------------------------------------------------------------------

CONSOLE = re.compile(r":CONSOLE[:(]")
"""Chromium's log line for any console message (log, error, uncaught exception):
``[pid:tid:time:INFO:CONSOLE:12] "Uncaught ReferenceError: …", source: file:///… (12)``."""


def chromium(page: Path, profile: Path) -> tuple[str, list[str]]:
    """Load ``page`` in headless Chromium; its DOM after load and its console log lines."""
    binary = require_tool("chromium")
    command = [
        binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
        "--no-first-run", "--enable-logging=stderr", "--v=0", f"--user-data-dir={profile}",
        "--virtual-time-budget=10000", "--dump-dom", page.as_uri(),
    ]  # fmt: skip
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        dom, log = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    assert process.returncode == 0, f"chromium exited {process.returncode}:\n{log[-2000:]}"
    return dom, [line for line in log.splitlines() if CONSOLE.search(line)]


def body_attribute(dom: str, name: str) -> str | None:
    body = re.search(r"<body[^>]*>", dom)
    assert body is not None, dom[:500]
    found = re.search(rf'{name}="([^"]*)"', body.group(0))
    return None if found is None else found.group(1)


@pytest.mark.parametrize("report", ["one", "two"])
def test_report_loads_in_chromium_with_every_plot_and_no_console_message(report, request, tmp_path):
    out, _runs, _written = request.getfixturevalue(report)
    dom, console = chromium(out / "report.html", tmp_path / "profile")
    assert console == []
    assert len(re.findall(r'<img class="plot"', dom)) == len(plots.PLOT_FILES)
    assert body_attribute(dom, "data-plots-loaded") == str(len(plots.PLOT_FILES))
    assert re.search(r'id="missing-plots" hidden', dom)


def test_chromium_check_notices_a_missing_plot(tmp_path):
    write_report(tmp_path / "report", [synthetic_run("head", seed=6)])
    (tmp_path / "report" / plots.PLOT_FILES["fairness"]).unlink()
    dom, _console = chromium(tmp_path / "report" / "report.html", tmp_path / "profile")
    assert body_attribute(dom, "data-plots-loaded") == str(len(plots.PLOT_FILES) - 1)
    assert not re.search(r'id="missing-plots" hidden', dom)


def test_chromium_check_sees_console_errors(tmp_path):
    page = tmp_path / "broken.html"
    page.write_text("<!DOCTYPE html><html><body><script>notDefined();</script></body></html>")
    _dom, console = chromium(page, tmp_path / "profile")
    assert len(console) == 1 and "Uncaught ReferenceError" in console[0]


def test_guarantees_come_from_the_summary_when_the_series_has_none():
    run = synthetic_run("head", seed=9)
    run.series.queue_guarantee = {}
    shown, rest = plots.queue_ranking([run])
    assert plots.queue_guarantees(run, shown, rest) == {q: QUEUES[q][1] for q in QUEUES}


def test_stacked_bands_are_held_from_one_sample_to_the_next():
    assert plots.steps([0.0, 1.0, 3.0], [5.0, 6.0, 7.0], [1.0, 0.0, 2.0]) == (
        [0.0, 1.0, 1.0, 3.0, 3.0],
        [5.0, 5.0, 6.0, 6.0, 7.0],
        [1.0, 1.0, 0.0, 0.0, 2.0],
    )


def test_differences_are_zero_at_the_precision_shown_and_a_dash_without_both_values():
    head, baseline = synthetic_run("head", seed=10), synthetic_run("baseline", seed=11)
    head.summary["queues"]["train"]["wait_s"]["p50"] = 600.0
    baseline.summary["queues"]["train"]["wait_s"]["p50"] = 600.2
    head.summary["queues"]["infer"]["wait_s"]["p50"] = 90.0
    del baseline.summary["queues"]["infer"]
    page = html.render([head, baseline], [])
    table = page[page.index("<h3>Queues: wait</h3>") :].split("</table>")[0]

    def first_cells(queue: str) -> list[str]:
        row = re.search(rf"<tr><th>{queue}</th>(.*?)</tr>", table)
        assert row is not None, queue
        return re.findall(r"<td[^>]*>([^<]*)</td>", row.group(1))[:3]

    assert first_cells("train") == ["10.0 min", "10.0 min", "0"]
    assert first_cells("infer") == ["1.5 min", "—", "—"]
