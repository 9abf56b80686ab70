"""Authorization as kube-apiserver's RBAC authorizer decides it, over the sandbox's store.

Followed: ``plugin/pkg/auth/authorizer/rbac/rbac.go`` (a rule allows a resource request when
verb, API group, resource (``res/sub`` combined, ``*/sub`` too) and resourceNames match; a
non-resource request by verb and path, a trailing ``*`` a prefix), ``pkg/apis/rbac/v1/
evaluation_helpers.go`` (``*`` matches every verb, group, resource, URL; empty resourceNames
match any name) and ``pkg/registry/rbac/validation/rule.go`` (the rules of every
ClusterRoleBinding whose subjects name the user, then, for a namespaced request, of every
RoleBinding in that namespace; subjects are a User by name, a Group the user is in, or a
ServiceAccount (``system:serviceaccount:<ns>:<name>``, the binding's namespace by default); a
binding's roleRef is a Role of its own namespace or a ClusterRole). Users in
``system:masters`` are allowed before RBAC is asked, as kube-apiserver's privileged-groups
authorizer allows them; their requests never read the store.

ClusterRoles with an ``aggregationRule`` get the rules of every ClusterRole its selectors match
(kube's aggregation controller writes them into the object; the sandbox has no such controller,
so it joins them when it reads the role). A denial is ``403 Forbidden`` with kube-apiserver's
message (``responsewriters.Forbidden``): ``jobs.visibility.fleetgate.io is forbidden: User "u"
cannot list resource "jobs" in API group "visibility.fleetgate.io" in the namespace "ns"``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from sandbox import errors
from sandbox.requestinfo import Attributes
from sandbox.webhooks import _selector  # metav1.LabelSelector → LabelSelector, one rule

if TYPE_CHECKING:
    from sandbox.store import Store

GROUP = "rbac.authorization.k8s.io"
ROLES, ROLE_BINDINGS = f"roles.{GROUP}", f"rolebindings.{GROUP}"
CLUSTER_ROLES, CLUSTER_ROLE_BINDINGS = f"clusterroles.{GROUP}", f"clusterrolebindings.{GROUP}"
SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"

Rule = Mapping[str, Any]


def rule_allows(attrs: Attributes, rule: Rule) -> bool:
    verbs = rule.get("verbs") or ()
    if "*" not in verbs and attrs.verb not in verbs:
        return False
    if not attrs.resource_request:
        return any(_url_matches(url, attrs.path) for url in rule.get("nonResourceURLs") or ())
    groups = rule.get("apiGroups") or ()
    if "*" not in groups and attrs.api_group not in groups:
        return False
    combined = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
    resources = rule.get("resources") or ()
    if not any(_resource_matches(r, combined, attrs.subresource) for r in resources):
        return False
    names = rule.get("resourceNames") or ()
    return not names or attrs.name in names


def _resource_matches(rule_resource: str, combined: str, subresource: str) -> bool:
    if rule_resource in ("*", combined):
        return True
    return bool(subresource) and rule_resource == f"*/{subresource}"


def _url_matches(rule_url: str, path: str) -> bool:
    if rule_url in ("*", path):
        return True
    return rule_url.endswith("*") and path.startswith(rule_url.rstrip("*"))


def applies_to(attrs: Attributes, subject: Mapping[str, Any], namespace: str) -> bool:
    kind, name = subject.get("kind"), subject.get("name", "")
    if kind == "User":
        return attrs.user.name == name
    if kind == "Group":
        return name in attrs.user.groups
    if kind == "ServiceAccount":
        account_namespace = subject.get("namespace") or namespace
        if not account_namespace:
            return False
        return attrs.user.name == f"{SERVICE_ACCOUNT_PREFIX}{account_namespace}:{name}"
    return False


class Authorizer:
    """``authorize(attrs)`` → (allowed, reason), as ``SubjectAccessReview`` status reports it."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def authorize(self, attrs: Attributes) -> tuple[bool, str]:
        if attrs.user.privileged:
            return True, ""
        for source, rule in self._rules_for(attrs):
            if rule_allows(attrs, rule):
                return True, f"RBAC: allowed by {source}"
        return False, ""

    def check(self, attrs: Attributes) -> None:
        """Raise the 403 kube-apiserver answers when ``attrs`` are not allowed."""
        allowed, reason = self.authorize(attrs)
        if not allowed:
            raise forbidden(attrs, reason)

    def _rules_for(self, attrs: Attributes) -> Iterator[tuple[str, Rule]]:
        store = self.store
        bindings = _objects(store, CLUSTER_ROLE_BINDINGS)
        if attrs.namespace:
            bindings += [b for b in _objects(store, ROLE_BINDINGS) if _in(b, attrs.namespace)]
        for binding in sorted(bindings, key=_binding_order):
            namespace = binding["metadata"].get("namespace", "")
            subject = next(
                (s for s in binding.get("subjects") or () if applies_to(attrs, s, namespace)), None
            )
            if subject is None:
                continue
            ref = binding.get("roleRef") or {}
            kind = "RoleBinding" if namespace else "ClusterRoleBinding"
            where = f"{binding['metadata']['name']}/{namespace}" if namespace else None
            source = (
                f'{kind} "{where or binding["metadata"]["name"]}" of {ref.get("kind")} '
                f'"{ref.get("name")}" to {subject.get("kind")} "{subject.get("name")}"'
            )
            for rule in self._role_rules(ref, namespace):
                yield source, rule

    def _role_rules(self, ref: Mapping[str, Any], namespace: str) -> list[Rule]:
        kind, name = ref.get("kind"), str(ref.get("name", ""))
        if kind == "Role" and namespace:
            role = _get(self.store, ROLES, name, namespace)
        elif kind == "ClusterRole":
            role = _get(self.store, CLUSTER_ROLES, name, None)
        else:
            return []
        if role is None:
            return []
        rules = list(role.get("rules") or ())
        aggregation = role.get("aggregationRule") if kind == "ClusterRole" else None
        if aggregation:
            rules += _aggregated_rules(self.store, aggregation, name)
        return rules


