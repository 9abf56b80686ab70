"""What a request asks to do, read from its URL alone, as kube-apiserver's RequestInfoFactory
reads it (k8s.io/apiserver ``endpoints/request/requestinfo.go``): the authorization attributes.

Resource requests are ``/api/<version>/...`` and ``/apis/<group>/<version>/...`` with at least
one part after the version; everything else (``/apis``, ``/apis/<group>/<version>``,
``/healthz``, ``/sandbox/faults``) is a non-resource request whose verb is the lower-case HTTP
method. ``watch`` and ``proxy`` as the first part after the version are verbs;
``namespaces/<ns>/<resource>`` sets the namespace (``namespaces/<ns>/status`` and ``finalize``
are subresources of the namespace); then ``<resource>[/<name>[/<subresource>]]``. GET without a
name is ``list``, or ``watch`` when the ``watch`` parameter is anything but ``false``/``0``;
DELETE without a name is ``deletecollection``. No registry is consulted: an aggregated API's
requests get their attributes the same way as built-in ones.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sandbox.authn import User

_VERBS = {"POST": "create", "GET": "get", "HEAD": "get", "PUT": "update", "PATCH": "patch"}
_VERBS["DELETE"] = "delete"
_NAMESPACE_SUBRESOURCES = frozenset({"status", "finalize"})


@dataclass(frozen=True, slots=True)
class Attributes:
    """``authorizer.Attributes``: who does what to which resource (or non-resource path)."""

    user: User
    verb: str
    resource_request: bool
    path: str = ""
    api_group: str = ""
    api_version: str = ""
    namespace: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""


def attributes(user: User, method: str, path: str, query: Mapping[str, str]) -> Attributes:
    """The attributes kube-apiserver authorizes a request by (``query``: its last values)."""
    parts = [p for p in path.strip("/").split("/") if p] if path.strip("/") else []
    plain = Attributes(user, method.lower(), False, path)
    if len(parts) < 3 or parts[0] not in ("api", "apis"):
        return plain
    if parts[0] == "apis":
        if len(parts) < 4:
            return plain
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        group, version, rest = "", parts[1], parts[2:]
    if rest[0] in ("watch", "proxy"):
        if len(rest) < 2:  # kube-apiserver: "unable to determine kind and namespace"
            return Attributes(user, rest[0], True, path, group, version)
        verb, rest = rest[0], rest[1:]
    else:
        verb = _VERBS.get(method, "")
    namespace = ""
    if rest[0] == "namespaces" and len(rest) > 1:
        namespace = rest[1]
        if len(rest) > 2 and rest[2] not in _NAMESPACE_SUBRESOURCES:
            rest = rest[2:]
    resource = rest[0]
    name = rest[1] if len(rest) >= 2 else ""
    subresource = rest[2] if len(rest) >= 3 and verb != "proxy" else ""
    if not name and verb == "get":
        watch = query.get("watch")
        verb = "list" if watch is None or watch.lower() in ("false", "0") else "watch"
    if not name and verb == "delete":
        verb = "deletecollection"
    return Attributes(
        user, verb, True, path, group, version, namespace, resource, subresource, name
    )
