"""The webhook applied offline (webhook.hold) to bindings Karmada's detector rules build, and
those bindings checked against the real ResourceBinding CRD."""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from engine import annotations as ann
from engine.fleet.detector import Policy, build_binding
from engine.policy.policyset import PolicySet, load_policy_set
from tests.conftest import REPO
from tests.fleet.builders import policy, pytorch_job
from tests.fleet.test_schemas import unknown_fields
from tests.webhook.helpers import crd_schema
from webhook.hold import apply_patch, hold
from webhook.review import ReviewError

NOW = dt.datetime(2025, 3, 10, 10, 0, tzinfo=dt.UTC)


@pytest.fixture(scope="module")
def policies() -> PolicySet:
    return load_policy_set([REPO / "policies"])


def example_policy(name: str) -> dict[str, Any]:
    snapshot = yaml.safe_load((REPO / "examples" / "fleet-snapshot.yaml").read_text())
    return next(i for i in snapshot["items"] if i["metadata"]["name"] == name)


def deployment() -> dict[str, Any]:
    pod = {
        "containers": [
            {
                "name": "web",
                "image": "nginx",
                "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}},
            }
        ],
        "nodeSelector": {"pool": "general"},
        "tolerations": [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}],
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "research", "uid": "uid-web"},
        "spec": {"replicas": 2, "template": {"spec": pod}},
    }


def test_a_new_binding_is_held_as_the_webhook_holds_it(policies: PolicySet):
    binding = build_binding(pytorch_job("llama"), Policy.read(example_policy("research-jobs")))
    held = hold(binding, policies, NOW)
    assert held.managed
    assert held.binding["spec"]["suspension"] == {"scheduling": True}
    assert held.binding["metadata"]["labels"][ann.MANAGED] == "true"
    notes = held.binding["metadata"]["annotations"]
    assert notes[ann.QUEUED_AT] == "2025-03-10T10:00:00Z"
    assert notes[ann.POLICY_VERSION] == policies.version
    assert "fleetgate.io/managed" not in binding["metadata"]["labels"]  # the input is untouched


def test_holding_keeps_the_suspension_a_policy_set(policies: PolicySet):
    obj = policy("dispatch-later")
    obj["spec"]["suspension"] = {"dispatching": True}
    held = hold(build_binding(pytorch_job("llama"), Policy.read(obj)), policies, NOW)
    assert held.binding["spec"]["suspension"] == {"dispatching": True, "scheduling": True}


def test_a_binding_out_of_the_webhook_scope_is_left_alone(tmp_path: Path):
    shutil.copytree(REPO / "policies", tmp_path / "policies")
    scheduling = tmp_path / "policies" / "scheduling.yaml"
    text = scheduling.read_text().replace(
        "spec:\n", "spec:\n  scope: resource.namespace != 'research'\n", 1
    )
    scheduling.write_text(text)
    scoped = load_policy_set([tmp_path / "policies"])
    binding = build_binding(pytorch_job("llama"), Policy.read(policy("research-jobs")))
    held = hold(binding, scoped, NOW)
    assert not held.managed
    assert held.binding == binding


def test_only_add_operations_are_applied():
    doc = {"metadata": {"labels": {"a/b": "1"}}}
    patched = apply_patch(doc, [{"op": "add", "path": "/metadata/labels/c~1d", "value": "2"}])
    assert patched["metadata"]["labels"] == {"a/b": "1", "c/d": "2"}
    with pytest.raises(ReviewError, match="only 'add'"):
        apply_patch(doc, [{"op": "remove", "path": "/metadata/labels"}])


def built_bindings() -> list[Any]:
    research = Policy.read(example_policy("research-jobs"))
    team_data = Policy.read(example_policy("team-data-jobs"))
    batch_job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "stats", "namespace": "team-data", "uid": "uid-stats"},
        "spec": {"parallelism": 4, "template": deployment()["spec"]["template"]},
    }
    return [
        pytest.param(build_binding(pytorch_job("llama"), research), id="pytorchjob"),
        pytest.param(build_binding(deployment(), research), id="deployment"),
        pytest.param(build_binding(batch_job, team_data), id="job-with-affinities"),
    ]


@pytest.mark.parametrize("binding", built_bindings())
def test_built_and_held_bindings_validate_against_the_karmada_crd(
    karmada_crds: Path, policies: PolicySet, binding: dict[str, Any]
):
    schema = crd_schema(karmada_crds, "work.karmada.io_resourcebindings.yaml")
    for obj in (binding, hold(binding, policies, NOW).binding):
        jsonschema.validate(obj, schema)
        assert list(unknown_fields(obj, schema, {})) == []


def test_a_cluster_resource_binding_validates_against_its_crd(karmada_crds: Path):
    schema = crd_schema(karmada_crds, "work.karmada.io_clusterresourcebindings.yaml")
    template = deployment()
    del template["metadata"]["namespace"]
    binding = build_binding(template, Policy.read(policy("global", cluster_scoped=True)))
    assert binding["kind"] == "ClusterResourceBinding"
    jsonschema.validate(binding, schema)
    assert list(unknown_fields(binding, schema, {})) == []


def test_the_crd_check_catches_a_misspelled_binding_field(karmada_crds: Path):
    schema = crd_schema(karmada_crds, "work.karmada.io_resourcebindings.yaml")
    binding = build_binding(deployment(), Policy.read(policy("p")))
    binding["spec"]["replicaRequirement"] = binding["spec"].pop("replicaRequirements")
    assert list(unknown_fields(binding, schema, {})) == ["spec.replicaRequirement"]
    binding["spec"]["replicas"] = "two"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(binding, schema)
