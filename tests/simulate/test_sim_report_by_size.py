"""Issue 28, item 5: the report shows what happens to large jobs. By size class and by queue:
waits to admission and to start, jobs never admitted or given up, preemptions and the GPU-hours
they cost; the fair-share attainment beside Jain's index; utilisation over the arrival span;
guarantee lines told apart in the queue-usage plot."""

from __future__ import annotations

import io
import json
import random
import re
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from engine import annotations as ann
from engine.cycle import Baseline, run_cycle
from simulate import plotdata
from simulate.fairshare import attainment, fair_shares
from simulate.metrics import jain
from simulate.report import write_report
from simulate.results import SIZE_CLASSES, RunResult, size_class
from simulate.screen import print_summary

HOSTILE = "<script>alert(1)</script>"
RECLAIMING = """\
apiVersion: fleetgate.io/v1alpha1
kind: Queue
metadata: {name: b}
spec: {weight: 1, guarantee: {nvidia.com/gpu: 16}, preemption: {reclaim: Any}}
"""
# One cluster of 2 x 8 GPUs. Queue a has no guarantee; b is guaranteed all 16 GPUs and reclaims.
# big (16 GPUs, a) runs from 0, borrowing b's idle guarantee; b1 arrives at 100: b reclaims, big
# is preempted (16 GPUs x 100 s lost) and b1 runs from 110 (the next cycle) to 610; big is
# admitted again at 610 and preempted again at 1000 by b2 (16 x 390 s lost), which runs from
# 1010 to 1510; big is admitted a third time at 1510 and succeeds. huge-pod asks for one pod of
# 16 GPUs, larger than any node: never admitted (NeverFits). cpu runs at once.
ROWS: list[dict[str, Any]] = [
    {"name": "big", "submit": 0, "queue": "a", "tenant": "t", "duration": 10000, "gpus": 16},
    {"name": "cpu", "submit": 50, "queue": "a", "tenant": "t", "duration": 100, "cpu": 2},
    {"name": "huge-pod", "submit": 60, "queue": "a", "tenant": "t", "duration": 900,
     "replicas": 1, "pod_gpus": 16},
    {"name": "b1", "submit": 100, "queue": "b", "tenant": "u", "duration": 500, "gpus": 8},
    {"name": "b2", "submit": 1000, "queue": "b", "tenant": "u", "duration": 500, "gpus": 8},
]  # fmt: skip
LOST_GPU_S = 16 * 100 + 16 * (1000 - 610)


@pytest.fixture
def reclaim(policies, trace_file, simulate, cluster):  # type: ignore[no-untyped-def]
    """Run the trace above: ``reclaim(decide=None, label="head")`` → RunResult."""

    def run(decide: Any = None, label: str = "head") -> RunResult:
        policy_set = policies({"a": 1}, extra=RECLAIMING)
        return simulate(
            policy_set, [cluster("east", 2)], trace_file(ROWS), decide, interval=10, label=label
        )[1]

    return run


def screen(runs: list[RunResult]) -> str:
    out = io.StringIO()
    print_summary(runs, Console(file=out, width=160, color_system=None))
    return out.getvalue()


def test_size_classes_are_by_total_gpus() -> None:
    sizes = {g: size_class(g) for g in (0, 0.0, 1, 2, 3, 4, 5, 8, 9, 16, 64)}
    assert sizes == {0: "0", 1: "1", 2: "2", 3: "3-4", 4: "3-4", 5: "5-8", 8: "5-8", 9: ">8",
                     16: ">8", 64: ">8"}  # fmt: skip
    assert SIZE_CLASSES == ("0", "1", "2", "3-4", "5-8", ">8")


