"""POST /mutate/resourcebindings: which bindings are held, and the exact patches sent."""

from __future__ import annotations

import copy

import jsonschema
import pytest

from engine import annotations as ann
from tests.conftest import policy_doc
from tests.webhook.helpers import (
    FLEETGATE_USER,
    NOW_TEXT,
    admitted_binding,
    apply_patch,
    crd_schema,
    created_binding,
    example,
    patch_of,
    review,
)
from webhook.app import VERSION_HEADER

URL = "/mutate/resourcebindings"


def mutate(client, obj, **kwargs):
    sent = review(obj, **kwargs)
    reply = client.post(URL, json=sent)
    assert reply.status_code == 200, reply.text
    answer = reply.get_json()
    assert answer["apiVersion"] == "admission.k8s.io/v1"
    assert answer["kind"] == "AdmissionReview"
    assert answer["response"]["uid"] == sent["request"]["uid"]
    assert answer["response"]["allowed"] is True
    return answer, reply


def held_annotations(version):
    return {ann.POLICY_VERSION: version, ann.QUEUED_AT: NOW_TEXT}


def test_new_binding_without_suspension_gets_the_whole_suspension_object(client, holder):
    binding = created_binding()
    answer, reply = mutate(client, binding)
    version = holder.current.version

    patch = patch_of(answer)
    assert patch[0] == {"op": "add", "path": "/spec/suspension", "value": {"scheduling": True}}
    patched = apply_patch(binding, patch)
    assert patched["spec"]["suspension"] == {"scheduling": True}
    assert patched["metadata"]["labels"][ann.MANAGED] == "true"
    assert ann.MANAGED.replace("/", "~1") in {op["path"].split("/")[-1] for op in patch}
    for key, value in held_annotations(version).items():
        assert patched["metadata"]["annotations"][key] == value
    # Karmada's own labels and annotations are untouched
    original = binding["metadata"]
    assert patched["metadata"]["labels"] == {**original["labels"], ann.MANAGED: "true"}
    assert patched["metadata"]["annotations"] == {
        **original["annotations"],
        **held_annotations(version),
    }
    assert reply.headers[VERSION_HEADER] == version
    assert answer["response"]["auditAnnotations"] == {"policy-version": version, "decision": "held"}


def test_existing_suspension_keeps_dispatching(client):
    binding = created_binding(suspension={"dispatching": True})
    answer, _ = mutate(client, binding)

    patch = patch_of(answer)
    assert {"op": "add", "path": "/spec/suspension/scheduling", "value": True} in patch
    assert not any(op["path"] == "/spec/suspension" for op in patch)
    patched = apply_patch(binding, patch)
    assert patched["spec"]["suspension"] == {"dispatching": True, "scheduling": True}


def test_dispatching_on_clusters_and_false_scheduling_are_merged_not_replaced(client):
    suspension = {"dispatchingOnClusters": {"clusterNames": ["gpu-east"]}, "scheduling": False}
    binding = created_binding(suspension=copy.deepcopy(suspension))
    patched = apply_patch(binding, patch_of(mutate(client, binding)[0]))
    assert patched["spec"]["suspension"] == {**suspension, "scheduling": True}


def test_already_suspended_and_managed_binding_is_not_patched(client):
    binding = example("ResourceBinding", "tokenizer-stats-job")  # pending, held by fleetgate
    assert binding["spec"]["suspension"] == {"scheduling": True}
    for operation in ("CREATE", "UPDATE"):
        answer, _ = mutate(client, binding, operation=operation, old=binding)
        assert patch_of(answer) == []
        assert answer["response"]["auditAnnotations"]["decision"] == "already-held"


def test_suspended_by_its_policy_but_not_managed_gets_label_and_annotations_only(client, holder):
    binding = created_binding(suspension={"scheduling": True})
    patch = patch_of(mutate(client, binding)[0])
    assert all(op["path"].startswith("/metadata/") for op in patch)
    patched = apply_patch(binding, patch)
    assert patched["metadata"]["labels"][ann.MANAGED] == "true"
    assert patched["metadata"]["annotations"][ann.POLICY_VERSION] == holder.current.version


def test_binding_without_labels_or_annotations_gets_whole_maps(client, holder):
    binding = created_binding()
    del binding["metadata"]["labels"]
    binding["metadata"]["annotations"] = None
    patch = patch_of(mutate(client, binding)[0])
    assert {"op": "add", "path": "/metadata/labels", "value": {ann.MANAGED: "true"}} in patch
    assert {
        "op": "add",
        "path": "/metadata/annotations",
        "value": held_annotations(holder.current.version),
    } in patch


