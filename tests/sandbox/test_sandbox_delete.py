"""Deletion through the real client: finalizers, ownerReferences cascades, namespaces."""

from __future__ import annotations

import pytest
from kubernetes.client import CoreV1Api, CustomObjectsApi, V1DeleteOptions
from kubernetes.client.rest import ApiException

from tests.sandbox.builders import RB_PLURAL, WORK, binding, owner_ref, pytorchjob

GROUP, VERSION = WORK
KF = ("kubeflow.org", "v1", "default", "pytorchjobs")


def job_with_binding(custom: CustomObjectsApi, name: str = "train") -> tuple[dict, dict]:
    job = custom.create_namespaced_custom_object(*KF, pytorchjob(name))
    rb = binding(name)
    rb["metadata"]["ownerReferences"] = [owner_ref(job)]
    return job, custom.create_namespaced_custom_object(GROUP, VERSION, "default", RB_PLURAL, rb)


def rb_names(custom: CustomObjectsApi) -> list[str]:
    listed = custom.list_namespaced_custom_object(GROUP, VERSION, "default", RB_PLURAL)
    return [item["metadata"]["name"] for item in listed["items"]]


def test_background_delete_cascades_to_dependents(custom: CustomObjectsApi):
    job_with_binding(custom)
    custom.delete_namespaced_custom_object(*KF, "train")
    assert rb_names(custom) == []


def test_orphan_delete_keeps_dependents_without_the_reference(custom: CustomObjectsApi):
    job_with_binding(custom)
    custom.delete_namespaced_custom_object(*KF, "train", propagation_policy="Orphan")
    rb = custom.get_namespaced_custom_object(
        GROUP, VERSION, "default", RB_PLURAL, "train-pytorchjob"
    )
    assert "ownerReferences" not in rb["metadata"]


def test_foreground_delete_waits_for_dependents(custom: CustomObjectsApi):
    job, _ = job_with_binding(custom)
    rb = custom.get_namespaced_custom_object(
        GROUP, VERSION, "default", RB_PLURAL, "train-pytorchjob"
    )
    custom.patch_namespaced_custom_object(
        GROUP,
        VERSION,
        "default",
        RB_PLURAL,
        "train-pytorchjob",
        {"metadata": {"finalizers": ["fleetgate.io/hold"]}},
    )
    custom.delete_namespaced_custom_object(
        *KF, "train", body=V1DeleteOptions(propagation_policy="Foreground")
    )
    owner = custom.get_namespaced_custom_object(*KF, "train")
    assert owner["metadata"]["deletionTimestamp"]
    assert "foregroundDeletion" in owner["metadata"]["finalizers"]
    rb = custom.get_namespaced_custom_object(
        GROUP, VERSION, "default", RB_PLURAL, "train-pytorchjob"
    )
    assert rb["metadata"]["deletionTimestamp"]  # its own finalizer keeps it

    custom.patch_namespaced_custom_object(
        GROUP, VERSION, "default", RB_PLURAL, "train-pytorchjob", {"metadata": {"finalizers": None}}
    )
    assert rb_names(custom) == []
    with pytest.raises(ApiException) as caught:
        custom.get_namespaced_custom_object(*KF, "train")
    assert caught.value.status == 404
    assert job["metadata"]["uid"]


def test_finalizers_hold_an_object_until_removed(custom: CustomObjectsApi):
    body = binding("a")
    body["metadata"]["finalizers"] = ["karmada.io/binding-controller"]
    created = custom.create_namespaced_custom_object(GROUP, VERSION, "default", RB_PLURAL, body)
    custom.delete_namespaced_custom_object(GROUP, VERSION, "default", RB_PLURAL, "a-pytorchjob")
    held = custom.get_namespaced_custom_object(GROUP, VERSION, "default", RB_PLURAL, "a-pytorchjob")
    assert held["metadata"]["deletionTimestamp"]
    assert held["metadata"]["generation"] == created["metadata"]["generation"] + 1
    held["metadata"]["finalizers"] = []
    custom.replace_namespaced_custom_object(
        GROUP, VERSION, "default", RB_PLURAL, "a-pytorchjob", held
    )
    assert rb_names(custom) == []


def test_delete_precondition_on_uid(core: CoreV1Api):
    core.create_namespaced_config_map("default", {"metadata": {"name": "c"}})
    with pytest.raises(ApiException) as caught:
        core.delete_namespaced_config_map(
            "c", "default", body=V1DeleteOptions(preconditions={"uid": "other"})
        )
    assert caught.value.status == 409


def test_delete_collection_by_label(core: CoreV1Api):
    for name, team in (("a", "x"), ("b", "x"), ("c", "y")):
        core.create_namespaced_config_map(
            "default", {"metadata": {"name": name, "labels": {"team": team}}}
        )
    core.delete_collection_namespaced_config_map("default", label_selector="team=x")
    assert [c.metadata.name for c in core.list_namespaced_config_map("default").items] == ["c"]


def test_deleting_a_namespace_deletes_its_content(core: CoreV1Api, custom: CustomObjectsApi):
    core.create_namespace({"metadata": {"name": "team-a"}})
    core.create_namespaced_config_map("team-a", {"metadata": {"name": "c"}})
    custom.create_namespaced_custom_object(
        GROUP, VERSION, "team-a", RB_PLURAL, binding("a", namespace="team-a")
    )
    core.delete_namespace("team-a")
    assert "team-a" not in [n.metadata.name for n in core.list_namespace().items]
    assert (
        core.list_config_map_for_all_namespaces(field_selector="metadata.namespace=team-a").items
        == []
    )


def test_terminating_namespace_refuses_new_content(core: CoreV1Api):
    core.create_namespace({"metadata": {"name": "team-a"}})
    core.create_namespaced_config_map("team-a", {"metadata": {"name": "c", "finalizers": ["x/y"]}})
    core.delete_namespace("team-a")
    assert core.read_namespace("team-a").status.phase == "Terminating"
    with pytest.raises(ApiException) as caught:
        core.create_namespaced_config_map("team-a", {"metadata": {"name": "d"}})
    assert caught.value.status == 403
    core.patch_namespaced_config_map("c", "team-a", {"metadata": {"finalizers": None}})
    assert "team-a" not in [n.metadata.name for n in core.list_namespace().items]
