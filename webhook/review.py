"""AdmissionReview ``admission.k8s.io/v1`` in, (HTTP status, body) out. No Flask here.

``translate`` parses and checks the envelope, hands the request to a decision function and wraps
its Verdict in a response. Everything that is wrong with the input itself (not JSON, not an
AdmissionReview, no ``request.uid``, an object of the wrong shape) becomes a ``ReviewError``, which
the caller answers with HTTP 400 and the message: the API server then applies the webhook's
failurePolicy. A policy that refuses an object is not an error: it is a Verdict with
``allowed: false``, sent with HTTP 200 as the API server expects.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.errors import FleetgateError

API_VERSION = "admission.k8s.io/v1"
KIND = "AdmissionReview"
OPERATIONS = ("CREATE", "UPDATE", "DELETE", "CONNECT")
AUDIT_VERSION_KEY = "policy-version"


class ReviewError(FleetgateError):
    """Input that is not a well-formed AdmissionReview for this endpoint (HTTP 400)."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


@dataclass(frozen=True, slots=True)
class GroupVersionKind:
    group: str
    version: str
    kind: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def __str__(self) -> str:
        return f"{self.api_version} {self.kind}"


@dataclass(frozen=True, slots=True)
class AdmissionRequest:
    """The parts of ``request`` the webhook reads."""

    uid: str
    kind: GroupVersionKind
    operation: str
    namespace: str
    name: str
    object: Mapping[str, Any] | None
    old_object: Mapping[str, Any] | None
    dry_run: bool = False
    user: str = ""
    groups: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Verdict:
    """A decision on one request. ``outcome`` is the metrics label of the result."""

    allowed: bool
    outcome: str  # allowed | patched | warned | denied
    patch: tuple[Mapping[str, Any], ...] = ()
    warnings: tuple[str, ...] = ()
    code: int = 200
    reason: str = ""
    message: str = ""
    audit: Mapping[str, str] = field(default_factory=dict)
    # (what, detail) pairs for metrics: ("patch", "held"), ("denied", policy), ("dryrun", policy)…
    events: tuple[tuple[str, str], ...] = ()


def parse_review(body: bytes) -> AdmissionRequest:
    """The request of an AdmissionReview body, or ReviewError saying what is wrong."""
    document = _load_json(body)
    if not isinstance(document, dict):
        raise ReviewError(f"expected a JSON object (an AdmissionReview), got {_type(document)}")
    api_version, kind = document.get("apiVersion"), document.get("kind")
    if api_version != API_VERSION or kind != KIND:
        raise ReviewError(
            f"expected apiVersion {API_VERSION} kind {KIND}, got apiVersion {api_version!r} "
            f"kind {kind!r} (set admissionReviewVersions: [v1] in the webhook configuration)"
        )
    request = document.get("request")
    if request is None:
        raise ReviewError("AdmissionReview has no request")
    if not isinstance(request, dict):
        raise ReviewError(f"request: expected an object, got {_type(request)}")
    uid = request.get("uid")
    if not isinstance(uid, str) or not uid:
        raise ReviewError("request.uid: required, a non-empty string")
    operation = request.get("operation")
    if operation not in OPERATIONS:
        raise ReviewError(f"request.operation: expected one of {', '.join(OPERATIONS)}")
    obj = _optional_object(request, "object")
    old = _optional_object(request, "oldObject")
    if operation in ("CREATE", "UPDATE") and obj is None:
        raise ReviewError(f"request.object: required for {operation}")
    if operation == "UPDATE" and old is None:
        raise ReviewError("request.oldObject: required for UPDATE")
    user = request.get("userInfo")
    return AdmissionRequest(
        uid=uid,
        kind=_gvk(request.get("kind")),
        operation=operation,
        namespace=_string(request, "namespace"),
        name=_string(request, "name"),
        object=obj,
        old_object=old,
        dry_run=request.get("dryRun") is True,
        user=str(user.get("username") or "") if isinstance(user, dict) else "",
        groups=_groups(user),
    )


def _groups(user: Any) -> tuple[str, ...]:
    found = user.get("groups") if isinstance(user, dict) else None
    return tuple(str(g) for g in found) if isinstance(found, list) else ()