def test_unsuspended_binding_keeps_its_queue_time(client):
    binding = example("ResourceBinding", "tokenizer-stats-job")
    binding["metadata"]["annotations"][ann.QUEUED_AT] = "2025-03-10T09:50:00Z"
    binding["spec"]["suspension"] = {"scheduling": False}  # someone let it go: hold it again
    patched = apply_patch(
        binding, patch_of(mutate(client, binding, operation="UPDATE", old=binding)[0])
    )
    assert patched["spec"]["suspension"]["scheduling"] is True
    assert patched["metadata"]["annotations"][ann.QUEUED_AT] == "2025-03-10T09:50:00Z"


def test_unreadable_queue_time_is_stamped_again(client):
    """A queued-at fleetgate cannot parse would leave the job without a place in its queue:
    the webhook replaces it with the time of the request."""
    binding = example("ResourceBinding", "tokenizer-stats-job")
    binding["metadata"]["annotations"][ann.QUEUED_AT] = "yesterday"
    binding["spec"]["suspension"] = {"scheduling": False}
    answer, _ = mutate(client, binding, operation="UPDATE", old=binding)
    patched = apply_patch(binding, patch_of(answer))
    assert patched["spec"]["suspension"]["scheduling"] is True
    assert patched["metadata"]["annotations"][ann.QUEUED_AT] == NOW_TEXT
    assert answer["response"]["auditAnnotations"]["decision"] == "held"


def test_out_of_scope_binding_is_allowed_unchanged(client):
    binding = created_binding()
    binding["spec"]["resource"].update(apiVersion="apps/v1", kind="Deployment")
    answer, reply = mutate(client, binding)
    assert patch_of(answer) == []
    assert answer["response"]["auditAnnotations"]["decision"] == "out-of-scope"
    assert VERSION_HEADER in reply.headers


def test_cluster_resource_binding_is_held_too(client):
    binding = created_binding()
    binding["kind"] = "ClusterResourceBinding"
    del binding["metadata"]["namespace"]
    patched = apply_patch(binding, patch_of(mutate(client, binding)[0]))
    assert patched["spec"]["suspension"] == {"scheduling": True}


def test_v1alpha1_binding_is_read_the_same_way(client):
    binding = created_binding()
    binding["apiVersion"] = "work.karmada.io/v1alpha1"
    patched = apply_patch(binding, patch_of(mutate(client, binding)[0]))
    assert patched["spec"]["suspension"] == {"scheduling": True}


# -- admitted bindings --------------------------------------------------------------------------


def scaled(binding, replicas):
    grown = copy.deepcopy(binding)
    grown["spec"]["replicas"] = replicas
    return grown


def test_scale_up_of_admitted_binding_holds_it_for_readmission(client, holder):
    old = admitted_binding()
    old["spec"]["suspension"] = {"scheduling": False, "dispatching": False}  # release mode
    new = scaled(old, 6)
    answer, _ = mutate(client, new, operation="UPDATE", old=old)

    patch = patch_of(answer)
    patched = apply_patch(new, patch)
    assert patched["spec"]["suspension"] == {"scheduling": True, "dispatching": False}
    notes = patched["metadata"]["annotations"]
    assert notes[ann.READMIT] == NOW_TEXT
    assert notes[ann.QUEUED_AT] == NOW_TEXT
    assert notes[ann.POLICY_VERSION] == holder.current.version
    assert notes[ann.ADMITTED_AT] == "2025-03-10T09:55:00Z"  # the cycle decides what happens next
    assert answer["response"]["auditAnnotations"]["decision"] == "readmit"


def test_scale_up_in_bind_mode_marks_readmission_without_suspension_change(client):
    old = admitted_binding()  # bind mode: stays suspended, fleetgate wrote spec.clusters
    new = scaled(old, 8)
    patch = patch_of(mutate(client, new, operation="UPDATE", old=old)[0])
    assert not any(op["path"].startswith("/spec") for op in patch)
    assert apply_patch(new, patch)["metadata"]["annotations"][ann.READMIT] == NOW_TEXT


def test_bigger_requests_per_replica_count_as_growth(client):
    old = admitted_binding()
    new = copy.deepcopy(old)
    new["spec"]["replicaRequirements"]["resourceRequest"]["memory"] = "32Gi"
    patch = patch_of(mutate(client, new, operation="UPDATE", old=old)[0])
    assert apply_patch(new, patch)["metadata"]["annotations"][ann.READMIT] == NOW_TEXT


