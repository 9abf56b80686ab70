"""A pipeline trace: the real cycle's dependency rules hold each stage until its predecessors
end, and the summary reports each stage's wait."""

from __future__ import annotations

from pathlib import Path

from engine.members import FleetSpec, load_fleet
from engine.policy.policyset import load_policy_set
from simulate.live import Fault
from simulate.loop import Options, Simulation
from simulate.trace import read_trace

REPO = Path(__file__).resolve().parents[2]


def test_stages_start_only_after_their_predecessors() -> None:
    trace = read_trace(REPO / "examples/traces/pipeline.csv")
    sim = Simulation(
        load_policy_set([REPO / "policies"]), load_fleet(REPO / "examples/fleet.yaml"), trace,
        Options(interval=10),
    )  # fmt: skip
    result = sim.run()
    by_name = {j.trace.name: j for j in sim.jobs}
    checked = 0
    for job in sim.jobs:
        for ref in job.trace.after:
            before = by_name[ref.rpartition("/")[2]]
            assert before.finished_at is not None and job.admitted_at is not None
            assert job.admitted_at >= before.finished_at, (job.trace.name, before.trace.name)
            checked += 1
    assert checked == 6 * 5  # train, 2 evals, and the report's two
    assert all(r.state == "succeeded" for r in result.jobs)
    stages = result.summary["stages"]
    assert {s: v["jobs"] for s, v in stages.items()} == {
        "prep": 6, "train": 6, "eval": 12, "report": 6,
    }  # fmt: skip
    # submitted with their pipeline, they wait longer than their own queueing
    assert stages["report"]["wait_s"]["p50"] > stages["report"]["wait_after_dependencies_s"]["p50"]


def test_a_failed_predecessor_rejects_its_dependents(policies, trace_file, cluster) -> None:  # type: ignore[no-untyped-def]
    rows = [
        {"name": "prep", "submit": 0, "queue": "a", "tenant": "t", "duration": 500, "gpus": 1,
         "stage": "prep"},
        {"name": "train", "submit": 0, "queue": "a", "tenant": "t", "duration": 500, "gpus": 8,
         "stage": "train", "after": "prep"},
        {"name": "cleanup", "submit": 0, "queue": "a", "tenant": "t", "duration": 60, "gpus": 1,
         "stage": "cleanup", "after": "finished:prep"},
    ]  # fmt: skip
    faults = (Fault(100, "fail-job", "prep"),)
    sim = Simulation(
        policies({"a": 1}, attempts=1), FleetSpec((cluster("one", 1),)),
        read_trace(trace_file(rows)), Options(interval=10, faults=faults),
    )  # fmt: skip
    result = sim.run()
    states = {r.name: r.state for r in result.jobs}
    assert states == {"prep": "gave_up", "train": "pending", "cleanup": "succeeded"}
    train = next(j for j in sim.jobs if j.trace.name == "train")
    assert train.reason == "DependencyFailed"
    assert result.summary["jobs"]["rejected"] == 1


def test_the_report_shows_each_stages_wait(tmp_path: Path) -> None:
    """Issue 20: the simulator replays a pipeline trace and its report shows each stage's wait
    (the "Pipeline stages" table of report.html, and summary.json's stages)."""
    import html
    import json
    import re

    from simulate.report import write_report

    trace = read_trace(REPO / "examples/traces/pipeline.csv")
    result = Simulation(
        load_policy_set([REPO / "policies"]), load_fleet(REPO / "examples/fleet.yaml"), trace,
        Options(interval=10),
    ).run()  # fmt: skip
    write_report(tmp_path, [result])
    page = (tmp_path / "report.html").read_text()
    table = page[page.index("Pipeline stages") :]
    table = table[: table.index("</table>")]
    cells = [html.unescape(c) for c in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", table, re.S)]
    for stage in ("prep", "train", "eval", "report"):
        assert stage in cells, (stage, cells)
    written = json.loads((tmp_path / "summary.json").read_text())["runs"][0]["stages"]
    assert written == json.loads(json.dumps(result.summary["stages"]))
    assert all(v["wait_s"]["p50"] is not None for v in written.values())