def response(uid: str, verdict: Verdict, version: str | None) -> dict[str, Any]:
    """The AdmissionReview answering request ``uid``."""
    answer: dict[str, Any] = {"uid": uid, "allowed": verdict.allowed}
    if verdict.patch and verdict.allowed:
        answer["patchType"] = "JSONPatch"
        patch = json.dumps(list(verdict.patch), separators=(",", ":")).encode()
        answer["patch"] = base64.b64encode(patch).decode("ascii")
    if not verdict.allowed:
        answer["status"] = {
            "status": "Failure",
            "code": verdict.code,
            "reason": verdict.reason,
            "message": verdict.message,
        }
    if verdict.warnings:
        answer["warnings"] = list(verdict.warnings)
    audit = dict(verdict.audit)
    if version:
        audit[AUDIT_VERSION_KEY] = version
    if audit:
        answer["auditAnnotations"] = audit
    return {"apiVersion": API_VERSION, "kind": KIND, "response": answer}


Decide = Callable[[AdmissionRequest], Verdict]


@dataclass(frozen=True, slots=True)
class Answer:
    """What to send: an HTTP status and a JSON body, or a plain-text error."""

    status: int
    body: Mapping[str, Any] | None = None
    error: str = ""
    verdict: Verdict | None = None


def translate(body: bytes, decide: Decide, version: str | None) -> Answer:
    """Parse, decide, respond. ReviewError (from parsing or from ``decide``) → its status."""
    try:
        request = parse_review(body)
        verdict = decide(request)
    except ReviewError as err:
        return Answer(err.status, error=err.message)
    except RecursionError:  # converting a pathologically deep object for CEL
        return Answer(400, error="request.object is nested too deeply to evaluate")
    return Answer(200, response(request.uid, verdict, version), verdict=verdict)


def require_kind(
    request: AdmissionRequest, group: str, kinds: Sequence[str], endpoint: str
) -> None:
    """ReviewError unless the request is about one of ``kinds`` of API group ``group``."""
    if request.kind.group != group or request.kind.kind not in kinds:
        expected = " or ".join(f"{group} {kind}" for kind in kinds)
        raise ReviewError(
            f"{endpoint} admits {expected}; got {request.kind} (check the rules of the "
            "webhook configuration)"
        )


# -- envelope parsing ---------------------------------------------------------------------------


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _load_json(body: bytes) -> Any:
    if not body:
        raise ReviewError("request body is empty; expected an AdmissionReview (JSON)")
    try:
        return json.loads(body, parse_constant=_reject_constant)
    except RecursionError:
        raise ReviewError("request body is not an AdmissionReview: nested too deeply") from None
    except ValueError as err:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise ReviewError(f"request body is not JSON: {err}") from None


def _optional_object(request: Mapping[str, Any], key: str) -> Mapping[str, Any] | None:
    value = request.get(key)
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ReviewError(f"request.{key}: expected an object, got {_type(value)}")
    return value


def _gvk(raw: Any) -> GroupVersionKind:
    if not isinstance(raw, dict):
        raise ReviewError("request.kind: required, an object with group, version and kind")
    group, version, kind = raw.get("group", ""), raw.get("version"), raw.get("kind")
    if not isinstance(group, str) or not isinstance(version, str) or not isinstance(kind, str):
        raise ReviewError("request.kind: group, version and kind must be strings")
    if not version or not kind:
        raise ReviewError("request.kind: version and kind are required")
    return GroupVersionKind(group, version, kind)


def _string(request: Mapping[str, Any], key: str) -> str:
    value = request.get(key, "")
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ReviewError(f"request.{key}: expected a string, got {_type(value)}")
    return value


def _type(value: Any) -> str:
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}
    if value is None:
        return "null"
    if isinstance(value, int | float) and not isinstance(value, bool):
        return "a number"
    return names.get(type(value), type(value).__name__)


def object_error(path: str, message: str) -> ReviewError:
    """A ReviewError for a field of ``request.object``."""
    return ReviewError(f"request.object.{path}: {message}")


def expect_type(value: Any, kind: type, path: str, what: str) -> Any:
    """``value`` when it is an instance of ``kind``; else a ReviewError naming ``path``."""
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise object_error(path, f"expected {what}, got {_type(value)}")
    return value
