"""``engine.diff``: two cycles on examples/fleet-snapshot.yaml under policies/ and a small edit of
it (weight, guarantee, strategy, placement) → the decisions and queues that differ, and nothing
else; and the three output formats of ``engine.diffreport``."""

from __future__ import annotations

import datetime as dt
import itertools
import json
import re
import shutil
from pathlib import Path

import pytest

from engine import diffreport
from engine.cycle import run_cycle
from engine.cycle.model import ClusterAssignment, CycleResult, Decision, QueueReport
from engine.cycle.reasons import Action, Reason
from engine.diff import Diff, diff_results, vector_changes
from engine.fleet.files import read_objects
from engine.fleet.snapshot import build_snapshot
from engine.policy.policyset import load_policy_set
from tests.conftest import REPO

NOW = dt.datetime(2025, 3, 10, 10, tzinfo=dt.UTC)
SNAPSHOT = REPO / "examples" / "fleet-snapshot.yaml"

# each edit: (file in policies/, text there, its replacement)
STRICT_TO_BEST_EFFORT = ("queues.yaml", "strategy: StrictFIFO", "strategy: BestEffortFIFO")
TRAINING_WEIGHT = (
    "queues.yaml",
    "  strategy: StrictFIFO\n  weight: 3",
    "  strategy: StrictFIFO\n  weight: 1",
)
INFERENCE_GUARANTEE = (
    "queues.yaml",
    "  guarantee:\n    nvidia.com/gpu: 16\n    cpu: 128",
    "  guarantee:\n    nvidia.com/gpu: 24\n    cpu: 128",
)
INFERENCE_OFF_GPU_WEST = (
    "scheduling.yaml",
    "    filters:\n",
    "    filters:\n      - name: inference-off-gpu-west\n        expression: >-\n"
    '          job.queue != "prod-inference" || cluster.name != "gpu-west"\n',
)
SPREAD = ("scheduling.yaml", "strategy: BinPack", "strategy: Spread")


def edited(tmp_path: Path, *edits: tuple[str, str, str]) -> Path:
    """A copy of policies/ with each edit made once (the text must be there)."""
    copy = tmp_path / "policies"
    shutil.copytree(REPO / "policies", copy)
    for file, old, new in edits:
        text = (copy / file).read_text()
        assert old in text, f"{old!r} is no longer in policies/{file}"
        (copy / file).write_text(text.replace(old, new, 1))
    return copy


def cycle(policies: Path) -> CycleResult:
    objects, problems = read_objects([SNAPSHOT])
    assert problems == []
    return run_cycle(build_snapshot(objects), load_policy_set([policies]), NOW)


@pytest.fixture(scope="module")
def base() -> CycleResult:
    return cycle(REPO / "policies")


def head(tmp_path: Path, *edits: tuple[str, str, str]) -> CycleResult:
    return cycle(edited(tmp_path, *edits))


# --- what differs -------------------------------------------------------------------------------


def test_the_same_policies_differ_in_nothing(base):
    diff = diff_results(base, cycle(REPO / "policies"))
    assert not diff.changed
    assert diff.decisions == diff.queues == ()
    assert diff.compared == len(base.decisions)
    assert diff.summary() == f"no decision changes ({diff.compared} decisions compared); " + (
        "no queue changes"
    )


def test_a_change_that_moves_no_decision_and_no_queue_is_no_difference(base, tmp_path):
    spread = head(tmp_path, SPREAD)
    assert spread.policy_version != base.policy_version
    assert not diff_results(base, spread).changed


def test_strict_to_best_effort_lets_the_small_job_pass_the_head(base, tmp_path):
    diff = diff_results(base, head(tmp_path, STRICT_TO_BEST_EFFORT))
    [change] = diff.decisions
    assert change.workload == "PyTorchJob/research/resnet-ablation"
    assert change.queue == "research-training"
    assert change.before is not None and change.after is not None
    assert (change.before.action, change.before.reason) == (Action.PENDING, Reason.BLOCKED_BY_HEAD)
    assert change.before.position == 2
    assert (change.after.action, change.after.reason) == (Action.ADMIT, Reason.ADMITTED)
    assert change.fields == ("action", "reason", "clusters", "position", "message")
    assert change.transition == "Pending → Admit"
    queues = {q.name: q for q in diff.queues}
    assert set(queues) == {"research", "research-training"}  # the job and its parent
    training = queues["research-training"]
    assert training.before and training.after
    assert (training.before.admitted, training.after.admitted) == (1, 2)
    assert training.after.share > training.before.share
    assert {"share", "usage", "admitted", "pending"} <= set(training.fields)
    assert diff.summary() == "1 of 6 decisions differ (1 Pending → Admit); 2 queue(s) change"