def test_a_job_preempted_twice_is_counted_by_size_and_by_queue(reclaim) -> None:  # type: ignore[no-untyped-def]
    result = reclaim()
    s = result.summary
    by_name = {r.name: r for r in result.jobs}
    big = by_name["big"]
    assert (big.preemptions, big.admitted, big.started, big.state) == (2, 1510, 1510, "succeeded")
    assert big.preempted_gpu_s == LOST_GPU_S

    large = s["by_size"][">8"]
    assert {k: large[k] for k in ("jobs", "admitted", "never_admitted", "gave_up")} == {
        "jobs": 2, "admitted": 1, "never_admitted": 1, "gave_up": 0}  # fmt: skip
    assert (large["preempted_jobs"], large["preemptions"]) == (1, 2)
    assert (large["preempted_more_than_once"], large["max_preemptions_per_job"]) == (1, 2)
    assert large["gpu_hours_lost_to_preemption"] == round(LOST_GPU_S / 3600, 3)
    # the job never admitted counts until the end, as in the overall waits
    end = s["until_s"]
    assert large["wait_s"]["max"] == large["wait_to_start_s"]["max"] == end - 60
    # big waited 1510 s less the 100 s and 390 s its first two admissions ran
    assert big.wait == 1510 - 100 - 390
    assert large["wait_s"]["p50"] == pytest.approx((1020 + end - 60) / 2)

    middle = s["by_size"]["5-8"]
    assert (middle["jobs"], middle["preemptions"], middle["wait_s"]["max"]) == (2, 0, 10)
    # jobs of 8 GPUs or more, across the two classes: b1 and b2 (8 GPUs), big and huge-pod
    whole = s["large_jobs"]
    assert (whole["jobs"], whole["never_admitted"], whole["preemptions"]) == (4, 1, 2)
    assert whole["wait_s"]["max"] == end - 60 and whole["wait_s"]["p50"] == pytest.approx(
        (10 + 1020) / 2)  # fmt: skip
    assert s["by_size"]["0"]["jobs"] == 1 and s["by_size"]["0"]["wait_s"]["max"] == 0
    for empty in ("1", "2", "3-4"):
        assert s["by_size"][empty]["jobs"] == 0 and s["by_size"][empty]["wait_s"]["p50"] is None
    assert sum(c["jobs"] for c in s["by_size"].values()) == s["jobs"]["total"] == 5
    assert sum(c["never_admitted"] for c in s["by_size"].values()) == s["jobs"]["never_admitted"]

    a, b = s["queues"]["a"], s["queues"]["b"]
    assert (a["jobs"], a["never_admitted"], a["preempted_jobs"], a["preemptions"]) == (3, 1, 1, 2)
    assert a["gpu_hours_lost_to_preemption"] == round(LOST_GPU_S / 3600, 3)
    assert a["max_preemptions_per_job"] == 2 and a["wait_to_start_s"]["max"] == end - 60
    assert (b["preempted_jobs"], b["preemptions"], b["gpu_hours_lost_to_preemption"]) == (0, 0, 0)
    assert b["wait_s"]["max"] == b["wait_to_start_s"]["max"] == 10  # one interval

    jobs = s["jobs"]
    assert (jobs["preemptions"], jobs["preempted_jobs"], jobs["preempted_more_than_once"]) == (
        2, 1, 1)  # fmt: skip
    assert jobs["max_preemptions_per_job"] == 2
    assert jobs["gpu_hours_lost_to_preemption"] == jobs["gpu_hours_lost"]  # no failures
    assert jobs["wait_to_start_s"]["max"] == end - 60

    text = screen([result])
    assert "jobs by size (GPUs per job)" in text
    assert re.search(r"│ >8\s+│\s+2 │ .* │\s+1 · 2 │\s+2\.2 │", text), text
    assert re.search(r"│ ≥8\s+│\s+4 │ .* │\s+1 · 2 │\s+2\.2 │", text), text
    assert "preempted · >1× · most" in text and "1 · 1 · 2" in text
    assert "rejected · gave up" in text  # given-up jobs stay in the headline


