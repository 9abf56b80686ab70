"""Admission webhooks, called as kube-apiserver calls them (the store's admission hook).

On every create, update (and delete, for validating webhooks) the sandbox reads the
``MutatingWebhookConfiguration`` and ``ValidatingWebhookConfiguration`` objects in its store —
in name order, webhooks in their order — and calls each webhook whose ``rules`` (operations,
apiGroups, apiVersions, resources with ``*`` and ``res/sub``, scope), ``namespaceSelector``
(the namespace's labels, with ``kubernetes.io/metadata.name``) and ``objectSelector`` (the
object's or old object's labels) match. ``matchPolicy`` Equivalent (the default) also matches a
request made through another served version of the same resource, and sends it in the matched
version (the sandbox converts nothing: versions share one object). Mutating webhooks run in
sequence, each seeing the previous one's JSON patch; then validating webhooks, in sequence
(kube-apiserver runs them in parallel; the outcome is the same).

Answers, as kube-apiserver gives them: ``allowed: false`` → the webhook's Status with the
message ``admission webhook "NAME" denied the request: MESSAGE`` (a code below 400 becomes 400);
a call that fails (refused, TLS, ``timeoutSeconds`` (default 10) passed, bad answer) →
``failurePolicy`` Fail (default): 500 ``failed calling webhook "NAME": …``; Ignore: logged,
the write goes on; a patch that does not apply → 500; ``warnings`` → the client's ``Warning``
headers; a dry-run request to a webhook with side effects other than None/NoneOnDryRun → 400.

Not done: ``reinvocationPolicy`` (never reinvoked), ``matchConditions``, ``auditAnnotations``
(dropped), admissionReviewVersions other than v1, the request's own version in validating
calls (the store validates in its storage version).
"""

from __future__ import annotations

import base64
import json
import logging
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import jsonpatch

from sandbox import errors
from sandbox.admission import CREATE, DELETE, UPDATE, AdmissionRequest, add_warning
from sandbox.authn import acting
from sandbox.dns import Hosts
from sandbox.resources import ResourceType
from sandbox.selectors import LabelSelector, Requirement
from sandbox.webhookcall import REVIEW_VERSION, CallError, TLSContexts, post_review, with_timeout

if TYPE_CHECKING:
    from sandbox.store import Store

log = logging.getLogger("fleetgate.sandbox.webhooks")

GROUP = "admissionregistration.k8s.io"
MUTATING = f"mutatingwebhookconfigurations.{GROUP}"
VALIDATING = f"validatingwebhookconfigurations.{GROUP}"
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
DEFAULT_TIMEOUT = 10
DEFAULT_USER = {
    "username": "system:admin",
    "groups": ["system:masters", "system:authenticated"],
}
_OPTIONS = {CREATE: "CreateOptions", UPDATE: "UpdateOptions", DELETE: "DeleteOptions"}
_OPERATORS = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}
_DRY_RUN_SAFE = ("None", "NoneOnDryRun")


@dataclass(frozen=True, slots=True)
class Match:
    """A webhook that applies to a request, and the version it is sent in."""

    name: str
    webhook: Mapping[str, Any]
    version: str