def _aggregated_rules(store: Store, aggregation: Mapping[str, Any], name: str) -> list[Rule]:
    selectors = [_selector(s) for s in aggregation.get("clusterRoleSelectors") or ()]
    rules: list[Rule] = []
    for role in sorted(_objects(store, CLUSTER_ROLES), key=lambda r: r["metadata"]["name"]):
        labels = role["metadata"].get("labels") or {}
        if role["metadata"]["name"] != name and any(s.matches(labels) for s in selectors):
            rules += role.get("rules") or ()
    return rules


def _objects(store: Store, key: str) -> list[Mapping[str, Any]]:
    """The stored objects (not copies: read only), none when the registry lacks the kind."""
    found: list[Mapping[str, Any]] = []
    try:
        store.scan(key, found.append)
    except KeyError:
        return []
    return found


def _get(store: Store, key: str, name: str, namespace: str | None) -> Mapping[str, Any] | None:
    try:
        return store.get(key, name, namespace=namespace)
    except (errors.StatusError, KeyError):
        return None


def _in(obj: Mapping[str, Any], namespace: str) -> bool:
    return obj["metadata"].get("namespace") == namespace


def _binding_order(binding: Mapping[str, Any]) -> tuple[str, str]:
    return binding["metadata"].get("namespace", ""), binding["metadata"]["name"]


def forbidden(attrs: Attributes, reason: str = "") -> errors.StatusError:
    """kube-apiserver's 403 for a denied request (``responsewriters.Forbidden``)."""
    who = f'User "{attrs.user.name}"'
    if not attrs.resource_request:
        why = f'{who} cannot {attrs.verb} path "{attrs.path}"'
    else:
        resource = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
        where = (
            f'in the namespace "{attrs.namespace}"' if attrs.namespace else "at the cluster scope"
        )
        group = f'in API group "{attrs.api_group}"'
        why = f'{who} cannot {attrs.verb} resource "{resource}" {group} {where}'
    if reason:
        why = f"{why}: {reason}"
    qualified = f"{attrs.resource}.{attrs.api_group}" if attrs.api_group else attrs.resource
    if not attrs.resource_request or not attrs.resource:
        message = f"forbidden: {why}"
    elif attrs.name:
        message = f'{qualified} "{attrs.name}" is forbidden: {why}'
    else:
        message = f"{qualified} is forbidden: {why}"
    details = {"name": attrs.name, "group": attrs.api_group, "kind": attrs.resource}
    return errors.StatusError(errors.status(403, "Forbidden", message, details))
