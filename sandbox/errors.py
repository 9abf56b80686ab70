"""API errors as ``metav1.Status`` values, the shape every Kubernetes client decodes.

One exception, :class:`StatusError`, carries a Status dict; the in-process API raises it and the
HTTP layer writes it with its ``code``. The constructors below mirror apimachinery's
``k8s.io/apimachinery/pkg/api/errors`` (``NewNotFound``, ``NewConflict``, …): same reasons,
codes and message wording, so client code written against the sandbox reads real errors too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


class SandboxError(Exception):
    """Root of the sandbox's errors."""


class StatusError(SandboxError):
    """An API error: ``status`` is the ``metav1.Status`` the server answers with."""

    def __init__(self, status: dict[str, Any]) -> None:
        super().__init__(status.get("message", ""))
        self.status = status

    @property
    def code(self) -> int:
        return int(self.status["code"])

    @property
    def reason(self) -> str:
        return str(self.status.get("reason", ""))


def status(
    code: int,
    reason: str,
    message: str,
    details: dict[str, Any] | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details:
        body["details"] = details
    return body


def success_status(details: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}}
    body["status"] = "Success"
    if details:
        body["details"] = details
    return body


def _qualified(group: str, plural: str) -> str:
    return f"{plural}.{group}" if group else plural


def _object_error(
    code: int, reason: str, group: str, plural: str, name: str, message: str, **extra: Any
) -> StatusError:
    """A Status about one named object: details carry its name, group and kind."""
    details = {"name": name, "group": group, "kind": plural, **extra}
    return StatusError(status(code, reason, message, details))


def not_found(group: str, plural: str, name: str) -> StatusError:
    message = f'{_qualified(group, plural)} "{name}" not found'
    return _object_error(404, "NotFound", group, plural, name, message)


def already_exists(group: str, plural: str, name: str) -> StatusError:
    message = f'{_qualified(group, plural)} "{name}" already exists'
    return _object_error(409, "AlreadyExists", group, plural, name, message)


def conflict(group: str, plural: str, name: str, why: str) -> StatusError:
    resource = _qualified(group, plural)
    message = f'Operation cannot be fulfilled on {resource} "{name}": {why}'
    return _object_error(409, "Conflict", group, plural, name, message)


def stale_object(group: str, plural: str, name: str) -> StatusError:
    why = (
        "the object has been modified; "
        "please apply your changes to the latest version and try again"
    )
    return conflict(group, plural, name, why)


def invalid(
    group: str,
    kind: str,
    name: str,
    causes: Sequence[tuple[str, str, str]],
) -> StatusError:
    """422 Invalid; ``causes`` are (field, reason, message), reasons as ``metav1.CauseType``."""
    joined = ", ".join(f"{field}: {message}" for field, _, message in causes)
    if len(causes) > 1:
        joined = f"[{joined}]"
    message = f'{_qualified(group, kind)} "{name}" is invalid: {joined}'
    reasons = [
        {"reason": reason, "message": message, "field": field} for field, reason, message in causes
    ]
    return _object_error(422, "Invalid", group, kind, name, message, causes=reasons)


def bad_request(message: str) -> StatusError:
    return StatusError(status(400, "BadRequest", message))


def gone(message: str) -> StatusError:
    return StatusError(status(410, "Expired", message))


def too_large_resource_version(minimum: int, current: int, retry_seconds: int = 1) -> StatusError:
    """504 Timeout with cause ResourceVersionTooLarge: a read "not older than" a version the
    server has not reached (k8s.io/apiserver/pkg/storage ``NewTooLargeResourceVersionError``,
    which the watch cache returns after its blockTimeout, asking to retry after 1 s)."""
    message = f"Timeout: Too large resource version: {minimum}, current: {current}"
    cause = {"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}
    details = {"causes": [cause], "retryAfterSeconds": retry_seconds}
    return StatusError(status(504, "Timeout", message, details))


def method_not_allowed(method: str, what: str) -> StatusError:
    return StatusError(
        status(405, "MethodNotAllowed", f"the server does not allow this method on {what}")
        | {"details": {"causes": [{"message": f"method {method} not allowed"}]}}
    )


def unsupported_media_type(content_type: str, accepted: Sequence[str]) -> StatusError:
    message = (
        f"the body of the request was in an unknown format - accepted media types include: "
        f"{', '.join(accepted)}"
    )
    if content_type:
        message = f"{content_type}: {message}"
    return StatusError(status(415, "UnsupportedMediaType", message))


def forbidden(group: str, plural: str, name: str, why: str) -> StatusError:
    message = f'{_qualified(group, plural)} "{name}" is forbidden: {why}'
    return _object_error(403, "Forbidden", group, plural, name, message)


def not_found_path() -> StatusError:
    return StatusError(status(404, "NotFound", "the server could not find the requested resource"))


def internal(message: str) -> StatusError:
    return StatusError(status(500, "InternalError", f"Internal error occurred: {message}"))
