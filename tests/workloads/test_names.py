"""A Volcano Job and a batch/v1 Job never print alike: kinds that two API groups share are
qualified as kubectl qualifies them (``Job.batch``), in every command and message."""

from __future__ import annotations

import json

import pytest

from engine.workloads.names import qualified_kind, qualified_name
from fleetgate.cli import main
from tests.conftest import REPO


@pytest.mark.parametrize(
    ("api_version", "kind", "shown"),
    [
        ("batch/v1", "Job", "Job.batch"),
        ("batch.volcano.sh/v1alpha1", "Job", "Job.batch.volcano.sh"),
        ("example.com/v1", "Job", "Job.example.com"),  # shares the name of a kind read
        ("kubeflow.org/v1", "PyTorchJob", "PyTorchJob"),  # one group only: kept short
        ("example.com/v1", "TrainingRun", "TrainingRun"),  # unknown kind, no clash
    ],
)
def test_only_kinds_whose_name_is_ambiguous_are_qualified(api_version, kind, shown):
    assert qualified_kind(api_version, kind) == shown
    assert qualified_name(api_version, kind, "ns", "x") == f"{shown}/ns/x"
    assert qualified_name(api_version, kind, "", "x") == f"{shown}/x"


def test_dry_run_and_inspect_name_the_two_job_kinds_apart(capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    snapshot = "examples/fleet-snapshot.yaml"
    args = ["--policies", "policies/", "--snapshot", snapshot, "--now", "2025-03-10T10:00:00Z"]
    main(["dry-run", *args, "-o", "json"])
    workloads = {d["workload"] for d in json.loads(capsys.readouterr().out)["decisions"]}
    assert "Job.batch.volcano.sh/inference/summarize-backfill" in workloads
    assert "Job.batch/team-data/tokenizer-stats" in workloads
    assert not any(w.startswith("Job/") for w in workloads)
    main(["dry-run", *args])
    table = capsys.readouterr().out
    assert "Job.batch.volcano.sh/inference/summarize-backfill" in table
    # a BlockedByHead message names the head the way the JOB column does
    assert "waits behind its head MPIJob/research/llama-finetune" in table
    main(["inspect", snapshot])
    inspected = capsys.readouterr().out
    assert "Job.batch.volcano.sh" in inspected and "Job.batch " in inspected