@pytest.mark.parametrize("replicas", [4, 2])
def test_same_or_smaller_demand_of_admitted_binding_is_not_patched(client, replicas):
    old = admitted_binding()
    answer, _ = mutate(client, scaled(old, replicas), operation="UPDATE", old=old)
    assert patch_of(answer) == []
    assert answer["response"]["auditAnnotations"]["decision"] == "admitted"


def test_growth_of_components_counts(client):
    old = admitted_binding()
    for binding in (old,):
        spec = binding["spec"]
        spec.pop("replicas")
        spec.pop("replicaRequirements")
        spec["components"] = [
            {
                "name": "master",
                "replicas": 1,
                "replicaRequirements": {"resourceRequest": {"cpu": "4"}},
            },
            {
                "name": "worker",
                "replicas": 2,
                "replicaRequirements": {"resourceRequest": {"cpu": "8"}},
            },
        ]
    new = copy.deepcopy(old)
    new["spec"]["components"][1]["replicas"] = 3
    patch = patch_of(mutate(client, new, operation="UPDATE", old=old)[0])
    assert apply_patch(new, patch)["metadata"]["annotations"][ann.READMIT] == NOW_TEXT


def test_admitted_binding_without_replica_information_is_left_alone(client):
    old = example("ResourceBinding", "llama-pretrain-pytorchjob")  # Karmada gives no replicas
    new = copy.deepcopy(old)
    new["spec"]["resource"]["resourceVersion"] = "100999"  # template changed
    answer, _ = mutate(client, new, operation="UPDATE", old=old)
    assert patch_of(answer) == []


def test_binding_waiting_for_readmission_is_held_again_when_released_by_someone_else(client):
    binding = admitted_binding()
    binding["metadata"]["annotations"][ann.READMIT] = "2025-03-10T09:58:00Z"
    binding["spec"]["suspension"] = {"scheduling": False}
    patch = patch_of(mutate(client, binding, operation="UPDATE", old=binding)[0])
    assert patch == [{"op": "add", "path": "/spec/suspension/scheduling", "value": True}]


# -- CEL errors in scope: hold it (fail safe) ---------------------------------------------------


def test_scope_runtime_error_holds_the_binding_and_is_counted(client, make_app, policy_dir, holder):
    (policy_dir / "scheduling.yaml").write_text(
        policy_doc("SchedulingPolicy", "fleet", "scope: binding.spec.missing.field == 'x'")
    )
    assert holder.reload(), holder.status.errors
    app = make_app()
    answer, _ = mutate(app.test_client(), created_binding())
    response = answer["response"]
    assert apply_patch(created_binding(), patch_of(answer))["spec"]["suspension"]["scheduling"]
    assert any("scope expression failed" in w for w in response["warnings"])
    metrics = app.test_client().get("/metrics").text
    assert 'fleetgate_webhook_cel_errors_total{policy="scope"} 1.0' in metrics


def test_scope_may_read_the_binding(make_app, policy_dir, holder):
    (policy_dir / "scheduling.yaml").write_text(
        policy_doc(
            "SchedulingPolicy",
            "fleet",
            """scope: 'has(binding.metadata.labels) && "team" in binding.metadata.labels'""",
        )
    )
    assert holder.reload(), holder.status.errors
    client = make_app().test_client()
    plain = created_binding()
    assert patch_of(mutate(client, plain)[0]) == []
    plain["metadata"]["labels"]["team"] = "data"
    assert patch_of(mutate(client, plain)[0]) != []


# -- the patched binding is a valid ResourceBinding -------------------------------------------


@pytest.mark.parametrize(
    "binding",
    [
        pytest.param(created_binding(), id="no-suspension"),
        pytest.param(created_binding(suspension={"dispatching": True}), id="dispatching"),
        pytest.param(created_binding("llama-pretrain-pytorchjob"), id="pytorchjob"),
    ],
)
def test_patched_binding_validates_against_the_karmada_crd(client, karmada_crds, binding):
    schema = crd_schema(karmada_crds, "work.karmada.io_resourcebindings.yaml")
    jsonschema.validate(binding, schema)  # the fixture itself is valid
    patched = apply_patch(binding, patch_of(mutate(client, binding)[0]))
    jsonschema.validate(patched, schema)
    assert patched["spec"]["suspension"]["scheduling"] is True


def test_readmission_patch_validates_against_the_karmada_crd(client, karmada_crds):
    schema = crd_schema(karmada_crds, "work.karmada.io_resourcebindings.yaml")
    old = admitted_binding()
    new = scaled(old, 6)
    patched = apply_patch(new, patch_of(mutate(client, new, operation="UPDATE", old=old)[0]))
    jsonschema.validate(patched, schema)


