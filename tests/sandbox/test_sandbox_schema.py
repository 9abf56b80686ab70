"""Karmada objects are validated against the real CRD schemas (FLEETGATE_KARMADA_CRDS)."""

from __future__ import annotations

import json
import os

import pytest
from kubernetes.client import CustomObjectsApi
from kubernetes.client.rest import ApiException

from sandbox.schema import load_schemas
from tests.sandbox.builders import RB_PLURAL, WORK, binding, cluster

GROUP, VERSION = WORK


@pytest.fixture(autouse=True)
def crds_present() -> None:
    schemas = load_schemas()
    if not schemas.validators:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true but no Karmada CRDs: {schemas.note}")
        pytest.skip(schemas.note)


def test_wrong_type_is_422_naming_the_field(custom: CustomObjectsApi):
    body = binding("a", replicas="three")
    with pytest.raises(ApiException) as caught:
        custom.create_namespaced_custom_object(GROUP, VERSION, "default", RB_PLURAL, body)
    assert caught.value.status == 422
    status = json.loads(caught.value.body)
    assert status["reason"] == "Invalid"
    assert status["details"]["causes"][0]["field"] == "spec.replicas"
    assert "spec.replicas in body must be of type integer" in status["message"]


def test_missing_required_field_is_422(custom: CustomObjectsApi):
    body = binding("a")
    del body["spec"]["resource"]
    with pytest.raises(ApiException) as caught:
        custom.create_namespaced_custom_object(GROUP, VERSION, "default", RB_PLURAL, body)
    assert caught.value.status == 422
    assert json.loads(caught.value.body)["details"]["causes"][0]["field"] == "spec.resource"


def test_invalid_patch_is_422_and_changes_nothing(custom: CustomObjectsApi):
    custom.create_namespaced_custom_object(
        GROUP, VERSION, "default", RB_PLURAL, binding("a", replicas=1)
    )
    with pytest.raises(ApiException) as caught:
        custom.patch_namespaced_custom_object(
            GROUP, VERSION, "default", RB_PLURAL, "a-pytorchjob", {"spec": {"clusters": "gpu-east"}}
        )
    assert caught.value.status == 422
    rb = custom.get_namespaced_custom_object(GROUP, VERSION, "default", RB_PLURAL, "a-pytorchjob")
    assert "clusters" not in rb["spec"]


def test_cluster_is_validated_from_the_swagger_definitions(custom: CustomObjectsApi):
    bad = cluster("member1")
    bad["spec"]["taints"] = "NoSchedule"
    with pytest.raises(ApiException) as caught:
        custom.create_cluster_custom_object("cluster.karmada.io", "v1alpha1", "clusters", bad)
    assert caught.value.status == 422
    custom.create_cluster_custom_object(
        "cluster.karmada.io", "v1alpha1", "clusters", cluster("member1")
    )


def test_valid_binding_with_placement_is_accepted(custom: CustomObjectsApi):
    body = binding(
        "a", clusters=[{"name": "member1", "replicas": 1}], suspension={"scheduling": True}
    )
    created = custom.create_namespaced_custom_object(GROUP, VERSION, "default", RB_PLURAL, body)
    assert created["spec"]["clusters"] == [{"name": "member1", "replicas": 1}]


def test_absent_crd_directory_means_no_validation_and_says_so(tmp_path):
    schemas = load_schemas(tmp_path / "absent")
    assert not schemas.validators
    assert "no schema validation" in schemas.note
    schemas.validate(binding("a", replicas="three"), "work.karmada.io")  # accepted


def test_a_metadata_only_update_is_not_validated_again_but_any_other_is(custom, sandbox):
    created = custom.create_namespaced_custom_object(
        GROUP, VERSION, "default", RB_PLURAL, binding("a")
    )
    name = created["metadata"]["name"]
    validated: list[str] = []
    schemas = sandbox.store.schemas

    class Counting:
        def __getattr__(self, name):
            return getattr(schemas, name)

        def validate(self, obj, group):
            validated.append(obj["metadata"]["name"])
            return schemas.validate(obj, group)

    sandbox.store.schemas = Counting()
    try:
        notes = {"metadata": {"annotations": {"fleetgate.io/pending": "QuotaExceeded"}}}
        custom.patch_namespaced_custom_object(GROUP, VERSION, "default", RB_PLURAL, name, notes)
        assert validated == []  # the spec as accepted at create is unchanged
        spec = {"spec": {"replicas": 2}}
        custom.patch_namespaced_custom_object(GROUP, VERSION, "default", RB_PLURAL, name, spec)
        assert validated == [name]
        with pytest.raises(ApiException) as caught:  # and a bad change is still refused
            custom.patch_namespaced_custom_object(
                GROUP, VERSION, "default", RB_PLURAL, name, {"spec": {"replicas": "two"}}
            )
        assert caught.value.status == 422
    finally:
        sandbox.store.schemas = schemas
