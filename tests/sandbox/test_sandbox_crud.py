"""CRUD through the real `kubernetes` client: create, get, list, update, patch, status.

The tests share one server (a module-scoped ``sandbox``): each writes only in a namespace of its
own (``ns``), and each cluster-wide object (a ClusterPropagationPolicy, a Lease, the namespace
team-a) is made by one test alone.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest
from kubernetes.client import CoordinationV1Api, CoreV1Api, CustomObjectsApi
from kubernetes.client.rest import ApiException

from sandbox.server import Sandbox
from tests.sandbox.builders import RB_PLURAL, WORK, binding, pytorchjob
from tests.sandbox.conftest import running_sandbox

GROUP, VERSION = WORK
JSON_PATCH = "application/json-patch+json"  # CustomObjectsApi sends merge patches by default
NAMESPACES = itertools.count()


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    with running_sandbox() as server:
        yield server


@pytest.fixture
def ns(sandbox: Sandbox) -> str:
    """A namespace of the test's own in the shared server."""
    name = f"crud-{next(NAMESPACES)}"
    sandbox.store.create("namespaces", {"metadata": {"name": name}})
    return name


def create_rb(custom: CustomObjectsApi, ns: str, name: str, **spec) -> dict:
    return custom.create_namespaced_custom_object(
        GROUP, VERSION, ns, RB_PLURAL, binding(name, ns, **spec)
    )


def test_create_get_and_server_fields(custom: CustomObjectsApi, ns: str):
    created = create_rb(custom, ns, "a")
    meta = created["metadata"]
    assert meta["uid"] and meta["creationTimestamp"].endswith("Z")
    assert meta["generation"] == 1
    fetched = custom.get_namespaced_custom_object(GROUP, VERSION, ns, RB_PLURAL, "a-pytorchjob")
    assert fetched == created


def test_create_twice_is_already_exists(custom: CustomObjectsApi, ns: str):
    create_rb(custom, ns, "a")
    with pytest.raises(ApiException) as caught:
        create_rb(custom, ns, "a")
    assert caught.value.status == 409
    assert '"reason":"AlreadyExists"' in caught.value.body


def test_get_missing_is_not_found(custom: CustomObjectsApi, ns: str):
    with pytest.raises(ApiException) as caught:
        custom.get_namespaced_custom_object(GROUP, VERSION, ns, RB_PLURAL, "nope")
    assert caught.value.status == 404
    assert 'resourcebindings.work.karmada.io \\"nope\\" not found' in caught.value.body


def test_create_in_missing_namespace_is_not_found(core: CoreV1Api):
    with pytest.raises(ApiException) as caught:
        core.create_namespaced_config_map("ghost", {"metadata": {"name": "c"}})
    assert caught.value.status == 404
    assert 'namespaces \\"ghost\\" not found' in caught.value.body


def test_generate_name_adds_five_characters(core: CoreV1Api, ns: str):
    created = core.create_namespaced_config_map(ns, {"metadata": {"generateName": "cfg-"}})
    name = created.metadata.name
    assert name.startswith("cfg-") and len(name) == len("cfg-") + 5
    assert core.read_namespaced_config_map(name, ns).metadata.uid == created.metadata.uid


def test_stale_update_is_conflict(custom: CustomObjectsApi, ns: str):
    first = create_rb(custom, ns, "a")
    first["spec"]["replicas"] = 2
    updated = custom.replace_namespaced_custom_object(
        GROUP, VERSION, ns, RB_PLURAL, "a-pytorchjob", first
    )
    assert int(updated["metadata"]["resourceVersion"]) > int(first["metadata"]["resourceVersion"])
    first["spec"]["replicas"] = 3  # still carries the old resourceVersion
    with pytest.raises(ApiException) as caught:
        custom.replace_namespaced_custom_object(
            GROUP, VERSION, ns, RB_PLURAL, "a-pytorchjob", first
        )
    assert caught.value.status == 409
    assert '"reason":"Conflict"' in caught.value.body
    assert "the object has been modified" in caught.value.body