def test_crd_schema_rejects_a_wrong_suspension(karmada_crds):
    schema = crd_schema(karmada_crds, "work.karmada.io_resourcebindings.yaml")
    binding = created_binding(suspension={"scheduling": "yes"})
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(binding, schema)


def test_patched_cluster_binding_validates_against_the_karmada_crd(client, karmada_crds):
    schema = crd_schema(karmada_crds, "work.karmada.io_clusterresourcebindings.yaml")
    binding = created_binding()
    binding["kind"] = "ClusterResourceBinding"
    del binding["metadata"]["namespace"]
    jsonschema.validate(apply_patch(binding, patch_of(mutate(client, binding)[0])), schema)


def placed_without_fleetgate(status: dict | None = None) -> dict:
    """A binding Karmada placed before fleetgate was installed: spec.clusters and a Scheduled
    condition, none of fleetgate's labels or annotations, not suspended."""
    binding = admitted_binding()
    meta = binding["metadata"]
    meta["labels"] = {k: v for k, v in meta["labels"].items() if not k.startswith("fleetgate.io/")}
    meta["annotations"] = {
        k: v for k, v in meta["annotations"].items() if not k.startswith("fleetgate.io/")
    }
    binding["spec"].pop("suspension", None)
    binding["status"] = (
        status
        if status is not None
        else {
            "schedulerObservedGeneration": 2,
            "conditions": [
                {
                    "type": "Scheduled",
                    "status": "True",
                    "reason": "Success",
                    "message": "",
                    "lastTransitionTime": "2025-03-01T08:00:00Z",
                },
                {
                    "type": "FullyApplied",
                    "status": "True",
                    "reason": "FullyAppliedSuccess",
                    "message": "",
                    "lastTransitionTime": "2025-03-01T08:00:05Z",
                },
            ],
            "aggregatedStatus": [{"clusterName": "gpu-west", "applied": True, "health": "Healthy"}],
        }
    )
    return binding


def test_a_placed_binding_is_adopted_not_queued(client, holder, karmada_crds):
    old = placed_without_fleetgate()
    new = copy.deepcopy(old)
    new["metadata"]["labels"]["team"] = "data"  # the next UPDATE fleetgate sees
    answer, _ = mutate(client, new, operation="UPDATE", old=old)
    patched = apply_patch(new, patch_of(answer))
    notes = patched["metadata"]["annotations"]
    assert notes[ann.ADMITTED_AT] == "2025-03-01T08:00:00Z"  # when Karmada scheduled it
    assert notes[ann.ADMITTED_TO] == "gpu-west"
    assert notes[ann.POLICY_VERSION] == holder.current.version
    assert ann.QUEUED_AT not in notes and ann.READMIT not in notes
    assert patched["metadata"]["labels"][ann.MANAGED] == "true"
    assert patched["spec"]["suspension"] == {"scheduling": True}  # Karmada's scheduler keeps off
    assert patched["spec"]["clusters"] == old["spec"]["clusters"]  # never moved
    assert answer["response"]["auditAnnotations"]["decision"] == "adopted"
    jsonschema.validate(patched, crd_schema(karmada_crds, "work.karmada.io_resourcebindings.yaml"))
    # adopted: the next update is an admitted binding's, with nothing to change
    again, _ = mutate(client, patched, operation="UPDATE", old=patched)
    assert patch_of(again) == []


def test_an_adopted_binding_without_a_schedule_time_is_admitted_as_of_now(client):
    binding = placed_without_fleetgate(status={})
    answer = mutate(client, binding, operation="UPDATE", old=binding)[0]
    patched = apply_patch(binding, patch_of(answer))
    assert patched["metadata"]["annotations"][ann.ADMITTED_AT] == NOW_TEXT
    assert patched["metadata"]["annotations"][ann.ADMITTED_TO] == "gpu-west"


def test_a_placed_binding_waiting_for_readmission_is_not_adopted(client):
    binding = placed_without_fleetgate()
    binding["metadata"]["annotations"][ann.READMIT] = "2025-03-10T09:59:00Z"
    answer = mutate(client, binding, operation="UPDATE", old=binding)[0]
    patched = apply_patch(binding, patch_of(answer))
    assert ann.ADMITTED_AT not in patched["metadata"]["annotations"]
    assert patched["spec"]["suspension"]["scheduling"] is True


