"""One admission webhook call over HTTP(S): the AdmissionReview out, its response back.

Like kube-apiserver's webhook client: ``POST <url>?timeout=<N>s`` with a JSON AdmissionReview,
TLS verified against the configuration's ``caBundle`` (the system CAs when it is empty) with a
real handshake and host name check, one deadline of ``timeoutSeconds`` for the whole call. Any
failure to get a well-formed answer is a :class:`CallError` whose text reads like the real
server's (``Post "https://…": context deadline exceeded``); the caller applies failurePolicy.
"""

from __future__ import annotations

import base64
import http.client
import json
import ssl
import threading
import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

REVIEW_VERSION = "admission.k8s.io/v1"


class CallError(Exception):
    """The webhook could not be called, or answered something that is not a review."""


class TLSContexts:
    """Client TLS contexts by caBundle, built once each (loading a CA costs a few ms)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._contexts: dict[str, ssl.SSLContext] = {}

    def get(self, ca_bundle: str) -> ssl.SSLContext:
        with self._lock:
            context = self._contexts.get(ca_bundle)
            if context is None:
                context = self._build(ca_bundle)
                self._contexts[ca_bundle] = context
            return context

    @staticmethod
    def _build(ca_bundle: str) -> ssl.SSLContext:
        if not ca_bundle:
            return ssl.create_default_context()
        try:
            pem = base64.b64decode(ca_bundle, validate=True).decode()
            context = ssl.create_default_context(cadata=pem)
        except (ValueError, ssl.SSLError) as error:
            raise CallError(f"invalid caBundle: {error}") from error
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        return context


def with_timeout(url: str, seconds: float) -> str:
    """The URL kube-apiserver posts to: the configured one plus ``timeout=<N>s``."""
    parts = urlsplit(url)
    extra = f"timeout={int(seconds)}s"
    query = f"{parts.query}&{extra}" if parts.query else extra
    return urlunsplit((parts.scheme, parts.netloc, parts.path, query, ""))


def post_review(
    url: str,
    review: Mapping[str, Any],
    timeout: float,
    contexts: TLSContexts,
    ca_bundle: str,
) -> dict[str, Any]:
    """POST ``review`` to ``url`` (already carrying ``?timeout=``); the decoded response."""
    parts = urlsplit(url)
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise CallError(f'Post "{url}": unsupported URL')
    deadline = time.monotonic() + timeout
    data = json.dumps(review, separators=(",", ":")).encode()
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    connection: http.client.HTTPConnection
    if parts.scheme == "https":
        connection = http.client.HTTPSConnection(
            parts.hostname, parts.port or 443, timeout=timeout, context=contexts.get(ca_bundle)
        )
    else:
        connection = http.client.HTTPConnection(parts.hostname, parts.port or 80, timeout=timeout)
    try:
        connection.request(
            "POST",
            path,
            body=data,
            headers={"Content-Type": "application/json", "Accept": "application/json"},
        )
        if connection.sock is not None:  # the rest of the deadline for the answer
            connection.sock.settimeout(max(0.001, deadline - time.monotonic()))
        reply = connection.getresponse()
        body = reply.read()
    except TimeoutError as error:
        raise CallError(f'Post "{url}": context deadline exceeded') from error
    except ssl.SSLCertVerificationError as error:
        raise CallError(f'Post "{url}": tls: failed to verify certificate: {error}') from error
    except (OSError, http.client.HTTPException) as error:
        raise CallError(f'Post "{url}": {error}') from error
    finally:
        connection.close()
    if time.monotonic() > deadline:
        raise CallError(f'Post "{url}": context deadline exceeded')
    if reply.status != 200:
        raise CallError(f"expected response code 200, got {reply.status}: {body[:200]!r}")
    try:
        answer = json.loads(body)
    except ValueError as error:
        raise CallError(f"received invalid webhook response: {error}") from error
    return _checked(answer, review["request"]["uid"])


def _checked(answer: Any, uid: str) -> dict[str, Any]:
    if not isinstance(answer, dict) or not isinstance(answer.get("response"), dict):
        raise CallError("webhook response was absent")
    if answer.get("apiVersion") != REVIEW_VERSION or answer.get("kind") != "AdmissionReview":
        raise CallError(
            f"expected webhook response of {REVIEW_VERSION}, Kind=AdmissionReview, got "
            f"{answer.get('apiVersion')}, Kind={answer.get('kind')}"
        )
    response = answer["response"]
    if response.get("uid") != uid:
        raise CallError(f'expected response.uid="{uid}", got "{response.get("uid")}"')
    if not isinstance(response.get("allowed"), bool):
        raise CallError("webhook response has no boolean response.allowed")
    return response
