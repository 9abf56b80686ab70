"""Input that is not a well-formed AdmissionReview: 400 (or 405, 413, 503) with a plain message.

Never a 500: the API server would show "internal error" to whoever applied the object.
"""

from __future__ import annotations

import copy
import json

import pytest

from engine.policy.policyset import load_policy_set
from engine.policy.reload import PolicyHolder
from tests.webhook.helpers import created_binding, example, review
from webhook.app import MAX_BODY
from webhook.review import translate

MUTATE = "/mutate/resourcebindings"
VALIDATE = "/validate/workloads"


def good(endpoint: str) -> dict:
    if endpoint == MUTATE:
        return review(created_binding())
    return review(example("PyTorchJob", "llama-pretrain"))


def edited(endpoint: str, edit) -> bytes:
    document = copy.deepcopy(good(endpoint))
    edit(document)
    return json.dumps(document).encode()


def post(client, endpoint: str, body: bytes, content_type: str = "application/json"):
    return client.post(endpoint, data=body, content_type=content_type)


def expect_400(reply, *fragments: str) -> None:
    assert reply.status_code == 400, reply.text
    assert reply.mimetype == "text/plain"
    for fragment in fragments:
        assert fragment in reply.text


RAW_BODIES = {
    "empty": (b"", "request body is empty"),
    "not JSON": (b"apiVersion: admission.k8s.io/v1\nkind: AdmissionReview\n", "not JSON"),
    "truncated JSON": (b'{"apiVersion": "admission.k8s.io/v1", "kind": "Adm', "not JSON"),
    "not UTF-8": (b'{"a": "\xff\xfe"}', "not JSON"),
    "NaN": (b'{"apiVersion": NaN}', "NaN is not valid JSON"),
    "an array": (b"[]", "expected a JSON object (an AdmissionReview), got an array"),
    "a string": (b'"AdmissionReview"', "got a string"),
    "deeply nested": (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
}


@pytest.mark.parametrize("endpoint", [MUTATE, VALIDATE])
@pytest.mark.parametrize("case", sorted(RAW_BODIES))
def test_bodies_that_are_not_an_admission_review(client, endpoint, case):
    body, fragment = RAW_BODIES[case]
    expect_400(post(client, endpoint, body, "text/plain"), fragment)


def _set(path: str, value):
    def edit(document: dict) -> None:
        *parents, last = path.split(".")
        target = document
        for key in parents:
            target = target[key]
        if value is _DELETE:
            del target[last]
        else:
            target[last] = value

    return edit


_DELETE = object()
ENVELOPE = {
    "wrong apiVersion": (_set("apiVersion", "admission.k8s.io/v1beta1"), "admissionReviewVersions"),
    "wrong kind": (_set("kind", "Review"), "expected apiVersion admission.k8s.io/v1"),
    "no request": (_set("request", _DELETE), "AdmissionReview has no request"),
    "request not an object": (_set("request", "x"), "request: expected an object, got a string"),
    "no uid": (_set("request.uid", _DELETE), "request.uid: required"),
    "empty uid": (_set("request.uid", ""), "request.uid: required"),
    "numeric uid": (_set("request.uid", 42), "request.uid: required, a non-empty string"),
    "no operation": (_set("request.operation", _DELETE), "request.operation: expected one of"),
    "bad operation": (_set("request.operation", "PATCH"), "request.operation"),
    "no kind": (_set("request.kind", _DELETE), "request.kind: required"),
    "kind not strings": (_set("request.kind.kind", 7), "must be strings"),
    "no object": (_set("request.object", _DELETE), "request.object: required for CREATE"),
    "object is a list": (_set("request.object", []), "request.object: expected an object"),
    "namespace not a string": (_set("request.namespace", ["a"]), "request.namespace"),
    "update without oldObject": (
        lambda d: d["request"].update(operation="UPDATE", oldObject=None),
        "request.oldObject: required for UPDATE",
    ),
}


@pytest.mark.parametrize("endpoint", [MUTATE, VALIDATE])
@pytest.mark.parametrize("case", sorted(ENVELOPE))
def test_malformed_envelopes(client, endpoint, case):
    edit, fragment = ENVELOPE[case]
    expect_400(post(client, endpoint, edited(endpoint, edit)), fragment)


BINDING_SHAPES = {
    "metadata missing": (_set("request.object.metadata", _DELETE), "metadata: expected an object"),
    "spec is a list": (_set("request.object.spec", []), "spec: expected an object, got an array"),
    "no spec.resource": (_set("request.object.spec.resource", _DELETE), "spec.resource"),
    "resource without kind": (
        _set("request.object.spec.resource.kind", _DELETE),
        "request.object.spec.resource.kind: required",
    ),
    "suspension is a string": (
        _set("request.object.spec.suspension", "yes"),
        "spec.suspension: expected an object, got a string",
    ),
    "scheduling is a string": (
        _set("request.object.spec.suspension", {"scheduling": "true"}),
        "spec.suspension.scheduling: expected a boolean",
    ),
    "labels is a list": (_set("request.object.metadata.labels", ["a"]), "metadata.labels"),
    "label value is a number": (
        _set("request.object.metadata.labels", {"a": 1}),
        "metadata.labels['a']: expected a string",
    ),
}


@pytest.mark.parametrize("case", sorted(BINDING_SHAPES))
def test_bindings_of_the_wrong_shape(client, case):
    edit, fragment = BINDING_SHAPES[case]
    expect_400(post(client, MUTATE, edited(MUTATE, edit)), fragment)


def test_malformed_demand_of_an_admitted_binding_is_a_400(client):
    binding = created_binding()
    binding["metadata"]["annotations"]["fleetgate.io/admitted-at"] = "2025-03-10T09:55:00Z"
    old = copy.deepcopy(binding)
    binding["spec"]["replicaRequirements"]["resourceRequest"]["cpu"] = "four"
    reply = client.post(MUTATE, json=review(binding, operation="UPDATE", old=old))
    expect_400(reply, "spec.replicaRequirements.resourceRequest.cpu")


def test_objects_of_other_kinds_are_refused(client):
    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "x"}}
    expect_400(
        client.post(MUTATE, json=review(config)),
        "admits work.karmada.io ResourceBinding or work.karmada.io ClusterResourceBinding; "
        "got v1 ConfigMap",
    )
    expect_400(
        client.post(VALIDATE, json=review(config)),
        "admits the job kinds fleetgate reads; got v1 ConfigMap",
    )


