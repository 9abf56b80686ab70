"""deploy/'s reconciler: the Deployment runs ``fleetgate serve`` with arguments its parser
accepts, on the mounted policies and karmada-apiserver kubeconfig, with leader election on the
Lease its Role grants; the RBAC on the karmada-apiserver is exactly what the reconciler
touches (reads of every resource its informers watch, patches of bindings and their status,
Events, one Lease). Rendered with ``kubectl kustomize`` and by hand
(tests/webhook/test_deploy.py)."""

from __future__ import annotations

import argparse
from typing import Any

from reconciler.cli import add_parser
from reconciler.permissions import Permission, serve_permissions
from reconciler.resources import default_resources
from tests.webhook.test_deploy import one, rendered

__all__ = ["rendered"]  # the fixture, used by name

NAME = "fleetgate-reconciler"
ROLE = f"{NAME}-leader-election"
READ = {"get", "list", "watch"}


def serve_args(container: dict[str, Any]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="fleetgate", exit_on_error=False)
    add_parser(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(container["args"])


def test_the_deployment_runs_serve_with_leader_election_on_its_mounts(rendered):
    deployment = one(rendered["host"], "Deployment", NAME)
    assert deployment["spec"]["replicas"] == 2
    pod = deployment["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False
    account = one(rendered["host"], "ServiceAccount", NAME)
    assert pod["serviceAccountName"] == account["metadata"]["name"]
    assert account["automountServiceAccountToken"] is False
    [container] = pod["containers"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    args = serve_args(container)
    assert args.command == "serve" and args.leader_elect
    assert args.identity == "$(POD_NAME)"
    env = {e["name"]: e for e in container["env"]}
    assert env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"

    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert str(args.policies) == mounts["policies"]
    config_map = one(rendered["host"], "ConfigMap")
    assert volumes["policies"]["configMap"]["name"] == config_map["metadata"]["name"]
    assert args.kubeconfig.parent.as_posix() == mounts["karmada-kubeconfig"]
    assert volumes["karmada-kubeconfig"]["secret"]["secretName"] == f"{NAME}-kubeconfig"

    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports["http"] == args.port
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        assert container[probe]["httpGet"] == {"path": path, "port": "http"}
    assert pod["terminationGracePeriodSeconds"] > args.shutdown_timeout

    labels = deployment["spec"]["template"]["metadata"]["labels"]
    for kind in ("Service", "PodDisruptionBudget"):
        selector = one(rendered["host"], kind, NAME)["spec"]["selector"]
        assert selector.get("matchLabels", selector).items() <= labels.items()

    # the Lease it elects on is the one its Role on the karmada-apiserver names
    role = one(rendered["karmada"], "Role", ROLE)
    assert role["metadata"]["namespace"] == args.lease_namespace
    names = {n for rule in role["rules"] for n in rule.get("resourceNames", [])}
    # and the ConfigMap of the last good policy set, in the same namespace (reconciler.lastgood),
    # and the Secret of its managed serving certificate (webhook.certmanager)
    assert args.tls_secret == (args.lease_namespace, "fleetgate-visibility-tls")
    assert names == {args.lease_name, args.last_good_configmap, args.tls_secret[1]}


def grants(rules: list[dict[str, Any]]) -> dict[tuple[str, str], set[str]]:
    found: dict[tuple[str, str], set[str]] = {}
    for rule in rules:
        assert "*" not in rule["verbs"] and "*" not in rule["resources"], rule
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                found.setdefault((group, resource), set()).update(rule["verbs"])
    return found


def allowed(rules: list[dict[str, Any]], namespace: str = "") -> set[Permission]:
    """Every (verb, resource, name) the rules name, as permissions in ``namespace``."""
    found = set()
    for rule in rules:
        for group in rule["apiGroups"]:
            for qualified in rule["resources"]:
                resource, _, sub = qualified.partition("/")
                for verb in rule["verbs"]:
                    for name in rule.get("resourceNames") or [""]:
                        found.add(Permission(verb, group, resource, sub, namespace, name))
    return found


# what the bootstrap roles kube-apiserver creates grant, bound by name in reconciler-rbac.yaml
DELEGATION = {
    Permission("create", "authentication.k8s.io", "tokenreviews"),
    Permission("create", "authorization.k8s.io", "subjectaccessreviews"),
    Permission(
        "get", "", "configmaps", namespace="kube-system", name="extension-apiserver-authentication"
    ),
}


def test_the_roles_grant_exactly_what_serve_uses(rendered):
    """reconciler.permissions, from the Deployment's own arguments: the ClusterRole grants the
    cluster-wide part, the Role the lease namespace's, the bootstrap roles the rest; nothing
    more."""
    [container] = one(rendered["host"], "Deployment", NAME)["spec"]["template"]["spec"][
        "containers"
    ]
    args = serve_args(container)
    needs = set(serve_permissions(args))
    cluster_role = one(rendered["karmada"], "ClusterRole", NAME)
    role = one(rendered["karmada"], "Role", ROLE)
    grants(cluster_role["rules"])  # no wildcards
    in_cluster = {p for p in needs if not p.namespace} - DELEGATION
    in_namespace = {p for p in needs if p.namespace == args.lease_namespace}
    assert allowed(cluster_role["rules"]) == in_cluster
    assert allowed(role["rules"], args.lease_namespace) == in_namespace
    assert needs - in_cluster - in_namespace == DELEGATION


def test_the_permissions_are_the_informers_reads_and_the_writes():
    """The list itself: reads of what the informers watch, patches of bindings and their
    status, Events, the Lease and ConfigMap by name."""
    parser = argparse.ArgumentParser(prog="fleetgate")
    add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["serve", "--kubeconfig", "k", "--policies", "p"])
    needs = serve_permissions(args)
    reads = {(p.group, p.resource) for p in needs if p.verb in READ and not p.name}
    assert reads == {(r.group, r.plural) for r in default_resources()}
    writes = {str(p) for p in needs if p.verb not in READ or p.name}
    assert writes == {
        "patch resourcebindings.work.karmada.io",
        "patch resourcebindings.work.karmada.io/status",
        "patch clusterresourcebindings.work.karmada.io",
        "patch clusterresourcebindings.work.karmada.io/status",
        "create events",
        "patch events",
        "create leases.coordination.k8s.io in namespace fleetgate-system",
        "get leases.coordination.k8s.io 'fleetgate-reconciler' in namespace fleetgate-system",
        "update leases.coordination.k8s.io 'fleetgate-reconciler' in namespace fleetgate-system",
        "create configmaps in namespace fleetgate-system",
        "get configmaps 'fleetgate-last-good-policies' in namespace fleetgate-system",
        "update configmaps 'fleetgate-last-good-policies' in namespace fleetgate-system",
    }


def test_the_role_and_bindings_name_the_reconcilers_account(rendered):
    account = one(rendered["karmada"], "ServiceAccount", NAME)
    namespace = account["metadata"]["namespace"]
    assert one(rendered["karmada"], "Namespace")["metadata"]["name"] == namespace
    role = one(rendered["karmada"], "Role", ROLE)
    assert grants(role["rules"]) == {
        ("coordination.k8s.io", "leases"): {"create", "get", "update"},
        ("", "configmaps"): {"create", "get", "update"},
        ("", "secrets"): {"create", "get", "update"},
    }
    subject = {"kind": "ServiceAccount", "name": NAME, "namespace": namespace}
    for kind, name, role_kind, role_name in (
        ("ClusterRoleBinding", NAME, "ClusterRole", NAME),
        ("RoleBinding", role["metadata"]["name"], "Role", role["metadata"]["name"]),
        # the visibility API: TokenReview and SubjectAccessReview for the direct port, and the
        # front proxy's CA (reconciler.apiauth, reconciler.visibility)
        ("ClusterRoleBinding", f"{NAME}:auth-delegator", "ClusterRole", "system:auth-delegator"),
        (
            "RoleBinding",
            f"{NAME}:extension-apiserver-authentication-reader",
            "Role",
            "extension-apiserver-authentication-reader",
        ),
    ):
        binding = one(rendered["karmada"], kind, name)
        assert binding["subjects"] == [subject]
        assert binding["roleRef"] == {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": role_kind,
            "name": role_name,
        }
    token = one(rendered["karmada"], "Secret", f"{NAME}-token")
    assert token["type"] == "kubernetes.io/service-account-token"
    assert token["metadata"]["annotations"]["kubernetes.io/service-account.name"] == NAME


def test_the_visibility_apiservice_reaches_the_reconcilers_https_port(rendered):
    # the karmada-apiserver proxies visibility.fleetgate.io to the APIService's Service, an
    # ExternalName for the host cluster's Service, which selects the reconciler's https port
    # (serve --visibility-port), whose certificate names that DNS name
    service = one(rendered["karmada"], "APIService", "v1alpha1.visibility.fleetgate.io")["spec"]
    assert (service["group"], service["version"]) == ("visibility.fleetgate.io", "v1alpha1")
    external = one(rendered["karmada"], "Service", service["service"]["name"])
    assert external["metadata"]["namespace"] == service["service"]["namespace"]
    target = external["spec"]["externalName"]
    name, namespace = target.split(".")[:2]
    host = one(rendered["host"], "Service", name)
    assert host["metadata"]["namespace"] == namespace
    [port] = host["spec"]["ports"]
    assert port["port"] == service["service"]["port"]
    deployment = one(rendered["host"], "Deployment", NAME)
    pod = deployment["spec"]["template"]["spec"]
    [container] = pod["containers"]
    args = serve_args(container)
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports[port["targetPort"]] == args.visibility_port
    assert args.host == "0.0.0.0" and args.api_auth == "auto"  # exposed: delegated auth
    # its managed certificate names the ExternalName's target, and its CA goes to this APIService
    assert target in args.tls_dns_name
    assert [str(t) for t in args.ca_inject] == ["apiservices/v1alpha1.visibility.fleetgate.io"]
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert args.tls_dir.as_posix().startswith(mounts["tmp"] + "/")
    readers = one(rendered["karmada"], "ClusterRole", "fleetgate-visibility-reader")
    assert grants(readers["rules"]) == {("visibility.fleetgate.io", "jobs"): {"get", "list"}}
    aggregates = one(rendered["karmada"], "ClusterRole", "fleetgate-queue-reader")
    assert grants(aggregates["rules"]) == {
        ("visibility.fleetgate.io", r): {"get", "list"} for r in ("queues", "fleets", "dashboard")
    }
