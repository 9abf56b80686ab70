"""What the Job page draws beyond a decision: its gang's pods, its dependencies (with the state
of each job it names) and its group's members (``PassView.detail``), on the example pipeline
and HyperJob snapshots that docs/pipelines.md and docs/multi-cluster-training.md show."""

from __future__ import annotations

import datetime as dt

import yaml

from engine.cycle import run_cycle
from engine.fleet.files import read_objects
from engine.fleet.snapshot import build_snapshot
from engine.policy.policyset import load_policy_set
from reconciler.jobsview import PassView, build_view
from reconciler.latest import reserved_by_queue
from tests.conftest import REPO
from tests.cycle import builders
from tests.cycle.test_scenarios import load_policies

NOW = dt.datetime(2025, 3, 10, 10, tzinfo=dt.UTC)


def view_of(snapshot: str, policies: str) -> PassView:
    objects, issues = read_objects([REPO / snapshot])
    assert not issues
    policy = load_policy_set([REPO / policies])
    return build_view(run_cycle(build_snapshot(objects), policy, NOW), policy)


def test_a_waiting_stage_names_what_it_waits_for_and_its_state() -> None:
    view = view_of("examples/pipeline/snapshot.yaml", "policies")
    entry = view.find("research", "evaluate")
    assert entry is not None
    detail = view.detail(entry)
    assert detail["reason"] == "WaitingForDependency"
    after, same = detail["dependencies"]  # fleetgate.io/after, then same-cluster-as
    assert (after["condition"], same["condition"]) == ("succeeded", "placed")
    named = view.find("research", "train")
    assert named is not None
    for found in (after, same):
        assert found["job"].endswith("research/train")
        assert (found["state"], found["binding"]) == (named.state, named.ref)
    assert detail["pods"] >= 1
    # a job no decision names (it failed, so train-v2 never runs): its state from the records
    doomed = view.find("research", "train-v2")
    assert doomed is not None
    [tokenize] = view.detail(doomed)["dependencies"]
    assert tokenize["job"].endswith("research/tokenize-v2") and tokenize["state"] == "finished"
    # and one not in the fleet at all
    report = view.find("research", "report")
    assert report is not None
    [benchmark] = view.detail(report)["dependencies"]
    assert (benchmark["state"], benchmark["binding"]) == (None, None)


def test_a_group_member_lists_its_groups_members() -> None:
    view = view_of("examples/hyperjob/snapshot.yaml", "examples/hyperjob/policies")
    entry = view.find("research", "llm-pretrain-trainer-1")
    assert entry is not None
    detail = view.detail(entry)
    members = {m["binding"] for m in detail["groupMembers"]}
    assert entry.ref in members and len(members) == detail["group"]["present"] >= 2
    assert all(
        m["state"] in ("pending", "admitted", "rejected", None) for m in detail["groupMembers"]
    )


def test_a_queues_reservations_count_its_whole_subtree(tmp_path) -> None:
    path = (
        REPO
        / "tests/scenarios/a-gang-waiting-past-reservations-after-keeps-the-nodes-it-needs.yaml"
    )
    spec = yaml.safe_load(path.read_text())
    spec["policies"][0]["spec"] = {"parent": "all"}  # queue a under a parent
    spec["policies"].append({"kind": "Queue", "metadata": {"name": "all"}, "spec": {}})
    policies = load_policies(spec["policies"], tmp_path)
    view = build_view(run_cycle(builders.snapshot(spec), policies, builders.NOW), policies)
    assert [e.reason for e in view.jobs if e.reason == "Reserved"] == ["Reserved"]
    assert reserved_by_queue(view) == {"a": 1, "all": 1}