def test_resource_version_is_one_global_counter(core: CoreV1Api, custom: CustomObjectsApi, ns: str):
    a = int(
        core.create_namespaced_config_map(ns, {"metadata": {"name": "a"}}).metadata.resource_version
    )
    b = int(create_rb(custom, ns, "b")["metadata"]["resourceVersion"])
    c = int(
        core.create_namespaced_config_map(ns, {"metadata": {"name": "c"}}).metadata.resource_version
    )
    assert a < b < c


def test_merge_patch(custom: CustomObjectsApi, ns: str):
    create_rb(custom, ns, "a", replicas=1)
    patched = custom.patch_namespaced_custom_object(
        GROUP,
        VERSION,
        ns,
        RB_PLURAL,
        "a-pytorchjob",
        {"metadata": {"labels": {"team": "a"}}, "spec": {"suspension": {"scheduling": True}}},
    )
    assert patched["metadata"]["labels"] == {"team": "a"}
    assert patched["spec"]["suspension"] == {"scheduling": True}
    assert patched["spec"]["replicas"] == 1
    assert patched["metadata"]["generation"] == 2


def test_json_patch(custom: CustomObjectsApi, ns: str):
    create_rb(custom, ns, "a", replicas=1)
    patched = custom.patch_namespaced_custom_object(
        GROUP,
        VERSION,
        ns,
        RB_PLURAL,
        "a-pytorchjob",
        [
            {"op": "add", "path": "/spec/suspension", "value": {"scheduling": True}},
            {"op": "replace", "path": "/spec/replicas", "value": 4},
        ],
        _content_type=JSON_PATCH,
    )
    assert patched["spec"]["suspension"] == {"scheduling": True}
    assert patched["spec"]["replicas"] == 4


def test_failed_json_patch_test_op_is_invalid(custom: CustomObjectsApi, ns: str):
    create_rb(custom, ns, "a", replicas=1)
    with pytest.raises(ApiException) as caught:
        custom.patch_namespaced_custom_object(
            GROUP,
            VERSION,
            ns,
            RB_PLURAL,
            "a-pytorchjob",
            [{"op": "test", "path": "/spec/replicas", "value": 9}],
            _content_type=JSON_PATCH,
        )
    assert caught.value.status == 422


def test_patch_with_stale_resource_version_is_conflict(custom: CustomObjectsApi, ns: str):
    created = create_rb(custom, ns, "a")
    custom.patch_namespaced_custom_object(
        GROUP, VERSION, ns, RB_PLURAL, "a-pytorchjob", {"spec": {"replicas": 2}}
    )
    with pytest.raises(ApiException) as caught:
        custom.patch_namespaced_custom_object(
            GROUP,
            VERSION,
            ns,
            RB_PLURAL,
            "a-pytorchjob",
            {
                "metadata": {"resourceVersion": created["metadata"]["resourceVersion"]},
                "spec": {"replicas": 3},
            },
        )
    assert caught.value.status == 409


def test_strategic_merge_patch_is_415_for_custom_resources(custom: CustomObjectsApi, ns: str):
    create_rb(custom, ns, "a")
    with pytest.raises(ApiException) as caught:
        custom.patch_namespaced_custom_object(
            GROUP,
            VERSION,
            ns,
            RB_PLURAL,
            "a-pytorchjob",
            {"spec": {"replicas": 2}},
            _content_type="application/strategic-merge-patch+json",
        )
    assert caught.value.status == 415


def test_strategic_merge_patch_on_a_built_in_kind(core: CoreV1Api, ns: str):
    core.create_namespaced_config_map(ns, {"metadata": {"name": "c"}, "data": {"a": "1"}})
    patched = core.patch_namespaced_config_map("c", ns, {"data": {"b": "2"}})  # SMP
    assert patched.data == {"a": "1", "b": "2"}