def test_object_kind_that_disagrees_with_the_request_kind(client):
    document = good(VALIDATE)
    document["request"]["object"]["kind"] = "TFJob"
    expect_400(client.post(VALIDATE, json=document), "request.object is kubeflow.org/v1 TFJob")


def test_the_deepest_object_json_allows_is_still_evaluated(make_app, policy_dir, holder):
    (policy_dir / "deep.yaml").write_text(
        "apiVersion: fleetgate.io/v1alpha1\nkind: AdmissionPolicy\nmetadata:\n  name: deep\n"
        "spec:\n  validations:\n    - expression: has(object.metadata)\n      message: m\n"
    )
    assert holder.reload(), holder.status.errors
    job = example("PyTorchJob", "llama-pretrain")
    nested: dict = {}
    cursor = nested
    for _ in range(990):
        cursor["x"] = {}
        cursor = cursor["x"]
    job["spec"]["extra"] = nested
    reply = make_app().test_client().post(VALIDATE, json=review(job))
    assert reply.status_code == 200, reply.text
    assert reply.get_json()["response"]["allowed"] is True


def test_an_object_too_deep_to_evaluate_is_a_400():
    def decide(request):
        raise RecursionError("maximum recursion depth exceeded")

    answer = translate(json.dumps(good(MUTATE)).encode(), decide, "v1")
    assert (answer.status, answer.error) == (400, "request.object is nested too deeply to evaluate")


@pytest.mark.parametrize("endpoint", [MUTATE, VALIDATE])
def test_bodies_over_3_mib_are_413(client, endpoint):
    document = good(endpoint)
    document["request"]["object"]["metadata"]["annotations"]["padding"] = "x" * MAX_BODY
    reply = client.post(endpoint, data=json.dumps(document), content_type="application/json")
    assert reply.status_code == 413
    assert reply.mimetype == "text/plain"
    assert "larger than 3 MiB" in reply.text
    metrics = client.get("/metrics").text
    assert f'fleetgate_webhook_requests_total{{endpoint="{endpoint}",result="too_large"}} 1.0' in (
        metrics
    )


def test_a_body_just_under_3_mib_is_served(client):
    document = good(MUTATE)
    body = json.dumps(document)
    document["request"]["object"]["metadata"]["annotations"]["padding"] = "x" * (
        MAX_BODY - len(body) - 100
    )
    body = json.dumps(document)
    assert len(body) < MAX_BODY
    assert client.post(MUTATE, data=body, content_type="application/json").status_code == 200


@pytest.mark.parametrize("endpoint", [MUTATE, VALIDATE])
def test_wrong_method_is_405(client, endpoint):
    reply = client.get(endpoint)
    assert reply.status_code == 405
    assert reply.mimetype == "text/plain"


def test_unknown_path_is_404(client):
    assert client.post("/mutate", json=good(MUTATE)).status_code == 404


def test_bad_requests_are_counted(client):
    post(client, MUTATE, b"nope")
    metrics = client.get("/metrics").text
    assert f'fleetgate_webhook_requests_total{{endpoint="{MUTATE}",result="bad_request"}} 1.0' in (
        metrics
    )


def test_before_any_valid_policy_set_requests_get_503_and_readyz_fails(make_app, tmp_path):
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "queues.yaml").write_text("apiVersion: fleetgate.io/v1alpha1\nkind: Queue\n")
    holder = PolicyHolder(lambda: load_policy_set([broken]))
    assert not holder.reload()
    client = make_app(holder).test_client()
    reply = client.post(MUTATE, json=good(MUTATE))
    assert reply.status_code == 503
    assert "no valid policy set" in reply.text
    ready = client.get("/readyz")
    assert ready.status_code == 503
    assert "queues.yaml" in ready.text
    assert client.get("/healthz").status_code == 200
