"""`fleetgate inspect` against hand-computed demand of manifests modelled on upstream examples.

Each ``tests/fixtures/workloads/<case>.yaml`` has a ``<case>.expected.yaml`` beside it: the
workload entries `inspect -o json` must print, with the arithmetic in its header comment.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from fleetgate.cli import main
from tests.conftest import REPO

FIXTURES = REPO / "tests" / "fixtures" / "workloads"


def cases() -> list[Path]:
    return sorted(p for p in FIXTURES.glob("*.yaml") if not p.name.endswith(".expected.yaml"))


@pytest.mark.parametrize("manifest", cases(), ids=lambda p: p.stem)
def test_inspect_matches_hand_computed_demand(manifest: Path, capsys):
    expected_file = manifest.with_name(f"{manifest.stem}.expected.yaml")
    assert expected_file.is_file(), f"{expected_file.name} is missing"
    expected = yaml.safe_load(expected_file.read_text())
    code = main(["inspect", str(manifest), "-o", "json"])
    printed = json.loads(capsys.readouterr().out)
    assert printed["errors"] == []
    assert code == 0
    assert printed["workloads"] == expected


def test_there_are_fixtures_for_every_family():
    kinds = set()
    for manifest in cases():
        for doc in yaml.safe_load_all(manifest.read_text()):
            if isinstance(doc, dict):
                kinds.add(doc.get("kind"))
    wanted = {"Job", "PyTorchJob", "TFJob", "MPIJob", "SparkApplication", "RayJob", "RayCluster"}
    assert wanted <= kinds


def test_inspect_reads_a_kubectl_list(capsys):
    snapshot = REPO / "examples" / "fleet-snapshot.yaml"
    items = yaml.safe_load(snapshot.read_text())["items"]
    workload_kinds = {"PyTorchJob", "MPIJob", "RayJob", "SparkApplication", "Job"}
    expected = sorted(i["metadata"]["name"] for i in items if i["kind"] in workload_kinds)
    assert main(["inspect", str(snapshot), "-o", "json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert sorted(w["name"] for w in printed["workloads"]) == expected


def test_one_bad_object_is_an_error_and_the_rest_are_printed(tmp_path, capsys):
    good = (FIXTURES / "pytorch-gpu.yaml").read_text()
    bad = """\
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: broken, namespace: ml}
spec:
  tasks:
    - name: worker
      replicas: 2
      template:
        spec:
          containers:
            - name: main
              resources: {requests: {cpu: 2x}}
"""
    path = tmp_path / "mixed.yaml"
    path.write_text(good + "\n---\n" + bad)
    assert main(["inspect", str(path), "-o", "json"]) == 1
    printed = json.loads(capsys.readouterr().out)
    assert [w["name"] for w in printed["workloads"]] == ["llama-ft"]
    assert printed["errors"] == [
        {
            "file": str(path),
            "line": None,  # positions are known for YAML errors only
            "column": None,
            "object": "Job.batch.volcano.sh/ml/broken",
            "path": "spec.tasks[0].template.spec.containers[0].resources.requests.cpu",
            "message": "'2x' is not a quantity: expected a number with an optional suffix "
            "(n u m k M G T P E, Ki Mi Gi Ti Pi Ei, or an exponent like e3)",
        }
    ]


def test_an_object_named_by_generate_name_is_shown_with_a_star(capsys):
    code = main(["inspect", str(FIXTURES / "kueue-generate-name.yaml")])
    lines = capsys.readouterr().out.splitlines()
    assert code == 0
    assert len(lines) == 2
    assert lines[1].split() == [
        "Job.batch",
        "default",
        "sample-job-*",
        "user-queue",
        "3",
        "3",
        "3",
        "600Mi",
        "0",
        "-",
    ]


def test_an_object_without_name_or_generate_name_is_an_error(tmp_path, capsys):
    manifest = yaml.safe_load((FIXTURES / "kueue-generate-name.yaml").read_text())
    del manifest["metadata"]["generateName"]
    path = tmp_path / "nameless.yaml"
    path.write_text(yaml.safe_dump(manifest))
    assert main(["inspect", str(path)]) == 1
    errors = [line for line in capsys.readouterr().out.splitlines() if line.startswith("error:")]
    where = f"error: {path}: Job.batch/default/<unnamed>"
    assert errors == [f"{where}: metadata.name: required (or metadata.generateName)"]
