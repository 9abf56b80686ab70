"""Jobs never admitted by the end of a run are counted in the headline (summary.json, the
one-screen summary, report.html, jobs.csv) with the reason of their last decision, and their
waits count until the end of the run (censored), so they cannot vanish from the percentiles."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from rich.console import Console

from simulate.report import write_report
from simulate.screen import print_summary

SMALL_QUEUE = """\
apiVersion: fleetgate.io/v1alpha1
kind: Queue
metadata: {name: small}
spec: {weight: 1, max: {nvidia.com/gpu: 4}}
"""
ROWS = [
    {"name": "fits", "submit": 0, "queue": "a", "tenant": "t", "duration": 600, "gpus": 8},
    {"name": "late", "submit": 100, "queue": "a", "tenant": "t", "duration": 300, "gpus": 1},
]


def screen(runs: list) -> str:  # type: ignore[type-arg]
    out = io.StringIO()
    print_summary(runs, Console(file=out, width=160, color_system=None))
    return out.getvalue()


def test_a_pod_larger_than_any_node_is_never_admitted_and_counted_never_fits(
    policies, trace_file, simulate, cluster
) -> None:  # type: ignore[no-untyped-def]
    """A single pod of 16 GPUs on 8-GPU nodes can never start: rejected NeverFits (the cycle's
    node-shape answer "never"), counted apart from the jobs merely waiting."""
    rows = [*ROWS, {"name": "huge-pod", "submit": 50, "queue": "a", "tenant": "t",
                    "duration": 900, "replicas": 1, "pod_gpus": 16}]  # fmt: skip
    _, result = simulate(policies(), [cluster("east", 2)], trace_file(rows))
    jobs = result.summary["jobs"]
    assert jobs["never_admitted_by_reason"] == {"NeverFits": 1}
    assert (jobs["never_admitted"], jobs["never_fits"], jobs["rejected"]) == (1, 1, 1)
    assert jobs["never_admitted_gpu_hours"] == round(16 * 900 / 3600, 3)
    assert jobs["succeeded"] == 2 and jobs["pending"] == 1
    assert jobs["wait_s"]["max"] == result.summary["until_s"] - 50  # censored at the end
    [huge] = [r for r in result.jobs if r.name == "huge-pod"]
    assert (huge.state, huge.reason, huge.admitted) == ("pending", "NeverFits", None)
    assert "never admitted · NeverFits" in screen([result])


def test_never_admitted_jobs_are_in_every_output(
    policies, trace_file, simulate, cluster, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    """An 8-GPU job in a queue whose max is 4 GPUs (ExceedsMaxQuota): never admitted."""
    rows = [*ROWS, {"name": "over-max", "submit": 20, "queue": "small", "tenant": "t",
                    "duration": 3600, "gpus": 8}]  # fmt: skip
    policy_set = policies({"a": 1}, extra=SMALL_QUEUE)
    runs = []
    for label in ("head", "again"):
        result = simulate(policy_set, [cluster("east", 2)], trace_file(rows), label=label)[1]
        runs.append(result)
    head = runs[0]
    jobs = head.summary["jobs"]
    assert (jobs["never_admitted"], jobs["never_fits"]) == (1, 0)
    assert jobs["never_admitted_by_reason"] == {"ExceedsMaxQuota": 1}
    assert jobs["never_admitted_gpu_hours"] == 8.0
    end = head.summary["until_s"]
    assert head.summary["queues"]["small"]["wait_s"]["max"] == end - 20
    assert head.summary["queues"]["small"]["admitted"] == 0
    same = [dict(r.summary, wall_s=None, label=None) for r in runs]
    assert same[0] == same[1]  # determinism

    text = screen(runs)
    assert "never admitted · NeverFits" in text and "1 (8 GPU-h) · 0" in text
    assert "ExceedsMaxQuota 1" in text and "waiting until the end" in text

    written = write_report(tmp_path, runs)
    summary = json.loads((tmp_path / "summary.json").read_text())
    for run in summary["runs"]:
        assert run["jobs"]["never_admitted"] == 1 and run["jobs"]["never_fits"] == 0
    page = (tmp_path / "report.html").read_text()
    assert "Jobs never admitted, by the reason of their last decision" in page
    assert "<tr><th>ExceedsMaxQuota</th>" in page
    assert "<th>jobs never admitted</th>" in page
    assert "<b>head</b>: 1 jobs never admitted (8.0 GPU-hours asked), of which NeverFits 0" in page
    with (tmp_path / "jobs.csv").open(newline="") as stream:
        reasons = {r["name"]: r["reason"] for r in csv.DictReader(stream) if r["run"] == "head"}
    assert reasons == {"fits": "", "late": "", "over-max": "ExceedsMaxQuota"}
    assert written[-1].name == "report.html"


def test_every_job_admitted_gives_zero_and_no_note(
    policies, trace_file, simulate, cluster, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    _, result = simulate(policies(), [cluster("east", 2)], trace_file(ROWS))
    jobs = result.summary["jobs"]
    assert (jobs["never_admitted"], jobs["never_fits"], jobs["never_admitted_by_reason"]) == (
        0, 0, {})  # fmt: skip
    assert jobs["wait_s"]["max"] is not None and jobs["wait_s"]["max"] < 60
    write_report(tmp_path, [result])
    page = (tmp_path / "report.html").read_text()
    assert "Jobs never admitted, by" not in page and "<th>jobs never admitted</th>" in page
    assert "waiting until the end" not in screen([result])


def test_a_job_not_submitted_by_until_is_not_counted_never_admitted(
    policies, trace_file, simulate, cluster
) -> None:  # type: ignore[no-untyped-def]
    rows = [*ROWS, {"name": "after-the-end", "submit": 5000, "queue": "a", "tenant": "t",
                    "duration": 60, "gpus": 1}]  # fmt: skip
    _, result = simulate(policies(), [cluster("east", 2)], trace_file(rows), until=1000)
    jobs = result.summary["jobs"]
    assert (jobs["not_submitted"], jobs["never_admitted"], jobs["pending"]) == (1, 0, 1)
