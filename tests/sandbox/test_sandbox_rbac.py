"""Static tokens and RBAC, as kube-apiserver has them: the sandbox's own token may do anything;
more tokens (``--token-auth-file``) name users whose requests the Roles, ClusterRoles and
bindings in the store authorize, with kube-apiserver's 401 and 403."""

from __future__ import annotations

import logging

import pytest

from sandbox.authn import (
    AUTHENTICATED,
    Authenticator,
    TokenFileError,
    User,
    load_token_file,
    parse_token_file,
)
from sandbox.server import Sandbox
from tests.sandbox.access_helpers import (
    ALICE,
    BOB,
    RBAC,
    binding,
    call,
    cluster_role,
    grant_list_configmaps,
    role,
    rule,
    tenants,
)

__all__ = ["tenants"]  # fixtures used by name

CM = "/api/v1/namespaces/{}/configmaps"


def test_the_token_file_is_read_as_kube_apiserver_reads_it(tmp_path, caplog):
    text = 'tok1,alice,1001,"team-a,readers"\n\ntok2,bob,1002\n,nobody,1003\ntok2,robert,1004,x\n'
    with caplog.at_level(logging.WARNING):
        users = parse_token_file(text)
    assert users == {
        "tok1": User("alice", "1001", ("team-a", "readers")),
        "tok2": User("robert", "1004", ("x",)),  # a repeated token: the last line
    }
    assert "empty token" in caplog.text and "duplicate token" in caplog.text
    with pytest.raises(TokenFileError, match="at least 3 columns"):
        parse_token_file("tok,alice\n")
    path = tmp_path / "tokens.csv"
    path.write_text(text)
    assert load_token_file(path) == users
    with pytest.raises(TokenFileError, match="cannot read"):
        load_token_file(tmp_path / "missing.csv")


def test_every_authenticated_user_is_in_system_authenticated():
    authenticator = Authenticator("admin", {"t": User("alice", groups=("team-a",))})
    assert authenticator.request("Bearer t").groups == ("team-a", AUTHENTICATED)
    admin = authenticator.request("Bearer admin")
    assert (admin.name, admin.groups) == ("sandbox-admin", ("system:masters", AUTHENTICATED))


def test_an_unknown_token_or_none_is_401(tenants: Sandbox):
    for headers in ({}, {"Authorization": "Bearer nope"}, {"Authorization": f"Basic {ALICE}"}):
        code, body, _ = call(tenants, "GET", "/api/v1/namespaces", None, headers=headers)
        assert (code, body["reason"], body["message"]) == (401, "Unauthorized", "Unauthorized")


def test_a_user_without_bindings_is_forbidden_with_kube_apiservers_message(tenants: Sandbox):
    code, body, _ = call(tenants, "GET", CM.format("team-a"), ALICE)
    assert code == 403 and body["reason"] == "Forbidden"
    assert body["message"] == (
        'configmaps is forbidden: User "alice" cannot list resource "configmaps" in API group "" '
        'in the namespace "team-a"'
    )
    assert body["details"] == {"name": "", "group": "", "kind": "configmaps"}
    code, body, _ = call(tenants, "GET", "/apis/work.karmada.io/v1alpha2/resourcebindings", ALICE)
    assert body["message"] == (
        'resourcebindings.work.karmada.io is forbidden: User "alice" cannot list resource '
        '"resourcebindings" in API group "work.karmada.io" at the cluster scope'
    )
    code, body, _ = call(tenants, "GET", CM.format("team-a") + "/x", ALICE)
    assert body["message"].startswith('configmaps "x" is forbidden: User "alice" cannot get')
    code, body, _ = call(tenants, "GET", "/sandbox/writes", ALICE)
    assert (code, body["message"]) == (
        403,
        'forbidden: User "alice" cannot get path "/sandbox/writes"',
    )


