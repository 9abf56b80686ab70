"""`fleetgate dry-run --job`: templates submitted to the example fleet, bound as Karmada would."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleetgate.cli import main
from tests.conftest import REPO

SNAPSHOT = REPO / "examples" / "fleet-snapshot.yaml"
EXAMPLE_JOB = REPO / "examples" / "jobs" / "pytorch-finetune.yaml"
ARGS = [
    "dry-run",
    "--policies",
    str(REPO / "policies"),
    "--snapshot",
    str(SNAPSHOT),
    "--now",
    "2025-03-10T10:00:00Z",
]
SNAPSHOT_DECISIONS = 6


def run(capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str, str]:
    code = main([*ARGS, *extra])
    out, err = capsys.readouterr()
    return code, out, err


def decisions(capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, dict, str]:
    code, out, err = run(capsys, "-o", "json", *extra)
    return code, {d["workload"]: d for d in json.loads(out)["decisions"]}, err


def example_job() -> dict[str, Any]:
    return yaml.safe_load(EXAMPLE_JOB.read_text())


def write(path: Path, *objects: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump_all(objects))
    return path


def renamed(obj: dict[str, Any], name: str, namespace: str = "research") -> dict[str, Any]:
    copy = json.loads(json.dumps(obj))
    copy["metadata"] |= {"name": name, "namespace": namespace}
    return copy


def snapshot_item(name: str) -> dict[str, Any]:
    items = yaml.safe_load(SNAPSHOT.read_text())["items"]
    return next(i for i in items if i["metadata"]["name"] == name)


def test_the_example_job_is_bound_held_and_decided(capsys: pytest.CaptureFixture[str]):
    code, by_job, err = decisions(capsys, "--job", str(EXAMPLE_JOB))
    assert code == 0
    assert len(by_job) == SNAPSHOT_DECISIONS + 1
    new = by_job["PyTorchJob/research/mistral-finetune"]
    assert new["binding"] == "research/mistral-finetune-pytorchjob"
    assert (new["action"], new["queue"], new["priority"]) == ("Admit", "research-experiments", 1000)
    assert new["clusters"] == [{"name": "gpu-east", "replicas": 1}]
    # decided with the rest: it takes the queue's last GPUs from the lower-priority vit-probe
    probe = by_job["RayJob/research/vit-probe"]
    assert (probe["action"], probe["reason"]) == ("Pending", "WaitingForQuota")
    assert (
        f"note: {EXAMPLE_JOB}: PyTorchJob/research/mistral-finetune: selected by "
        "PropagationPolicy research/research-jobs (by kind, priority 0); ResourceBinding "
        "research/mistral-finetune-pytorchjob created and held by fleetgate"
    ) in err.splitlines()


def test_the_table_shows_the_job_and_explain_finds_it(capsys: pytest.CaptureFixture[str]):
    code, out, _ = run(capsys, "--job", str(EXAMPLE_JOB))
    assert code == 0
    [row] = [line for line in out.splitlines() if "mistral-finetune" in line]
    assert row.split()[:2] == ["Admit", "PyTorchJob/research/mistral-finetune"]
    code, out, _ = run(
        capsys, "--job", str(EXAMPLE_JOB), "--explain", "research/mistral-finetune-pytorchjob"
    )
    assert code == 0
    assert "decision  Admit: Admitted" in out


def test_several_templates_per_file_and_several_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    job = example_job()
    two = write(tmp_path / "two.yaml", renamed(job, "a"), renamed(job, "b"))
    one = write(tmp_path / "one.yaml", renamed(job, "c"))
    code, by_job, err = decisions(capsys, "--job", str(two), "--job", str(one))
    assert code == 0
    assert {"PyTorchJob/research/a", "PyTorchJob/research/b", "PyTorchJob/research/c"} <= set(
        by_job
    )
    assert err.count("created and held by fleetgate") == 3


def test_a_template_no_policy_claims_is_an_error_that_names_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    job = example_job()
    path = write(tmp_path / "jobs.yaml", renamed(job, "orphan", "sandbox"), renamed(job, "ok"))
    code, by_job, err = decisions(capsys, "--job", str(path))
    assert code == 1
    assert "PyTorchJob/sandbox/orphan" not in by_job
    assert "PyTorchJob/research/ok" in by_job  # the rest are still decided
    assert (
        f"error: {path}: PyTorchJob/sandbox/orphan: no policy claims it (no PropagationPolicy in "
        "namespace sandbox and no ClusterPropagationPolicy selects kubeflow.org/v1 PyTorchJob "
        "'orphan'); Karmada would create no ResourceBinding and fleetgate would never see the job"
    ) in err.splitlines()


def test_a_malformed_template_is_an_error_naming_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    job = example_job()
    master = job["spec"]["pytorchReplicaSpecs"]["Master"]
    master["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "lots"
    path = write(tmp_path / "bad.yaml", job)
    code, by_job, err = decisions(capsys, "--job", str(path))
    assert code == 1
    assert len(by_job) == SNAPSHOT_DECISIONS
    [line] = [line for line in err.splitlines() if line.startswith("error:")]
    assert line.startswith(f"error: {path}: PyTorchJob/research/mistral-finetune: spec.")
    assert "requests.cpu" in line and "'lots' is not a quantity" in line


def test_a_template_already_bound_keeps_its_binding(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    path = write(tmp_path / "again.yaml", snapshot_item("resnet-ablation"))
    code, by_job, err = decisions(capsys, "--job", str(path))
    assert code == 0
    assert len(by_job) == SNAPSHOT_DECISIONS
    assert by_job["PyTorchJob/research/resnet-ablation"]["binding"] == (
        "research/resnet-ablation-pytorchjob"
    )
    assert (
        f"note: {path}: PyTorchJob/research/resnet-ablation: already bound by ResourceBinding "
        "research/resnet-ablation-pytorchjob; kept that binding and the snapshot's template"
    ) in err.splitlines()
    assert "Duplicate" not in err


@pytest.mark.parametrize("content", [None, "", "kind: [unclosed\n"])
def test_a_job_file_that_cannot_be_read_runs_no_cycle(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | None
):
    path = tmp_path / "job.yaml"
    if content is not None:
        path.write_text(content)
    code, out, err = run(capsys, "--job", str(path))
    assert code == 1
    assert out == ""
    assert str(path) in err
    assert "the --job files cannot be read; no cycle was run" in err


def test_a_template_without_a_namespace_goes_to_default(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    job = example_job()
    del job["metadata"]["namespace"]
    path = write(tmp_path / "job.yaml", job)
    code, _, err = decisions(capsys, "--job", str(path))
    assert code == 1
    assert "PyTorchJob/default/mistral-finetune: no policy claims it" in err


def test_a_binding_out_of_the_webhook_scope_is_not_decided(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    policies = tmp_path / "policies"
    policies.mkdir()
    for source in (REPO / "policies").iterdir():
        text = source.read_text()
        if source.name == "scheduling.yaml":
            text = text.replace("spec:\n", "spec:\n  scope: resource.name != 'mistral-finetune'\n")
        (policies / source.name).write_text(text)
    code = main([*ARGS, "--policies", str(policies), "-o", "json", "--job", str(EXAMPLE_JOB)])
    out, err = capsys.readouterr()
    assert code == 0
    assert "mistral-finetune" not in out
    assert "is out of the webhook's scope" in err


# -- templates a snapshot holds without a binding ------------------------------------------------


def snapshot_with(tmp_path: Path, *extra: dict[str, Any]) -> Path:
    return write(tmp_path / "extra.yaml", *extra)


def test_a_snapshot_template_without_a_binding_is_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    extra = snapshot_with(tmp_path, example_job())
    code, out, _ = run(capsys, "--snapshot", str(SNAPSHOT), str(extra))
    assert code == 0
    warnings = [line for line in out.splitlines() if "PyTorchJob/research/mistral-finetune" in line]
    assert len(warnings) == 1
    assert warnings[0].startswith(
        f"warning: {extra}: PyTorchJob/research/mistral-finetune: no ResourceBinding refers to "
        "this job, so it is not decided: Karmada's detector has not created it yet"
    )
    assert (
        "has not created it yet (selected by PropagationPolicy research/research-jobs"
        in (warnings[0])
    )


def test_an_unbound_template_no_policy_claims_says_it_never_will(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    extra = snapshot_with(tmp_path, renamed(example_job(), "stray", "sandbox"))
    _, out, _ = run(capsys, "--snapshot", str(SNAPSHOT), str(extra))
    [warning] = [line for line in out.splitlines() if "PyTorchJob/sandbox/stray" in line]
    assert "Karmada will never create one: no PropagationPolicy in namespace sandbox" in warning


def test_passing_an_unbound_snapshot_template_with_job_decides_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    extra = snapshot_with(tmp_path, example_job())
    code, by_job, err = decisions(
        capsys, "--snapshot", str(SNAPSHOT), str(extra), "--job", str(EXAMPLE_JOB)
    )
    assert code == 0
    assert by_job["PyTorchJob/research/mistral-finetune"]["action"] == "Admit"
    assert "Unbound" not in err and "Duplicate" not in err


def test_a_binding_name_another_template_owns_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    # a batch/v1 Job named like the snapshot's Volcano Job: both bindings are summarize-backfill-job
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "summarize-backfill", "namespace": "inference"},
        "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}},
    }
    path = write(tmp_path / "job.yaml", job)
    code, by_job, err = decisions(capsys, "--job", str(path))
    assert code == 1
    assert len(by_job) == SNAPSHOT_DECISIONS
    [line] = [line for line in err.splitlines() if line.startswith("error:")]
    assert line.startswith(f"error: {path}: ")
    assert "ResourceBinding inference/summarize-backfill-job already exists for " in line
    assert "(batch.volcano.sh/v1alpha1)" in line
