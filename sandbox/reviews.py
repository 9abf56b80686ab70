"""The review kinds kube-apiserver answers on create and never stores.

- ``authentication.k8s.io/v1`` TokenReview (``pkg/registry/authentication/tokenreview``):
  ``spec.token`` (400 ``token is required for TokenReview in authentication`` when empty) →
  ``status.authenticated`` and ``status.user`` {username, uid, groups, extra}, or
  ``status.error: invalid bearer token``. Audiences are not modelled: a static token is good
  for any, and ``status.audiences`` repeats ``spec.audiences``.
- ``authentication.k8s.io/v1`` SelfSubjectReview (``kubectl auth whoami``): the caller.
- ``authorization.k8s.io/v1`` SubjectAccessReview (``pkg/registry/authorization/
  subjectaccessreview``, attributes as ``authorization/util.AuthorizationAttributesFrom``):
  ``spec.user``/``groups``/``uid``/``extra`` and exactly one of ``resourceAttributes``
  {namespace, verb, group, version, resource, subresource, name} or ``nonResourceAttributes``
  {path, verb} (422 otherwise, and without a user or group) → ``status.allowed`` and
  ``reason``; SelfSubjectAccessReview (the caller; ``kubectl auth can-i``) and
  LocalSubjectAccessReview (the namespace of its URL) likewise.

Who may create them is the RBAC check every request passes (verb ``create`` on the resource):
``system:masters``, ``system:auth-delegator`` for the first two, and every authenticated user for
the self reviews (``system:basic-user``). Any other method is 405.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from sandbox import errors
from sandbox.authn import Authenticator, User
from sandbox.rbac import Authorizer
from sandbox.requestinfo import Attributes

AUTHN, AUTHZ = "authentication.k8s.io", "authorization.k8s.io"
KINDS = {
    (AUTHN, "tokenreviews"): "TokenReview",
    (AUTHN, "selfsubjectreviews"): "SelfSubjectReview",
    (AUTHZ, "subjectaccessreviews"): "SubjectAccessReview",
    (AUTHZ, "selfsubjectaccessreviews"): "SelfSubjectAccessReview",
    (AUTHZ, "localsubjectaccessreviews"): "LocalSubjectAccessReview",
}


def review_kind(parts: list[str]) -> tuple[str, str | None] | None:
    """(kind, namespace) when ``parts`` (the URL path's) name a review resource."""
    if len(parts) < 4 or parts[0] != "apis" or parts[1] not in (AUTHN, AUTHZ) or parts[2] != "v1":
        return None
    rest, namespace = parts[3:], None
    if len(rest) == 3 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
    kind = KINDS.get((parts[1], rest[0])) if len(rest) == 1 else None
    if kind is None or (namespace is None) == (kind == "LocalSubjectAccessReview"):
        return None
    return kind, namespace


def answer(
    kind: str,
    namespace: str | None,
    method: str,
    body: bytes,
    caller: User,
    authenticator: Authenticator,
    authorizer: Authorizer,
) -> dict[str, Any]:
    """The created review (201), or a :class:`~sandbox.errors.StatusError`."""
    if method != "POST":
        raise errors.method_not_allowed(method, f"{kind} (create only)")
    review = _decode(body)
    group = AUTHN if kind in ("TokenReview", "SelfSubjectReview") else AUTHZ
    review.update(apiVersion=f"{group}/v1", kind=kind)
    review.setdefault("metadata", {})
    spec = review.get("spec") or {}
    if kind == "TokenReview":
        review["status"] = _token_status(spec, authenticator)
    elif kind == "SelfSubjectReview":
        review["status"] = {"userInfo": caller.to_json()}
    else:
        user = caller if kind == "SelfSubjectAccessReview" else _subject(kind, spec)
        resource = spec.get("resourceAttributes")
        if kind == "LocalSubjectAccessReview" and (resource or {}).get("namespace") != namespace:
            raise errors.bad_request(
                f"spec.resourceAttributes.namespace must match namespace: {namespace}"
            )
        attrs = _attributes(kind, user, spec)
        allowed, reason = authorizer.authorize(attrs)
        review["status"] = {"allowed": allowed} | ({"reason": reason} if reason else {})
    return review


def _decode(body: bytes) -> dict[str, Any]:
    try:
        review = json.loads(body or b"{}")
    except ValueError as error:
        raise errors.bad_request(f"the body of the request is not valid JSON: {error}") from error
    if not isinstance(review, dict):
        raise errors.bad_request("the body of the request must be a JSON object")
    return review


def _token_status(spec: Mapping[str, Any], authenticator: Authenticator) -> dict[str, Any]:
    token = spec.get("token") or ""
    if not token:
        raise errors.bad_request("token is required for TokenReview in authentication")
    user = authenticator.token(str(token))
    if user is None:
        return {"authenticated": False, "user": {}, "error": "invalid bearer token"}
    status: dict[str, Any] = {"authenticated": True, "user": user.to_json()}
    if spec.get("audiences"):
        status["audiences"] = list(spec["audiences"])
    return status


def _subject(kind: str, spec: Mapping[str, Any]) -> User:
    if not spec.get("user") and not spec.get("groups"):
        raise errors.invalid(
            AUTHZ,
            kind,
            "",
            [("spec.user", "FieldValueInvalid", 'Invalid value: "": at least one of user or '
              "group must be specified")],
        )  # fmt: skip
    extra = {str(k): tuple(v or ()) for k, v in (spec.get("extra") or {}).items()}
    groups = tuple(str(g) for g in spec.get("groups") or ())
    return User(str(spec.get("user") or ""), str(spec.get("uid") or ""), groups, extra)


def _attributes(kind: str, user: User, spec: Mapping[str, Any]) -> Attributes:
    resource, other = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
    if (resource is None) == (other is None):
        raise errors.invalid(
            AUTHZ,
            kind,
            "",
            [("spec", "FieldValueInvalid", "Invalid value: \"null\": exactly one of "
              "nonResourceAttributes or resourceAttributes must be specified")],
        )  # fmt: skip
    if other is not None:
        return Attributes(user, str(other.get("verb", "")), False, str(other.get("path", "")))
    return Attributes(
        user,
        verb=str(resource.get("verb", "")),
        resource_request=True,
        api_group=str(resource.get("group", "")),
        api_version=str(resource.get("version") or "*"),
        namespace=str(resource.get("namespace", "")),
        resource=str(resource.get("resource", "")),
        subresource=str(resource.get("subresource", "")),
        name=str(resource.get("name", "")),
    )
