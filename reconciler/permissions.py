"""What ``fleetgate serve`` does on the karmada-apiserver, as RBAC sees it: each (verb, resource,
namespace, name) one of its parts calls, given the flags that decide them.

This is the one list: the shipped RBAC (deploy/karmada-apiserver/reconciler-rbac.yaml) is
checked against it (tests/reconciler/test_deploy_reconciler.py), and ``fleetgate preflight``
asks the API server whether each is allowed. The parts, and what they call:

- the informers (:mod:`reconciler.resources`): get, list and watch of every resource they watch,
  across all namespaces;
- the write path (:mod:`reconciler.apply`): merge patches of the bindings and of their status;
  Events (:mod:`reconciler.recorder`), in any namespace;
- leader election (:mod:`reconciler.leader`): create Leases in the lease namespace, get and
  update the one named;
- the last good policy set (:mod:`reconciler.lastgood`): the same for its ConfigMap;
- a managed serving certificate (:mod:`webhook.certmanager`, ``--tls-secret``): the same for its
  Secret, and get and patch of each ``--ca-inject`` object;
- delegated authentication of the read API (:mod:`reconciler.apiauth`): TokenReviews and
  SubjectAccessReviews; the visibility API reads the front proxy's CA from
  ``kube-system/extension-apiserver-authentication`` (:mod:`reconciler.visibility`).
"""

from __future__ import annotations

import argparse
import ipaddress
from dataclasses import dataclass

from reconciler.resources import (
    CLUSTER_RESOURCE_BINDINGS,
    RESOURCE_BINDINGS,
    default_resources,
)
from webhook.certmanager import TARGET_KINDS

READ = ("get", "list", "watch")
NAMED = ("get", "update")  # an object created once, then read and replaced by its name
# kube-apiserver's names for the ConfigMap an aggregated API server trusts its front proxy by
AUTHENTICATION_CONFIGMAP = ("kube-system", "extension-apiserver-authentication")


@dataclass(frozen=True, slots=True, order=True)
class Permission:
    """One request RBAC must allow: ``namespace`` "" is every namespace (or a cluster-scoped
    resource), ``name`` "" any name."""

    verb: str
    group: str
    resource: str
    subresource: str = ""
    namespace: str = ""
    name: str = ""

    @property
    def qualified(self) -> str:
        """``resourcebindings.work.karmada.io/status``, ``leases.coordination.k8s.io``,
        ``events``: as kubectl names a resource."""
        base = f"{self.resource}.{self.group}" if self.group else self.resource
        return f"{base}/{self.subresource}" if self.subresource else base

    def __str__(self) -> str:
        where = f" {self.name!r}" if self.name else ""
        where += f" in namespace {self.namespace}" if self.namespace else ""
        return f"{self.verb} {self.qualified}{where}"


def delegated_auth(args: argparse.Namespace) -> bool:
    """Whether the read API asks the API server who calls (``--api-auth``: ``auto`` is
    delegated unless ``--host`` is a loopback address)."""
    chosen = getattr(args, "api_auth", "none")
    if chosen != "auto":
        return chosen == "delegated"
    try:
        return not ipaddress.ip_address(args.host).is_loopback
    except ValueError:
        return args.host != "localhost"


def serve_permissions(args: argparse.Namespace) -> tuple[Permission, ...]:
    """Every permission ``fleetgate serve`` with these (parsed) arguments uses, sorted."""
    needs: set[Permission] = set()
    for resource in default_resources():
        needs.update(Permission(verb, resource.group, resource.plural) for verb in READ)
    for binding in (RESOURCE_BINDINGS, CLUSTER_RESOURCE_BINDINGS):
        needs.add(Permission("patch", binding.group, binding.plural))
        needs.add(Permission("patch", binding.group, binding.plural, "status"))
    # reconciler.recorder creates an Event, and patches its count when it happens again
    needs.update(Permission(verb, "", "events") for verb in ("create", "patch"))
    namespace = args.lease_namespace
    if args.leader_elect:
        needs.update(_one_object("coordination.k8s.io", "leases", namespace, args.lease_name))
    if args.last_good_configmap:
        needs.update(_one_object("", "configmaps", namespace, args.last_good_configmap))
    if args.tls_secret is not None:
        needs.update(_one_object("", "secrets", *args.tls_secret))
    for target in args.ca_inject:
        group, _ = TARGET_KINDS[target.kind]
        needs.update(Permission(v, group, target.kind, name=target.name) for v in ("get", "patch"))
    if delegated_auth(args):
        needs.add(Permission("create", "authentication.k8s.io", "tokenreviews"))
        needs.add(Permission("create", "authorization.k8s.io", "subjectaccessreviews"))
    if args.visibility_port is not None:
        where, name = AUTHENTICATION_CONFIGMAP
        needs.add(Permission("get", "", "configmaps", namespace=where, name=name))
    return tuple(sorted(needs))


def _one_object(group: str, resource: str, namespace: str, name: str) -> list[Permission]:
    """Create in the namespace (RBAC cannot limit a create to a name), then get and update."""
    return [
        Permission("create", group, resource, namespace=namespace),
        *(Permission(verb, group, resource, namespace=namespace, name=name) for verb in NAMED),
    ]
