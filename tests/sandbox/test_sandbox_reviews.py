"""TokenReview and the access reviews, answered as kube-apiserver answers them, and the request
attributes RBAC decides on, read from URLs as kube-apiserver's RequestInfoFactory reads them."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from sandbox.authn import User
from sandbox.requestinfo import attributes
from sandbox.server import Sandbox
from tests.conftest import require_tool
from tests.sandbox.access_helpers import ALICE, BOB, call, grant_list_configmaps, tenants

__all__ = ["tenants"]  # fixtures used by name

TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
SARS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
KIND = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview"}


def sar(**spec: object) -> dict[str, object]:
    return KIND | {"spec": spec}


LIST_CM_A = {"verb": "list", "resource": "configmaps", "namespace": "team-a"}


def test_a_token_review_names_the_tokens_user(tenants: Sandbox):
    def review(token: str) -> tuple[int, dict]:
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview"}
        code, answer, _ = call(
            tenants, "POST", TOKEN_REVIEWS, tenants.token, body | {"spec": {"token": token}}
        )
        return code, answer

    code, answer = review(ALICE)
    assert code == 201 and answer["kind"] == "TokenReview"
    assert answer["status"] == {
        "authenticated": True,
        "user": {
            "username": "alice",
            "uid": "uid-alice",
            "groups": ["team-a", "system:authenticated"],
        },
    }
    assert review(str(tenants.token))[1]["status"]["user"]["groups"] == [
        "system:masters",
        "system:authenticated",
    ]
    assert review("nope")[1]["status"] == {
        "authenticated": False,
        "user": {},
        "error": "invalid bearer token",
    }
    code, answer = review("")
    assert (code, answer["message"]) == (400, "token is required for TokenReview in authentication")
    # only who may create tokenreviews: not alice (system:auth-delegator would let her)
    code, answer, _ = call(tenants, "POST", TOKEN_REVIEWS, ALICE, {"spec": {"token": BOB}})
    assert code == 403 and 'cannot create resource "tokenreviews"' in answer["message"]
    assert call(tenants, "GET", TOKEN_REVIEWS, tenants.token)[0] == 405


def test_a_subject_access_review_answers_for_the_subject(tenants: Sandbox):
    grant_list_configmaps(tenants, "team-a", "team-a")
    token = tenants.token
    code, answer, _ = call(
        tenants,
        "POST",
        SARS,
        token,
        sar(user="alice", groups=["team-a"], resourceAttributes=LIST_CM_A),
    )
    assert code == 201
    assert answer["status"] == {
        "allowed": True,
        "reason": 'RBAC: allowed by RoleBinding "read-cm/team-a" of Role "read-cm" '
        'to Group "team-a"',
    }
    elsewhere = LIST_CM_A | {"namespace": "team-b"}
    answer = call(
        tenants,
        "POST",
        SARS,
        token,
        sar(user="alice", groups=["team-a"], resourceAttributes=elsewhere),
    )[1]
    assert answer["status"] == {"allowed": False}
    masters = sar(user="x", groups=["system:masters"], resourceAttributes=elsewhere)
    assert call(tenants, "POST", SARS, token, masters)[1]["status"] == {"allowed": True}
    discovery = sar(
        groups=["system:authenticated"], nonResourceAttributes={"verb": "get", "path": "/apis"}
    )
    assert call(tenants, "POST", SARS, token, discovery)[1]["status"]["allowed"] is True
    code, answer, _ = call(tenants, "POST", SARS, token, sar(resourceAttributes=LIST_CM_A))
    assert (code, answer["reason"]) == (422, "Invalid")
    assert answer["message"] == (
        'SubjectAccessReview.authorization.k8s.io "" is invalid: spec.user: Invalid value: "": '
        "at least one of user or group must be specified"
    )
    code, answer, _ = call(tenants, "POST", SARS, token, sar(user="alice"))
    assert (
        code == 422
        and "exactly one of nonResourceAttributes or resourceAttributes" in answer["message"]
    )
    assert (
        call(tenants, "POST", SARS, ALICE, sar(user="alice", resourceAttributes=LIST_CM_A))[0]
        == 403
    )


def test_self_and_local_subject_access_reviews(tenants: Sandbox):
    grant_list_configmaps(tenants, "team-a", "team-a")
    self_review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview"}
    path = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
    code, answer, _ = call(
        tenants, "POST", path, ALICE, self_review | {"spec": {"resourceAttributes": LIST_CM_A}}
    )
    assert code == 201 and answer["status"]["allowed"] is True
    code, answer, _ = call(
        tenants, "POST", path, BOB, self_review | {"spec": {"resourceAttributes": LIST_CM_A}}
    )
    assert code == 201 and answer["status"] == {"allowed": False}
    local = "/apis/authorization.k8s.io/v1/namespaces/team-a/localsubjectaccessreviews"
    body = {"spec": {"user": "alice", "groups": ["team-a"], "resourceAttributes": LIST_CM_A}}
    assert call(tenants, "POST", local, tenants.token, body)[1]["status"]["allowed"] is True
    body["spec"]["resourceAttributes"] = LIST_CM_A | {"namespace": "team-b"}
    assert call(tenants, "POST", local, tenants.token, body)[0] == 400


@pytest.fixture
def alice_kubectl(tenants: Sandbox, tmp_path: Path):
    kubeconfig = tenants.write_kubeconfig(tmp_path / "alice.kubeconfig", token=ALICE)

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "HOME": str(tmp_path), "KUBECACHEDIR": str(tmp_path / "cache")}
        return subprocess.run(
            [require_tool("kubectl"), "--kubeconfig", str(kubeconfig), *args],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
            check=False,
        )

    return run


def test_kubectl_auth_can_i_and_whoami(tenants: Sandbox, alice_kubectl):
    grant_list_configmaps(tenants, "team-a", "team-a")
    assert (
        alice_kubectl("auth", "can-i", "list", "configmaps", "-n", "team-a").stdout.strip() == "yes"
    )
    denied = alice_kubectl("auth", "can-i", "list", "configmaps", "-n", "team-b")
    assert (denied.returncode, denied.stdout.strip()) == (1, "no")
    whoami = alice_kubectl("auth", "whoami", "-o", "jsonpath={.status.userInfo.username}")
    assert whoami.stdout == "alice", whoami.stderr
    forbidden = alice_kubectl("get", "configmaps", "-n", "team-b")
    assert forbidden.returncode == 1
    assert 'User "alice" cannot list resource "configmaps"' in forbidden.stderr


ALICE_USER = User("alice")


@pytest.mark.parametrize(
    ("method", "path", "query", "expected"),
    [
        ("GET", "/api/v1/namespaces/ns/pods", {}, ("list", "", "ns", "pods", "", "")),
        ("GET", "/api/v1/namespaces/ns/pods/p", {}, ("get", "", "ns", "pods", "", "p")),
        ("GET", "/api/v1/namespaces/ns/pods", {"watch": "1"}, ("watch", "", "ns", "pods", "", "")),
        (
            "GET",
            "/api/v1/namespaces/ns/pods",
            {"watch": "false"},
            ("list", "", "ns", "pods", "", ""),
        ),
        ("GET", "/api/v1/watch/namespaces/ns/pods", {}, ("watch", "", "ns", "pods", "", "")),
        (
            "DELETE",
            "/api/v1/namespaces/ns/pods",
            {},
            ("deletecollection", "", "ns", "pods", "", ""),
        ),
        (
            "PUT",
            "/api/v1/namespaces/ns/status",
            {},
            ("update", "", "ns", "namespaces", "status", "ns"),
        ),
        ("GET", "/api/v1/namespaces/ns", {}, ("get", "", "ns", "namespaces", "", "ns")),
        ("GET", "/api/v1/namespaces", {}, ("list", "", "", "namespaces", "", "")),
        (
            "PATCH",
            "/apis/g.io/v1/things/t/status",
            {},
            ("patch", "g.io", "", "things", "status", "t"),
        ),
        (
            "POST",
            "/apis/g.io/v1/namespaces/ns/things",
            {},
            ("create", "g.io", "ns", "things", "", ""),
        ),
        (
            "GET",
            "/apis/visibility.fleetgate.io/v1alpha1/namespaces/ns/jobs",
            {},
            ("list", "visibility.fleetgate.io", "ns", "jobs", "", ""),
        ),
    ],
)
def test_request_attributes_are_read_from_the_url(method, path, query, expected):
    attrs = attributes(ALICE_USER, method, path, query)
    assert attrs.resource_request
    got = (
        attrs.verb,
        attrs.api_group,
        attrs.namespace,
        attrs.resource,
        attrs.subresource,
        attrs.name,
    )
    assert got == expected


@pytest.mark.parametrize(
    "path", ["/apis", "/apis/g.io", "/apis/g.io/v1", "/api", "/api/v1", "/healthz"]
)
def test_discovery_paths_are_non_resource_requests(path):
    attrs = attributes(ALICE_USER, "GET", path, {})
    assert (attrs.resource_request, attrs.verb, attrs.path) == (False, "get", path)