@pytest.mark.parametrize("placed", [False, True], ids=["unplaced", "with-clusters"])
def test_a_binding_created_claiming_an_admission_is_held(client, holder, karmada_crds, placed):
    """Issue 29, finding 7: a ResourceBinding created with fleetgate.io/admitted-at was let
    through unsuspended. fleetgate only ever admits a binding that exists, so on CREATE the
    claim is removed and the binding is decided as if created without it: held in its queue;
    created placed (a restore, say), adopted where it runs as of now, suspended."""
    binding = created_binding()
    binding["metadata"]["annotations"].update(
        {ann.ADMITTED_AT: "2025-03-01T08:00:00Z", ann.ADMITTED_TO: "gpu-east",
         ann.RUNNING_SINCE: "2025-03-01T08:01:00Z"}
    )  # fmt: skip
    if placed:
        binding["spec"]["clusters"] = [{"name": "gpu-east", "replicas": 1}]
    answer, _ = mutate(client, binding)
    patched = apply_patch(binding, patch_of(answer))
    notes = patched["metadata"]["annotations"]
    assert ann.RUNNING_SINCE not in notes
    assert patched["spec"]["suspension"] == {"scheduling": True}
    assert patched["metadata"]["labels"][ann.MANAGED] == "true"
    decision = answer["response"]["auditAnnotations"]["decision"]
    jsonschema.validate(patched, crd_schema(karmada_crds, "work.karmada.io_resourcebindings.yaml"))
    if placed:  # adopted as of now, not as of the claim
        assert (notes[ann.ADMITTED_AT], notes[ann.ADMITTED_TO]) == (NOW_TEXT, "gpu-east")
        assert patched["spec"]["clusters"] == [{"name": "gpu-east", "replicas": 1}]
        assert decision == "claimed-admission-removed, adopted"
        return
    assert not {ann.ADMITTED_AT, ann.ADMITTED_TO} & set(notes)
    assert {k: notes[k] for k in held_annotations("")} == held_annotations(holder.current.version)
    assert decision == "claimed-admission-removed, held"
    # fleetgate's own admission later (an UPDATE) is honoured as before
    admitted = copy.deepcopy(patched)
    admitted["metadata"]["annotations"][ann.ADMITTED_AT] = NOW_TEXT
    answer = mutate(client, admitted, operation="UPDATE", old=patched, user=FLEETGATE_USER)[0]
    assert patch_of(answer) == []


def _pending_binding() -> dict:
    binding = created_binding()
    binding["spec"]["suspension"] = {"scheduling": True}
    binding["metadata"]["labels"][ann.MANAGED] = "true"
    binding["metadata"]["annotations"].update(
        {ann.QUEUED_AT: "2025-03-10T09:00:00Z", ann.PREEMPTIONS: "3",
         ann.GAVE_UP: "Failed on gpu-east", ann.ATTEMPTS: "4",
         ann.PENDING: "GaveUp: Failed on gpu-east"}
    )  # fmt: skip
    return binding


TENANT = {"username": "mallory", "groups": ["team-b", "system:authenticated"]}


def test_someone_else_changing_fleetgates_marks_is_written_back(client):
    # catches: an UPDATE by anyone marking a job admitted, resetting its preemption count or
    # taking it out of fleetgate's hands (issue 29, finding 7)
    old = _pending_binding()
    forged = copy.deepcopy(old)
    notes = forged["metadata"]["annotations"]
    notes[ann.ADMITTED_AT] = "2025-03-10T09:30:00Z"  # added
    notes[ann.PREEMPTIONS] = "0"  # changed
    del notes[ann.QUEUED_AT]  # removed
    del forged["metadata"]["labels"][ann.MANAGED]
    answer, _ = mutate(client, forged, operation="UPDATE", old=old, user=TENANT)
    patched = apply_patch(forged, patch_of(answer))
    assert patched["metadata"]["annotations"] == old["metadata"]["annotations"]
    assert patched["metadata"]["labels"][ann.MANAGED] == "true"
    [warning] = answer["response"]["warnings"]
    assert "fleetgate.io/admitted-at" in warning and "not mallory" in warning


def test_an_operators_documented_retry_and_fleetgates_own_writes_are_kept(client):
    old = _pending_binding()
    retry = copy.deepcopy(old)
    for key in (ann.GAVE_UP, ann.ATTEMPTS):  # docs: remove them for one more attempt
        del retry["metadata"]["annotations"][key]
    answer, _ = mutate(client, retry, operation="UPDATE", old=old, user=TENANT)
    assert patch_of(answer) == [] and "warnings" not in answer["response"]
    moved = copy.deepcopy(old)
    moved["metadata"]["annotations"][ann.PREEMPTIONS] = "4"
    admin = {"username": "kubernetes-admin", "groups": ["system:masters"]}
    for user in (FLEETGATE_USER, admin):
        answer, _ = mutate(client, moved, operation="UPDATE", old=old, user=user)
        assert patch_of(answer) == []
