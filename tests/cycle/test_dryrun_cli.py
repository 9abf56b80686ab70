"""`fleetgate dry-run` on the shipped example: the table, the JSON contract, --explain, exits."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fleetgate.cli import main
from tests.conftest import REPO

ARGS = [
    "dry-run",
    "--policies",
    str(REPO / "policies"),
    "--snapshot",
    str(REPO / "examples" / "fleet-snapshot.yaml"),
    "--now",
    "2025-03-10T10:00:00Z",
]
DECISION_KEYS = {
    "binding",
    "workload",
    "queue",
    "tenant",
    "priority",
    "action",
    "clusters",
    "reason",
    "message",
    "position",
    "clusterReasons",
}
QUEUE_KEYS = {"name", "parent", "usage", "guarantee", "max", "share", "admitted", "pending"}


def run(capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str, str]:
    code = main([*ARGS, *extra])
    out, err = capsys.readouterr()
    return code, out, err


def test_json_follows_the_contract(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "-o", "json")
    assert code == 0
    result = json.loads(out)
    assert set(result) == {"policyVersion", "now", "decisions", "queues"}
    assert result["now"] == "2025-03-10T10:00:00Z"
    pending_bindings = 6  # the example's managed bindings without an admission
    assert len(result["decisions"]) == pending_bindings
    for decision in result["decisions"]:
        assert set(decision) >= DECISION_KEYS
        assert decision["action"] in {"Admit", "Pending", "Preempt", "Reject"}
        admitted = decision["action"] == "Admit"
        assert (decision["position"] is None) == admitted
        for cluster in decision["clusters"]:
            assert set(cluster) == {"name", "replicas"}
    by_job = {d["workload"]: d for d in result["decisions"]}
    head = by_job["MPIJob/research/llama-finetune"]
    assert (head["action"], head["reason"], head["position"]) == ("Pending", "WaitingForQuota", 1)
    behind = by_job["PyTorchJob/research/resnet-ablation"]
    assert (behind["reason"], behind["position"]) == ("BlockedByHead", 2)
    inference = by_job["Job.batch.volcano.sh/inference/summarize-backfill"]
    assert inference["clusters"] == [{"name": "gpu-west", "replicas": 2}]
    assert by_job["RayJob/research/vit-probe"]["clusters"][0]["name"] == "gpu-east"
    queues = {q["name"]: q for q in result["queues"]}
    assert set(queues) == {
        "analytics",
        "default",
        "prod-inference",
        "research",
        "research-experiments",
        "research-training",
    }
    for queue in queues.values():
        assert set(queue) == QUEUE_KEYS
    research = queues["research"]
    assert research["usage"]["nvidia.com/gpu"] == 40  # 32 running + vit-probe's 8
    assert research["usage"]["nvidia.com/gpu"] <= research["max"]["nvidia.com/gpu"]
    assert (research["admitted"], research["pending"]) == (3, 2)


def test_table_names_every_job_and_queue(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys)
    assert code == 0
    assert out.splitlines()[0].startswith("policy version ")
    for name in ("llama-finetune", "resnet-ablation", "vit-probe", "research-training"):
        assert name in out


def test_explain_by_template_name(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--explain", "research/resnet-ablation")
    assert code == 0
    assert "BlockedByHead" in out
    assert "position  2 in queue research-training" in out


def test_explain_of_an_unknown_job_fails(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "--explain", "research/nope")
    assert code == 1
    assert "no job named 'research/nope' in the snapshot" in err


def test_invalid_policies_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "dry-run",
            "--policies",
            str(REPO / "examples" / "broken"),
            "--snapshot",
            str(REPO / "examples" / "fleet-snapshot.yaml"),
        ]
    )
    _, err = capsys.readouterr()
    assert code == 1
    assert err.strip()


def test_bad_now_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([*ARGS[:-1], "yesterday"])
    assert exit_info.value.code == 2
    assert "not an RFC 3339 time" in capsys.readouterr().err


def unreadable_snapshots(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    """Snapshots that cannot be read: (path, the error line naming the file)."""
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.txt").write_text("no snapshot here")
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"\xff\xfe\x00kind")
    prose = tmp_path / "prose.yaml"
    prose.write_text("kubectl get clusters was not run\n")
    broken = tmp_path / "broken.yaml"
    broken.write_text("kind: List\nitems: [\n")
    missing = tmp_path / "missing.yaml"
    return {
        "missing": (missing, f"{missing}: no such file or directory"),
        "unreadable": (binary, f"{binary}: cannot read: not UTF-8 text (byte 0xff at offset 0)"),
        "directory without YAML": (
            empty,
            f"{empty}: directory holds no .yaml, .yml or .json file",
        ),
        "not YAML": (broken, f"{broken}:3:1: YAML syntax: expected the node content, but found"),
        "not an object": (
            prose,
            f"{prose}:1:1: expected an object with apiVersion and kind, got a string",
        ),
    }


@pytest.mark.parametrize(
    "case", ["missing", "unreadable", "directory without YAML", "not YAML", "not an object"]
)
@pytest.mark.parametrize("output", ["table", "json"])
def test_a_snapshot_that_cannot_be_read_is_an_error(
    case: str, output: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, line = unreadable_snapshots(tmp_path)[case]
    good = str(REPO / "examples" / "fleet-snapshot.yaml")
    code = main([*ARGS[:4], good, str(path), *ARGS[5:], "-o", output])
    out, err = capsys.readouterr()
    assert code == 1
    assert out == ""  # no decisions on part of a fleet
    assert err.splitlines()[0].startswith(line)
    assert "snapshot cannot be read; no cycle was run" in err


def test_malformed_objects_in_a_readable_snapshot_stay_warnings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    extra = tmp_path / "extra.yaml"
    extra.write_text(
        "apiVersion: cluster.karmada.io/v1alpha1\nkind: Cluster\n"
        "metadata: {name: odd}\nspec: {taints: oops}\n"
    )
    code = main([*ARGS[:5], str(extra), *ARGS[5:]])
    out, _ = capsys.readouterr()
    assert code == 0
    [warning] = [line for line in out.splitlines() if line.startswith("warning: ")]
    assert warning.startswith(f"warning: {extra}: Cluster/odd: spec.taints: ")


def test_explain_of_a_running_job_says_where_since_when_what_it_holds_and_who_may_take_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = run(capsys, "--explain", "research/llama-pretrain")
    assert code == 0, err
    assert "PyTorchJob/research/llama-pretrain" in out
    assert "state     Admitted (no decision this cycle)" in out
    assert "clusters  gpu-east (3 pods)" in out
    assert "holds     " in out and "gpu 24" in out
    assert "preempted only by a job of higher priority in its own queue" in out