class WebhookAdmission:
    """The :class:`~sandbox.admission.Admission` that calls the configured webhooks.

    ``service_urls``: ``{(namespace, name, port): "https://127.0.0.1:8443"}`` for webhooks
    configured with ``clientConfig.service`` (the path of the service reference is appended).
    """

    def __init__(
        self,
        store: Store,
        *,
        service_urls: Mapping[tuple[str, str, int], str] | None = None,
        user_info: Mapping[str, Any] | None = None,
        hosts: Hosts | None = None,
    ) -> None:
        self._store = store
        self.service_urls: dict[tuple[str, str, int], str] = dict(service_urls or {})
        self.user_info = dict(user_info or DEFAULT_USER)
        self.hosts = hosts if hosts is not None else {}  # in place of cluster DNS (sandbox.dns)
        self._contexts = TLSContexts(self.hosts)

    # -- the Admission protocol --------------------------------------------------------------

    def mutate(self, request: AdmissionRequest) -> dict[str, Any] | None:
        obj, changed = request.object, False
        for match in self._matching(MUTATING, request):
            response = self._call(match, request, obj)
            if response is None or not response.get("patch"):
                continue
            if response.get("patchType") != "JSONPatch":
                raise errors.internal(
                    f'admission webhook "{match.name}": unsupported patchType '
                    f"{response.get('patchType')!r}"
                )
            obj, changed = _apply(match.name, obj, response["patch"]), True
        return obj if changed else None

    def validate(self, request: AdmissionRequest) -> None:
        for match in self._matching(VALIDATING, request):
            self._call(match, request, request.object)

    # -- matching ----------------------------------------------------------------------------

    def _matching(self, resource: str, request: AdmissionRequest) -> Iterator[Match]:
        rt = request.resource
        if rt.group == GROUP:  # never called for webhook configurations (nor in kube-apiserver)
            return
        configurations = self._store.list(resource)["items"]
        if not configurations:
            return
        sent = (request.object or request.old_object or {}).get("apiVersion", "")
        version = sent.rpartition("/")[2] or rt.storage_version
        namespace_labels: dict[str, str] | None = None
        for configuration in sorted(configurations, key=lambda c: c["metadata"]["name"]):
            for webhook in configuration.get("webhooks") or []:
                matched = _rule_version(webhook, request, rt, version)
                if matched is None or not _object_selected(webhook, request):
                    continue
                if rt.namespaced and webhook.get("namespaceSelector"):
                    if namespace_labels is None:
                        namespace_labels = self._namespace_labels(request.namespace or "")
                    if not _selector(webhook["namespaceSelector"]).matches(namespace_labels):
                        continue
                elif rt.kind == "Namespace" and webhook.get("namespaceSelector"):
                    labels = _labels(request.object or request.old_object)
                    labels.setdefault(NAMESPACE_NAME_LABEL, request.name)
                    if not _selector(webhook["namespaceSelector"]).matches(labels):
                        continue
                yield Match(str(webhook.get("name", "")), webhook, matched)

    def _namespace_labels(self, namespace: str) -> dict[str, str]:
        try:
            found = self._store.get("namespaces", namespace)
        except errors.StatusError:
            found = {}
        labels = _labels(found)
        labels.setdefault(NAMESPACE_NAME_LABEL, namespace)
        return labels

    # -- calling -----------------------------------------------------------------------------

    def _call(
        self, match: Match, request: AdmissionRequest, obj: dict[str, Any] | None
    ) -> dict[str, Any] | None:
        """The webhook's response; None when it failed and its failurePolicy is Ignore.
        Raises the Status the client gets for a denial or a failure under Fail."""
        webhook, name = match.webhook, match.name
        if request.dry_run and webhook.get("sideEffects") not in _DRY_RUN_SAFE:
            raise errors.bad_request(f'admission webhook "{name}" does not support dry run')
        timeout = float(webhook.get("timeoutSeconds") or DEFAULT_TIMEOUT)
        review = self._review(match, request, obj)
        try:
            url = with_timeout(self._url(webhook.get("clientConfig") or {}), timeout)
            ca_bundle = str((webhook.get("clientConfig") or {}).get("caBundle") or "")
            response = post_review(url, review, timeout, self._contexts, ca_bundle)
        except CallError as error:
            message = f'failed calling webhook "{name}": failed to call webhook: {error}'
            if webhook.get("failurePolicy", "Fail") == "Ignore":
                log.warning("%s (failurePolicy Ignore: the request goes on)", message)
                return None
            raise errors.internal(message) from error
        for text in response.get("warnings") or []:
            add_warning(str(text))
        if not response["allowed"]:
            raise errors.StatusError(_denial(name, response.get("status")))
        return response

    def _url(self, client_config: Mapping[str, Any]) -> str:
        if client_config.get("url"):
            return str(client_config["url"])
        service = client_config.get("service") or {}
        key = (
            str(service.get("namespace")),
            str(service.get("name")),
            int(service.get("port") or 443),
        )
        base = self.service_urls.get(key)
        if base is None:
            raise CallError(
                f"service {key[0]}/{key[1]}:{key[2]} has no URL in the sandbox "
                "(Sandbox(service_urls={(namespace, name, port): url}))"
            )
        return base.rstrip("/") + "/" + str(service.get("path") or "").lstrip("/")

    def _review(
        self, match: Match, request: AdmissionRequest, obj: dict[str, Any] | None
    ) -> dict[str, Any]:
        rt, version = request.resource, match.version
        sent = (request.object or request.old_object or {}).get("apiVersion", "")
        request_version = sent.rpartition("/")[2] or rt.storage_version
        api_version = rt.api_version(version)

        def in_version(value: dict[str, Any] | None) -> dict[str, Any] | None:
            return None if value is None else {**value, "apiVersion": api_version}

        options = {"apiVersion": "meta.k8s.io/v1", "kind": _OPTIONS.get(request.operation)}
        return {
            "apiVersion": REVIEW_VERSION,
            "kind": "AdmissionReview",
            "request": {
                "uid": str(uuid.uuid4()),
                "kind": {"group": rt.group, "version": version, "kind": rt.kind},
                "resource": {"group": rt.group, "version": version, "resource": rt.plural},
                "subResource": request.subresource or None,
                "requestKind": {"group": rt.group, "version": request_version, "kind": rt.kind},
                "requestResource": {
                    "group": rt.group,
                    "version": request_version,
                    "resource": rt.plural,
                },
                "requestSubResource": request.subresource or None,
                "name": request.name or (obj or {}).get("metadata", {}).get("name", ""),
                "namespace": request.namespace or "",
                "operation": request.operation,
                "userInfo": caller.to_json() if (caller := acting()) else self.user_info,
                "object": in_version(obj),
                "oldObject": in_version(request.old_object),
                "dryRun": request.dry_run,
                "options": options,
            },
        }