def test_status_subresource_changes_only_status(custom: CustomObjectsApi, ns: str):
    created = create_rb(custom, ns, "a", replicas=1)
    created["status"] = {"schedulerObservedGeneration": 1, "conditions": []}
    created["spec"]["replicas"] = 5  # ignored by the status subresource
    after = custom.replace_namespaced_custom_object_status(
        GROUP, VERSION, ns, RB_PLURAL, "a-pytorchjob", created
    )
    assert after["status"]["schedulerObservedGeneration"] == 1
    assert after["spec"]["replicas"] == 1
    assert after["metadata"]["generation"] == 1

    after = custom.patch_namespaced_custom_object_status(
        GROUP,
        VERSION,
        ns,
        RB_PLURAL,
        "a-pytorchjob",
        {"status": {"schedulerObservedGeneration": 7}},
    )
    assert after["status"]["schedulerObservedGeneration"] == 7
    assert after["metadata"]["generation"] == 1


def test_main_resource_ignores_status_and_bumps_generation_on_spec(
    custom: CustomObjectsApi, ns: str
):
    created = create_rb(custom, ns, "a", replicas=1)
    assert "status" not in created
    created["spec"]["replicas"] = 2
    created["status"] = {"schedulerObservedGeneration": 99}
    after = custom.replace_namespaced_custom_object(
        GROUP, VERSION, ns, RB_PLURAL, "a-pytorchjob", created
    )
    assert "status" not in after
    assert after["metadata"]["generation"] == 2
    relabelled = custom.patch_namespaced_custom_object(
        GROUP, VERSION, ns, RB_PLURAL, "a-pytorchjob", {"metadata": {"labels": {"x": "y"}}}
    )
    assert relabelled["metadata"]["generation"] == 2  # metadata changes do not count