def _random_rows(count: int, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    rows = []
    for i in range(count):
        gpus = rng.choice((0, 1, 2, 4, 8, 16))
        row = {
            "name": f"j{i:03d}",
            "submit": round(rng.uniform(0, 20000)),
            "queue": rng.choice("ab"),
            "tenant": "t",
            "duration": rng.randint(300, 6000),
        }
        row.update({"gpus": gpus} if gpus else {"cpu": 4})
        rows.append(row)  # fmt: skip
    return rows


@pytest.mark.parametrize("baseline", [False, True], ids=["fleetgate", "baseline"])
def test_wait_to_start_is_never_shorter_than_wait_to_admission(
    baseline: bool, policies, trace_file, simulate, cluster
) -> None:  # type: ignore[no-untyped-def]
    """Failures (given up after two attempts), requeues and a run cut short at ``until``."""
    policy_set = policies({"a": 1, "b": 1}, startup="5m", attempts=2)
    _, result = simulate(
        policy_set, [cluster("east", 2), cluster("west", 1, gpus=4)],
        trace_file(_random_rows(80, seed=5)), Baseline() if baseline else None,
        fail_rate=0.3, until=30000, interval=10,
    )  # fmt: skip
    end = result.summary["until_s"]
    states = {r.state for r in result.jobs}
    assert {"succeeded", "gave_up"} <= states
    for job in result.jobs:
        wait, start = job.censored_wait(end), job.censored_start_wait(end)
        assert (wait is None) == (start is None), job
        if wait is not None and start is not None:
            assert start >= wait, job
        if job.started is not None:
            assert job.admitted is not None and job.started >= job.admitted, job
    for entry in [*result.summary["by_size"].values(), *result.summary["queues"].values()]:
        for p in ("p50", "p95", "p99", "max"):
            wait, start = entry["wait_s"][p], entry["wait_to_start_s"][p]
            assert (wait is None) == (start is None)
            assert wait is None or start >= wait


def test_a_job_sent_where_its_pod_cannot_bind_starts_after_its_admission(
    policies, trace_file, simulate, cluster
) -> None:  # type: ignore[no-untyped-def]
    """The baseline checks totals only: x (one 4-GPU pod) goes to alpha, whose two nodes have 2
    GPUs free each, and starts only when short (6 GPUs) ends there at 200."""
    rows = [
        {"name": "short", "submit": 0, "queue": "a", "tenant": "t", "duration": 200,
         "replicas": 1, "pod_gpus": 6},
        {"name": "long", "submit": 0, "queue": "a", "tenant": "t", "duration": 20000,
         "replicas": 1, "pod_gpus": 6},
        {"name": "x", "submit": 30, "queue": "a", "tenant": "t", "duration": 600,
         "replicas": 1, "pod_gpus": 4},
    ]  # fmt: skip
    clusters = [cluster("alpha", 2), cluster("beta", 1, gpus=4)]
    _, result = simulate(policies(), clusters, trace_file(rows), Baseline(), interval=10)
    x = next(r for r in result.jobs if r.name == "x")
    assert (x.cluster, x.admitted, x.started) == ("alpha", 30, 200)
    assert result.summary["by_size"]["3-4"]["wait_s"]["max"] == 0
    assert result.summary["by_size"]["3-4"]["wait_to_start_s"]["max"] == 170


def test_fair_share_attainment_is_one_when_every_queue_gets_its_fair_share() -> None:
    # 16 GPUs: a asks for 4 (all of it is fair), b and c for 20 each: 6 each
    demands = {"a": 4.0, "b": 20.0, "c": 20.0}
    ones = dict.fromkeys(demands, 1.0)
    assert fair_shares(16.0, demands, ones) == {"a": 4.0, "b": 6.0, "c": 6.0}
    assert attainment({"a": 4.0, "b": 6.0, "c": 6.0}, demands, ones) == (
        1.0, {"a": 1.0, "b": 1.0, "c": 1.0})  # fmt: skip
    # weights 2:1, both asking for more than there is: 8 and 4 of 12
    assert fair_shares(12.0, {"a": 100.0, "b": 100.0}, {"a": 2.0, "b": 1.0}) == {"a": 8.0, "b": 4.0}
    # a queue that asked for little and got it all is fair here; Jain's index says it is not
    assert attainment({"a": 2.0, "b": 10.0}, {"a": 2.0, "b": 30.0}, {"a": 1.0, "b": 1.0})[0] == 1.0
    index = jain([2.0, 10.0])
    assert index is not None and index < 0.7


def test_fair_share_attainment_is_below_one_when_a_queue_is_starved() -> None:
    demands = {"a": 4.0, "b": 20.0, "c": 20.0}
    ones = dict.fromkeys(demands, 1.0)
    mean, terms = attainment({"a": 4.0, "b": 12.0, "c": 0.0}, demands, ones)
    assert terms == {"a": 1.0, "b": 1.0, "c": 0.0}
    assert mean == pytest.approx(2 / 3)
    # weights count: with b weighted 3, b taking 3/4 is its fair share, c taking it is not
    weighted = {"b": 3.0, "c": 1.0}
    both = {"b": 100.0, "c": 100.0}
    assert attainment({"b": 12.0, "c": 4.0}, both, weighted)[0] == 1.0
    assert attainment({"b": 4.0, "c": 12.0}, both, weighted)[0] == pytest.approx((4 / 12 + 1) / 2)
    assert attainment({"a": 1.0}, {"a": 5.0}, {"a": 1.0}) == (None, {})  # one queue: undefined


def test_the_summary_reports_attainment_beside_jain(reclaim) -> None:  # type: ignore[no-untyped-def]
    fairness = reclaim().summary["fairness"]
    assert fairness["windows"] >= 1
    for key in ("attainment_mean", "attainment_min"):
        assert 0 < fairness[key] <= 1
    assert fairness["attainment_min"] <= fairness["attainment_mean"]


def test_utilisation_over_the_arrival_span(policies, trace_file, simulate, cluster) -> None:  # type: ignore[no-untyped-def]
    """8 one-GPU jobs fill the one 8-GPU node from 0 to 1000; the last job, submitted at 1000,
    runs one GPU for 100,000 s more."""
    rows = [{"name": f"fill{i}", "submit": 0, "queue": "a", "tenant": "t", "duration": 1000,
             "gpus": 1} for i in range(8)]  # fmt: skip
    rows.append({"name": "tail", "submit": 1000, "queue": "a", "tenant": "t",
                 "duration": 100000, "gpus": 1})  # fmt: skip
    trace = trace_file(rows)
    _, result = simulate(policies(), [cluster("east", 1)], trace, interval=10)
    s = result.summary
    assert s["arrival_span_s"] == 1000
    assert s["gpu_utilisation_arrival_span"] == 1.0
    assert s["gpu_utilisation_mean"] == pytest.approx((8 * 1000 + 100000) / (8 * 101000), abs=1e-6)
    assert s["gpu_utilisation_arrival_span"] >= s["gpu_utilisation_mean"]
    # cut before the last submit: the span ends with the run
    _, cut = simulate(policies(), [cluster("east", 1)], trace, interval=10, until=500)
    assert cut.summary["arrival_span_s"] == 500
    assert cut.summary["gpu_utilisation_arrival_span"] == cut.summary["gpu_utilisation_mean"]


def _hostile(result: RunResult) -> RunResult:
    """The run with queue a renamed to a script tag, in the summary and the jobs."""
    summary = json.loads(json.dumps(result.summary))
    summary["queues"][HOSTILE] = summary["queues"].pop("a")
    for job in result.jobs:
        job.queue = HOSTILE if job.queue == "a" else job.queue
    return RunResult(result.label, summary, result.series, result.jobs)


def test_report_html_has_the_tables_by_size_and_escapes_names(reclaim, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    runs = [_hostile(reclaim()), _hostile(reclaim(Baseline(), label="baseline"))]
    write_report(tmp_path, runs)
    page = (tmp_path / "report.html").read_text()
    captions = ("Jobs by size", "Jobs by size: waits", "Jobs by size: preemption",
                "Queues: wait to start", "Queues: never admitted, given up, preempted")  # fmt: skip
    for caption in captions:
        assert f"<h3>{caption}</h3>" in page
    assert HOSTILE not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert page.count("<script>") == 1  # the report's own
    size_table = page[page.index("<h3>Jobs by size: preemption</h3>") :].split("</table>")[0]
    size_table = size_table[size_table.index("<tbody>") :]
    rows = re.findall(r"<tr><th>([^<]*)</th>", size_table)
    assert rows == ["0", "5-8", "&gt;8"]  # classes with jobs, smallest first
    large = re.search(r"<tr><th>&gt;8</th>(.*?)</tr>", size_table)
    assert large is not None
    # preempted jobs, then preemptions: head, baseline (no preemption), Δ
    assert re.findall(r"<td[^>]*>([^<]*)</td>", large.group(1))[:6] == ["1", "0", "+1", "2", "0",
                                                                         "+2"]  # fmt: skip
    for header in ("fair-share attainment, mean", "GPU utilisation, first to last submit",
                   "wait to start p95 (all jobs, not started: until the end)",
                   "GPU-hours lost to preemption"):  # fmt: skip
        assert f"<th>{header}</th>" in page
    written = json.loads((tmp_path / "summary.json").read_text())["runs"]
    assert written[0]["by_size"][">8"]["preemptions"] == 2
    assert written[0]["queues"][HOSTILE]["preempted_more_than_once"] == 1
    csv_header = (tmp_path / "jobs.csv").read_text().splitlines()[0].split(",")
    assert csv_header[-2:] == ["started_s", "gpu_hours_lost_to_preemption"]


def test_same_trace_gives_the_same_summary_and_files(reclaim, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    first, second = reclaim(), reclaim()
    assert {**first.summary, "wall_s": 0} == {**second.summary, "wall_s": 0}
    for run in (first, second):
        run.summary["wall_s"] = 0.0
    a, b = write_report(tmp_path / "a", [first]), write_report(tmp_path / "b", [second])
    for one, other in zip(a, b, strict=True):
        assert one.read_bytes() == other.read_bytes(), one.name


def test_guarantee_lines_have_a_dash_of_their_own() -> None:
    names = [f"q{i:02d}" for i in range(plotdata.MAX_SERIES)]
    dashes = plotdata.dash_map(names)
    colours = plotdata.colour_map(names)
    assert len({repr(dashes[n]) for n in names}) == len(names)
    assert dashes[plotdata.OTHER] not in [dashes[n] for n in names]
    assert [colours[n] for n in names] == list(plotdata.COLOURS)


def test_a_preemptor_carries_its_nomination_until_it_is_admitted(reclaim) -> None:  # type: ignore[no-untyped-def]
    """As ``plan._pending`` writes it: b1's Preempting decision nominates it to east; the next
    cycle sees the annotation on its pending binding (and admits it first there); admission
    drops it."""
    seen: list[tuple[str | None, bool]] = []

    def decide(snapshot, policies, now, cache):  # type: ignore[no-untyped-def]
        for b in snapshot.bindings:
            if b.name.split("-")[0] == "b1":
                seen.append((b.annotations.get(ann.NOMINATED_CLUSTER), bool(b.clusters)))
        return run_cycle(snapshot, policies, now, cache)

    result = reclaim(decide)
    assert {r.name: r.admitted for r in result.jobs}["b1"] == 110
    assert (None, False) in seen and ("east", False) in seen  # pending, then nominated
    assert not any(nominated and placed for nominated, placed in seen)
    assert seen[-1] == (None, True)