# -- helpers ---------------------------------------------------------------------------------


def _rule_version(
    webhook: Mapping[str, Any], request: AdmissionRequest, rt: ResourceType, version: str
) -> str | None:
    """The version a request matches the webhook's rules in (the request's own first)."""
    candidates = [version]
    if webhook.get("matchPolicy", "Equivalent") == "Equivalent":
        candidates += [v for v in rt.versions if v != version]
    for candidate in candidates:
        if any(_rule_matches(rule, request, rt, candidate) for rule in webhook.get("rules") or []):
            return candidate
    return None


def _rule_matches(
    rule: Mapping[str, Any], request: AdmissionRequest, rt: ResourceType, version: str
) -> bool:
    def has(field: str, value: str) -> bool:
        values = rule.get(field) or []
        return "*" in values or value in values

    if not (has("operations", request.operation) and has("apiGroups", rt.group)):
        return False
    if not has("apiVersions", version):
        return False
    scope = rule.get("scope") or "*"
    if scope != "*" and scope != ("Namespaced" if rt.namespaced else "Cluster"):
        return False
    for entry in rule.get("resources") or []:
        resource, _, sub = str(entry).partition("/")
        if resource in ("*", rt.plural) and sub in ("*", request.subresource):
            return True
    return False


def _labels(obj: Mapping[str, Any] | None) -> dict[str, str]:
    return dict(((obj or {}).get("metadata") or {}).get("labels") or {})


def _selector(selector: Mapping[str, Any]) -> LabelSelector:
    """A metav1.LabelSelector (matchLabels, matchExpressions) as the sandbox's selector."""
    requirements = [
        Requirement(k, "=", (str(v),)) for k, v in (selector.get("matchLabels") or {}).items()
    ]
    for expression in selector.get("matchExpressions") or []:
        operator = _OPERATORS.get(expression.get("operator", ""))
        if operator is None:
            raise errors.internal(f"unknown label selector operator {expression.get('operator')!r}")
        values = tuple(str(v) for v in expression.get("values") or ())
        requirements.append(Requirement(str(expression.get("key", "")), operator, values))
    return LabelSelector(tuple(requirements))


def _object_selected(webhook: Mapping[str, Any], request: AdmissionRequest) -> bool:
    if not webhook.get("objectSelector"):
        return True
    selector = _selector(webhook["objectSelector"])
    return any(
        selector.matches(_labels(obj))
        for obj in (request.object, request.old_object)
        if obj is not None
    )


def _apply(name: str, obj: dict[str, Any] | None, encoded: str) -> dict[str, Any]:
    try:
        operations = json.loads(base64.b64decode(encoded))
        return jsonpatch.apply_patch(obj or {}, operations)
    except (
        ValueError,
        TypeError,
        jsonpatch.JsonPatchException,
        jsonpatch.JsonPointerException,
    ) as error:
        raise errors.internal(
            f'admission webhook "{name}" returned a patch that does not apply: {error}'
        ) from error


def _denial(name: str, result: Mapping[str, Any] | None) -> dict[str, Any]:
    """kube-apiserver's webhookerrors.ToStatusErr."""
    status = dict(result or {})
    code = int(status.get("code") or 0)
    message, reason = str(status.get("message") or ""), str(status.get("reason") or "")
    denied_by = f'admission webhook "{name}" denied the request'
    if message:
        text = f"{denied_by}: {message}"
    elif reason:
        text = f"{denied_by}: {reason}"
    else:
        text = f"{denied_by} without explanation"
    out: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}}
    out.update({"status": "Failure", "message": text, "reason": reason, "code": max(code, 400)})
    if status.get("details"):
        out["details"] = status["details"]
    return out