def test_best_effort_to_strict_is_the_same_change_reversed(base, tmp_path):
    forward = diff_results(base, head(tmp_path, STRICT_TO_BEST_EFFORT))
    backward = diff_results(head(tmp_path / "again", STRICT_TO_BEST_EFFORT), base)
    [there], [back] = forward.decisions, backward.decisions
    assert (back.before, back.after) == (there.after, there.before)
    assert back.transition == "Admit → Pending"
    assert [q.name for q in backward.queues] == [q.name for q in forward.queues]


def test_a_weight_changes_the_share_and_no_decision(base, tmp_path):
    diff = diff_results(base, head(tmp_path, TRAINING_WEIGHT))
    assert diff.decisions == ()
    [training] = diff.queues
    assert (training.name, training.fields) == ("research-training", ("share",))
    assert training.before and training.after
    assert training.after.share == pytest.approx(3 * training.before.share)
    assert diff.changed


def test_a_guarantee_is_a_queue_change(base, tmp_path):
    diff = diff_results(base, head(tmp_path, INFERENCE_GUARANTEE))
    assert diff.decisions == ()
    [inference] = diff.queues
    assert (inference.name, inference.fields) == ("prod-inference", ("guarantee",))
    assert inference.before and inference.after
    assert vector_changes(inference.before.guarantee, inference.after.guarantee) == (
        ("nvidia.com/gpu", 16_000, 24_000),
    )


def test_a_placement_filter_that_excludes_the_chosen_cluster(base, tmp_path):
    diff = diff_results(base, head(tmp_path, INFERENCE_OFF_GPU_WEST))
    [change] = diff.decisions
    assert change.workload == "Job.batch.volcano.sh/inference/summarize-backfill"
    assert change.before and change.after
    assert change.before.clusters == (ClusterAssignment("gpu-west", 2),)
    assert (change.after.action, change.after.clusters) == (Action.PENDING, ())
    assert [q.name for q in diff.queues] == ["prod-inference"]


def test_changes_are_listed_by_queue_then_job(base, tmp_path):
    diff = diff_results(base, head(tmp_path, STRICT_TO_BEST_EFFORT, INFERENCE_OFF_GPU_WEST))
    keys = [(c.queue, c.workload) for c in diff.decisions]
    assert keys == sorted(keys) and len(keys) == 2


# --- a job decided on one side only (a victim), synthetic ---------------------------------------


def decision(binding: str, action: Action, reason: Reason, **more) -> Decision:
    return Decision(binding, f"Job.batch/{binding}", "q", "t", 0, action, reason, "m", **more)


def result(*decisions: Decision, share: float = 0.0, usage: int = 0) -> CycleResult:
    queue = QueueReport("q", "", {"nvidia.com/gpu": usage, "pods": 1}, {}, {}, share, 1, 0)
    return CycleResult("v", NOW, decisions, (queue,))


def test_a_victim_on_one_side_has_no_decision_on_the_other():
    waiting = decision("ns/big", Action.PENDING, Reason.WAITING_FOR_QUOTA, position=1)
    preempting = waiting._replace(reason=Reason.PREEMPTING, victims=("ns/small",))
    victim = decision("ns/small", Action.PREEMPT, Reason.PREEMPTED, preemptor="ns/big")
    diff = diff_results(result(waiting), result(preempting, victim))
    by_binding = {c.binding: c for c in diff.decisions}
    assert by_binding["ns/small"].before is None
    assert by_binding["ns/small"].transition == "- → Preempt"
    assert by_binding["ns/big"].fields == ("reason", "victims")
    assert diff.queues == ()
    shown = json.loads(json.dumps(diffreport.to_json(diff, "a", "b")))
    assert [d["before"] is None for d in shown["decisions"]] == [False, True]
    assert "(no decision)" in diffreport.table(diff, "a", "b")


