"""A policy directory with a kustomization.yaml (``policies/`` generates the webhook's ConfigMap):
the kustomization is not a policy, and a policy file its configMapGenerator does not list is an
error, because ``kubectl kustomize deploy/`` would leave that file out of the deployed set."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest

from engine.errors import PolicyLoadError
from engine.policy.policyset import load_policy_set
from tests.conftest import REPO, queue_doc

KUSTOMIZATION = """\
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
configMapGenerator:
  - name: fleetgate-policies
    files:
{files}
"""


def kustomization(*files: str) -> str:
    return KUSTOMIZATION.format(files="\n".join(f"      - {f}" for f in files))


@pytest.fixture
def policies(tmp_path: Path) -> Path:
    directory = tmp_path / "policies"
    directory.mkdir()
    (directory / "a.yaml").write_text(queue_doc("a"))
    return directory


def messages(directory: Path) -> list[str]:
    with pytest.raises(PolicyLoadError) as info:
        load_policy_set([directory])
    return [str(issue) for issue in info.value.issues]


def test_the_kustomization_is_not_read_as_a_policy(policies: Path):
    (policies / "kustomization.yaml").write_text(kustomization("a.yaml"))
    loaded = load_policy_set([policies])
    assert loaded.files == (str(policies / "a.yaml"),)


def test_a_policy_file_the_generator_does_not_list_is_an_error(policies: Path):
    (policies / "kustomization.yaml").write_text(kustomization("a.yaml"))
    (policies / "b.yml").write_text(queue_doc("b"))
    (policies / "teams").mkdir()
    (policies / "teams" / "c.yaml").write_text(queue_doc("c"))
    found = messages(policies)
    assert len(found) == 2
    for name in ("b.yml", "teams/c.yaml"):
        assert any(
            m.startswith(f"{policies / name}: not listed in {policies / 'kustomization.yaml'}")
            for m in found
        ), found


def test_files_listed_with_a_key_or_a_dot_path_count(policies: Path):
    (policies / "b.yaml").write_text(queue_doc("b"))
    (policies / "kustomization.yaml").write_text(kustomization("./a.yaml", "queues-b.yaml=b.yaml"))
    assert len(load_policy_set([policies]).queues) == 2


def test_a_kustomization_without_a_configmap_generator_asks_nothing(policies: Path):
    (policies / "kustomization.yaml").write_text("resources: []\n")
    assert len(load_policy_set([policies]).queues) == 1


def test_a_kustomization_that_is_not_yaml_is_named(policies: Path):
    (policies / "kustomization.yaml").write_text("configMapGenerator: [\n")
    [message] = messages(policies)
    assert message.startswith(f"{policies / 'kustomization.yaml'}:")
    assert "YAML syntax" in message


def test_adding_a_file_to_the_shipped_policies_without_listing_it_fails_validate(tmp_path):
    """What a user editing ``policies/`` meets before deploying: ``fleetgate validate`` fails."""
    copy = tmp_path / "policies"
    shutil.copytree(REPO / "policies", copy)
    load_policy_set([copy])
    (copy / "gpu-teams.yaml").write_text(textwrap.dedent(queue_doc("gpu-teams")))
    [message] = messages(copy)
    assert message.startswith(f"{copy / 'gpu-teams.yaml'}: not listed in ")