def test_no_op_update_keeps_resource_version(custom: CustomObjectsApi, ns: str):
    created = create_rb(custom, ns, "a")
    again = custom.replace_namespaced_custom_object(
        GROUP, VERSION, ns, RB_PLURAL, "a-pytorchjob", created
    )
    assert again["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


def test_list_with_label_selectors(core: CoreV1Api, ns: str):
    for name, labels in {
        "a": {"team": "x", "tier": "gpu"},
        "b": {"team": "y", "tier": "gpu"},
        "c": {"team": "z"},
    }.items():
        core.create_namespaced_config_map(ns, {"metadata": {"name": name, "labels": labels}})

    def names(selector: str) -> list[str]:
        return [
            c.metadata.name
            for c in core.list_namespaced_config_map(ns, label_selector=selector).items
        ]

    assert names("team=x") == ["a"]
    assert names("team==y") == ["b"]
    assert names("team!=x") == ["b", "c"]
    assert names("team in (x,z)") == ["a", "c"]
    assert names("team notin (x,z)") == ["b"]
    assert names("tier") == ["a", "b"]
    assert names("!tier") == ["c"]
    assert names("tier=gpu,team!=y") == ["a"]


def test_list_with_field_selector_across_namespaces(core: CoreV1Api, ns: str):
    core.create_namespace({"metadata": {"name": "team-a"}})
    core.create_namespaced_config_map("team-a", {"metadata": {"name": "same"}})
    core.create_namespaced_config_map(ns, {"metadata": {"name": "same"}})
    listed = core.list_config_map_for_all_namespaces(field_selector="metadata.namespace=team-a")
    assert [(c.metadata.namespace, c.metadata.name) for c in listed.items] == [("team-a", "same")]
    named = core.list_config_map_for_all_namespaces(field_selector="metadata.name=same")
    assert len(named.items) == 2


def test_list_pages_are_one_consistent_snapshot(core: CoreV1Api, ns: str):
    for i in range(5):
        core.create_namespaced_config_map(ns, {"metadata": {"name": f"c{i}"}})
    first = core.list_namespaced_config_map(ns, limit=2)
    assert [c.metadata.name for c in first.items] == ["c0", "c1"]
    assert first.metadata._continue and first.metadata.remaining_item_count == 3
    core.create_namespaced_config_map(ns, {"metadata": {"name": "c2a"}})  # after the snapshot
    core.delete_namespaced_config_map("c3", ns)
    second = core.list_namespaced_config_map(ns, limit=2, _continue=first.metadata._continue)
    third = core.list_namespaced_config_map(ns, limit=2, _continue=second.metadata._continue)
    assert [c.metadata.name for c in second.items + third.items] == ["c2", "c3", "c4"]
    assert second.metadata.resource_version == first.metadata.resource_version
    assert not third.metadata._continue


def test_bad_continue_token_is_bad_request(core: CoreV1Api, ns: str):
    with pytest.raises(ApiException) as caught:
        core.list_namespaced_config_map(ns, limit=2, _continue="!!not-a-token")
    assert caught.value.status == 400


def test_custom_resource_update_requires_resource_version(custom: CustomObjectsApi, ns: str):
    created = create_rb(custom, ns, "a")
    del created["metadata"]["resourceVersion"]
    with pytest.raises(ApiException) as caught:
        custom.replace_namespaced_custom_object(
            GROUP, VERSION, ns, RB_PLURAL, "a-pytorchjob", created
        )
    assert caught.value.status == 422


def test_served_versions_share_one_object(custom: CustomObjectsApi, ns: str):
    create_rb(custom, ns, "a")
    old = custom.get_namespaced_custom_object(GROUP, "v1alpha1", ns, RB_PLURAL, "a-pytorchjob")
    assert old["apiVersion"] == "work.karmada.io/v1alpha1"


def test_job_kinds_and_cluster_scope(custom: CustomObjectsApi, ns: str):
    job = custom.create_namespaced_custom_object(
        "kubeflow.org", "v1", ns, "pytorchjobs", pytorchjob("train", ns)
    )
    assert job["metadata"]["generation"] == 1
    policy = {
        "apiVersion": "policy.karmada.io/v1alpha1",
        "kind": "ClusterPropagationPolicy",
        "metadata": {"name": "all"},
        "spec": {"resourceSelectors": [{"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob"}]},
    }
    custom.create_cluster_custom_object(
        "policy.karmada.io", "v1alpha1", "clusterpropagationpolicies", policy
    )
    listed = custom.list_cluster_custom_object(
        "policy.karmada.io", "v1alpha1", "clusterpropagationpolicies"
    )
    assert [p["metadata"]["name"] for p in listed["items"]] == ["all"]
    assert "namespace" not in listed["items"][0]["metadata"]


def test_leases(coordination: CoordinationV1Api):
    lease = {
        "metadata": {"name": "fleetgate"},
        "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15},
    }
    created = coordination.create_namespaced_lease("kube-system", lease)
    created.spec.holder_identity = "b"
    renewed = coordination.replace_namespaced_lease("fleetgate", "kube-system", created)
    assert renewed.spec.holder_identity == "b"
    created.spec.holder_identity = "c"  # stale: another candidate lost the race
    with pytest.raises(ApiException) as caught:
        coordination.replace_namespaced_lease("fleetgate", "kube-system", created)
    assert caught.value.status == 409


def test_events(core: CoreV1Api, ns: str):
    event = {
        "metadata": {"generateName": "train."},
        "involvedObject": {
            "kind": "PyTorchJob",
            "name": "train",
            "namespace": ns,
            "uid": "u1",
        },
        "reason": "Admitted",
        "message": "admitted to gpu-east",
        "type": "Normal",
    }
    core.create_namespaced_event(ns, event)
    found = core.list_namespaced_event(
        ns, field_selector="involvedObject.name=train,involvedObject.uid=u1"
    )
    assert [e.reason for e in found.items] == ["Admitted"]


def test_wrong_kind_in_body_is_bad_request(custom: CustomObjectsApi, ns: str):
    body = binding("a", ns)
    body["kind"] = "Work"
    with pytest.raises(ApiException) as caught:
        custom.create_namespaced_custom_object(GROUP, VERSION, ns, RB_PLURAL, body)
    assert caught.value.status == 400


def test_unauthenticated_requests_are_refused(sandbox):
    import ssl
    import urllib.request

    context = ssl.create_default_context(cadata=sandbox.ca_pem.decode())
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(f"{sandbox.url}/api/v1/namespaces", context=context, timeout=5)
    assert caught.value.code == 401