def test_shares_are_compared_as_printed_and_pods_are_not_a_quota():
    assert not diff_results(result(share=0.1), result(share=0.1 + 1e-9)).changed
    assert vector_changes({"pods": 1, "cpu": 1000}, {"pods": 2, "cpu": 1000}) == ()
    assert vector_changes({"cpu": 1000}, {}) == (("cpu", 1000, None),)


# --- formats ------------------------------------------------------------------------------------


@pytest.fixture
def strategy_diff(base, tmp_path) -> Diff:
    return diff_results(base, head(tmp_path, STRICT_TO_BEST_EFFORT))


def test_table_lists_each_change_with_its_messages(strategy_diff):
    text = diffreport.table(strategy_diff, "policies", "proposed")
    lines = text.splitlines()
    assert lines[0] == f"base policies (policy version {strategy_diff.base_version})"
    assert lines[2].endswith("1 of 6 decisions differ (1 Pending → Admit); 2 queue(s) change")
    row = next(line for line in lines if line.startswith("PyTorchJob/research/resnet-ablation"))
    assert row.split()[1:5] == ["research-training", "Pending", "BlockedByHead", "#2"]
    assert "    before: StrictFIFO queue research-training: waits behind its head" in text
    assert any(line.startswith("research-training ") and "1 → 2" in line for line in lines)


def test_markdown_fits_a_pull_request_comment(strategy_diff):
    text = diffreport.markdown(strategy_diff, "policies", "proposed")
    lines = text.splitlines()
    assert lines[0] == "### fleetgate diff: " + strategy_diff.summary()
    assert "| Job | Queue | Before | After |" in lines
    assert "| Queue | Share | Admitted | Pending | Quota changes |" in lines
    assert any(line.startswith("| `PyTorchJob/research/resnet-ablation` |") for line in lines)
    assert "<details><summary>Why each decision changed</summary>" in lines
    assert lines[-1] == "</details>"
    for start in (
        lines.index("| Job | Queue | Before | After |"),
        lines.index("| Queue | Share | Admitted | Pending | Quota changes |"),
    ):
        block = list(itertools.takewhile(lambda line: line.startswith("|"), lines[start:]))
        assert len(block) > 2
        assert {len(re.findall(r"(?<!\\)\|", line)) for line in block} == {lines[start].count("|")}


def test_markdown_of_no_change_is_one_line_and_its_context(base):
    text = diffreport.markdown(diff_results(base, base), "a", "b")
    assert text.splitlines()[0].startswith("### fleetgate diff: no decision changes")
    assert "|" not in text and "<details>" not in text


def test_markdown_caps_its_rows_and_says_where_the_rest_are(strategy_diff):
    text = diffreport.markdown(strategy_diff, "a", "b", limit=1)
    assert "…and 1 more queue(s); `-o json` lists every one." in text


def test_json_shape(strategy_diff):
    shown = json.loads(json.dumps(diffreport.to_json(strategy_diff, "policies", "proposed")))
    assert set(shown) == {
        "base", "head", "now", "changed", "summary", "compared", "decisions", "queues",
    }  # fmt: skip
    assert shown["base"] == {"policies": "policies", "policyVersion": strategy_diff.base_version}
    assert shown["now"] == "2025-03-10T10:00:00Z" and shown["changed"] is True
    [change] = shown["decisions"]
    assert set(change) == {"workload", "binding", "queue", "changed", "before", "after"}
    assert change["before"]["reason"] == "BlockedByHead" and change["after"]["action"] == "Admit"
    assert change["changed"] == ["action", "reason", "clusters", "position", "message"]
    assert {q["name"] for q in shown["queues"]} == {"research", "research-training"}
    assert all(set(q) == {"name", "changed", "before", "after"} for q in shown["queues"])


def test_the_comparison_and_its_formats_read_no_file_and_run_no_program():
    from tests.test_layering import imported_roots

    for module in ("diff.py", "diffreport.py"):
        roots = imported_roots(REPO / "engine" / module)
        assert roots.isdisjoint({"subprocess", "os", "pathlib", "tempfile", "shutil"}), module
