"""RBAC: is every permission ``fleetgate serve`` uses granted?

The permissions come from :func:`reconciler.permissions.serve_permissions` (what the shipped
RBAC is checked against), for ``fleetgate serve`` as the release Deployment runs it
(:func:`deployed_args`). Each is asked as ``kubectl auth can-i`` asks: a SelfSubjectAccessReview for
the kubeconfig's own user, or, with ``--service-account``, a SubjectAccessReview for that
ServiceAccount (which needs leave to create them, as the admin has). Not a
SelfSubjectRulesReview: its rules merge the namespace's RoleBindings with the cluster's, so they
cannot tell a cluster-wide grant from a namespaced one, and they are incomplete under any
authorizer but RBAC; kube-apiserver documents them as not for authorization decisions.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from fleetgate.preflight.client import Api
from fleetgate.preflight.model import Check, fail, ok, plural, warn
from reconciler.cli import add_parser
from reconciler.permissions import Permission

AUTHZ = "/apis/authorization.k8s.io/v1"
SELF_REVIEW = "/apis/authentication.k8s.io/v1/selfsubjectreviews"
SHOWN = 8  # missing permissions named in the detail; the rest are counted


def deployed_args(namespace: str) -> list[str]:
    """The arguments of ``fleetgate serve`` in the release Deployment
    (deploy/reconciler-deployment.yaml) that decide what it touches, with its namespace
    (tests/preflight/test_access.py checks they give the Deployment's permissions)."""
    return [
        "serve",
        "--kubeconfig=-",
        "--policies=-",
        "--host=0.0.0.0",
        "--visibility-port=8443",
        f"--tls-secret={namespace}/fleetgate-visibility-tls",
        f"--tls-dns-name=fleetgate-visibility.{namespace}.svc",
        "--ca-inject=apiservices/v1alpha1.visibility.fleetgate.io",
        "--lease-name=fleetgate-reconciler",
        f"--lease-namespace={namespace}",
    ]


def deployed_serve(namespace: str) -> argparse.Namespace:
    """``fleetgate serve``'s parsed arguments as the release Deployment gives them."""
    parser = argparse.ArgumentParser(prog="fleetgate")
    add_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(deployed_args(namespace))


def service_account_subject(namespace: str, name: str) -> dict[str, Any]:
    """A ServiceAccount as its tokens authenticate: its user name and groups."""
    return {
        "user": f"system:serviceaccount:{namespace}:{name}",
        "groups": [
            "system:serviceaccounts",
            f"system:serviceaccounts:{namespace}",
            "system:authenticated",
        ],
    }


def check_access(
    api: Api, needs: Sequence[Permission], service_account: tuple[str, str] | None
) -> Check:
    name = "rbac for fleetgate serve"
    if service_account is not None:
        subject = service_account_subject(*service_account)
        who, path = subject["user"], f"{AUTHZ}/subjectaccessreviews"
    else:
        subject, who, path = {}, whoami(api), f"{AUTHZ}/selfsubjectaccessreviews"
    missing = []
    for need in needs:
        review = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview" if subject else "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": attributes(need), **subject},
        }
        answer = api.post(path, review)
        if not answer.ok:
            return warn(name, f"not checked: {who} cannot ask ({answer.message})")
        if not (answer.body.get("status") or {}).get("allowed"):
            missing.append(str(need))
    if not missing:
        return ok(name, f"{who} has all {len(needs)} permissions fleetgate serve uses")
    shown = "; ".join(missing[:SHOWN])
    more = f"; and {len(missing) - SHOWN} more" if len(missing) > SHOWN else ""
    return fail(
        name,
        f"{who} lacks {plural(len(missing), 'permission')} of {len(needs)}: {shown}{more}",
        "apply dist/fleetgate-karmada.yaml (ClusterRole and Role fleetgate-reconciler, bound to "
        f"the ServiceAccount fleetgate-reconciler), or grant {who} what is missing",
    )


def attributes(need: Permission) -> dict[str, str]:
    found = {
        "verb": need.verb,
        "group": need.group,
        "resource": need.resource,
        "subresource": need.subresource,
        "namespace": need.namespace,
        "name": need.name,
    }
    return {key: value for key, value in found.items() if value or key in ("group", "resource")}


def whoami(api: Api) -> str:
    """The kubeconfig's user, as the API server knows it (``kubectl auth whoami``)."""
    answer = api.post(
        SELF_REVIEW, {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    )
    user = ((answer.body.get("status") or {}).get("userInfo") or {}) if answer.ok else {}
    return str(user.get("username") or "the kubeconfig's user")