def test_discovery_health_and_self_reviews_are_open_to_every_authenticated_user(
    tenants: Sandbox,
):
    for path in ("/api", "/apis", "/api/v1", "/apis/rbac.authorization.k8s.io/v1", "/version"):
        assert call(tenants, "GET", path, ALICE)[0] == 200, path
    code, body, _ = call(
        tenants,
        "POST",
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        ALICE,
        {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
    )
    assert code == 201
    assert body["status"]["userInfo"] == {
        "username": "alice",
        "uid": "uid-alice",
        "groups": ["team-a", AUTHENTICATED],
    }


def test_a_role_binding_grants_its_namespace_only(tenants: Sandbox):
    grant_list_configmaps(tenants, "team-a", "team-a")
    tenants.store.create("configmaps", {"metadata": {"name": "c", "namespace": "team-a"}})
    code, body, _ = call(tenants, "GET", CM.format("team-a"), ALICE)
    assert code == 200 and [i["metadata"]["name"] for i in body["items"]] == ["c"]
    assert call(tenants, "GET", CM.format("team-a") + "/c", ALICE)[0] == 200
    assert call(tenants, "GET", CM.format("team-a") + "?watch=1&timeoutSeconds=1", ALICE)[0] == 200
    assert call(tenants, "GET", CM.format("team-b"), ALICE)[0] == 403
    assert call(tenants, "GET", "/api/v1/configmaps", ALICE)[0] == 403  # cluster-wide
    assert call(tenants, "GET", CM.format("team-a"), BOB)[0] == 403  # not in team-a
    code, body, _ = call(tenants, "DELETE", CM.format("team-a") + "/c", ALICE)
    assert code == 403 and 'cannot delete resource "configmaps"' in body["message"]


def test_resource_names_wildcards_subresources_and_non_resource_urls(tenants: Sandbox):
    store = tenants.store
    store.create(
        f"clusterroles.{RBAC}",
        cluster_role(
            "mixed",
            rule(["get"], [""], ["namespaces"], resourceNames=["team-a"]),
            rule(["*"], ["work.karmada.io"], ["*"]),
            rule(["update"], ["*"], ["*/status"]),
            {"verbs": ["get"], "nonResourceURLs": ["/sandbox/*"]},
        ),
    )
    store.create(
        f"clusterrolebindings.{RBAC}", binding("mixed", "ClusterRole", "mixed", ("User", "bob"))
    )
    assert call(tenants, "GET", "/api/v1/namespaces/team-a", BOB)[0] == 200
    assert call(tenants, "GET", "/api/v1/namespaces/team-b", BOB)[0] == 403
    assert call(tenants, "GET", "/api/v1/namespaces", BOB)[0] == 403  # a list has no name
    rbs = "/apis/work.karmada.io/v1alpha2/resourcebindings"
    assert call(tenants, "GET", rbs, BOB)[0] == 200
    works = "/apis/work.karmada.io/v1alpha1/namespaces/team-a/works"
    assert call(tenants, "DELETE", works, BOB)[0] == 200  # deletecollection
    code, body, _ = call(tenants, "PUT", "/api/v1/namespaces/team-b/status", BOB, {})
    assert code != 403, body  # */status matched: the store answers (the body is no Namespace)
    assert call(tenants, "PUT", "/api/v1/namespaces/team-b", BOB, {})[0] == 403
    assert call(tenants, "GET", "/sandbox/writes", BOB)[0] == 404  # allowed; no WriteLog here
    assert call(tenants, "POST", "/sandbox/faults", BOB, {})[0] == 403


def test_groups_service_accounts_and_aggregated_cluster_roles(tenants: Sandbox):
    store = tenants.store
    label = {"rbac.example.com/aggregate-to-reader": "true"}
    store.create(
        f"clusterroles.{RBAC}",
        cluster_role(
            "reader",
            aggregationRule={"clusterRoleSelectors": [{"matchLabels": label}]},
        ),
    )
    part = cluster_role("reader-leases", rule(["list"], ["coordination.k8s.io"], ["leases"]))
    part["metadata"]["labels"] = label
    store.create(f"clusterroles.{RBAC}", part)
    store.create(
        f"rolebindings.{RBAC}",
        binding("readers", "ClusterRole", "reader", ("Group", "team-b"), namespace="team-b"),
    )
    leases = "/apis/coordination.k8s.io/v1/namespaces/{}/leases"
    assert call(tenants, "GET", leases.format("team-b"), BOB)[0] == 200
    assert call(tenants, "GET", leases.format("team-a"), BOB)[0] == 403
    account = User("system:serviceaccount:team-b:robot", groups=("system:serviceaccounts",))
    tenants.authenticator.add("robot-token", account)
    store.create(
        f"rolebindings.{RBAC}",
        binding("robot", "ClusterRole", "reader", ("ServiceAccount", "robot"), namespace="team-b"),
    )
    assert call(tenants, "GET", leases.format("team-b"), "robot-token")[0] == 200


def test_a_binding_to_a_missing_role_grants_nothing(tenants: Sandbox):
    tenants.store.create(
        f"rolebindings.{RBAC}",
        binding("dangling", "Role", "nowhere", ("User", "alice"), namespace="team-a"),
    )
    assert call(tenants, "GET", CM.format("team-a"), ALICE)[0] == 403
    tenants.store.create(
        f"roles.{RBAC}", role("nowhere", "team-a", rule(["list"], [""], ["configmaps"]))
    )
    assert call(tenants, "GET", CM.format("team-a"), ALICE)[0] == 200


def test_the_bootstrap_policy_is_in_the_store(tenants: Sandbox):
    names = {r["metadata"]["name"] for r in tenants.store.list(f"clusterroles.{RBAC}")["items"]}
    assert {"cluster-admin", "system:discovery", "system:basic-user"} <= names
    assert "system:auth-delegator" in names
    crb = tenants.store.get(f"clusterrolebindings.{RBAC}", "cluster-admin")
    assert crb["subjects"] == [{"apiGroup": RBAC, "kind": "Group", "name": "system:masters"}]
