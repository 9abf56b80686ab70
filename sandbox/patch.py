"""Patch bodies by content type: JSON merge patch (RFC 7386), JSON patch (RFC 6902, via the
``jsonpatch`` library) and strategic merge patch.

Strategic merge patch: the real API server accepts it only for compiled-in types and answers 415
for custom resources (``kubectl`` and the ``kubernetes`` client send merge patches to those). The
sandbox does the same, and applies a strategic merge patch to a built-in type as a JSON merge
patch: lists are replaced whole rather than merged by key, and ``$patch``/``$retainKeys``
directives are not understood. That is enough for the few built-in kinds served here
(ConfigMap, Namespace, Lease, Event, …), whose patches touch maps.
"""

from __future__ import annotations

import json
from typing import Any

import jsonpatch

from sandbox.errors import StatusError, bad_request, status, unsupported_media_type
from sandbox.jsoncopy import copy_json

MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
APPLY = "application/apply-patch+yaml"

CUSTOM_TYPES = (JSON_PATCH, MERGE)
BUILT_IN_TYPES = (JSON_PATCH, MERGE, STRATEGIC)


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: maps merge recursively, ``null`` deletes, everything else replaces."""
    if not isinstance(patch, dict):
        return copy_json(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def apply_patch(
    content_type: str, built_in: bool, current: dict[str, Any], body: bytes | Any
) -> dict[str, Any]:
    """``current`` patched by ``body`` (raw bytes or already-decoded JSON); raises StatusError."""
    media = content_type.split(";")[0].strip().lower()
    accepted = BUILT_IN_TYPES if built_in else CUSTOM_TYPES
    if media not in accepted:
        raise unsupported_media_type(media, accepted)
    document = _decode(body)
    if media == JSON_PATCH:
        if not isinstance(document, list):
            raise bad_request("json patch must be a JSON array of operations")
        try:
            patched = jsonpatch.JsonPatch(document).apply(current)
        except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as error:
            raise StatusError(
                status(
                    422,
                    "Invalid",
                    f"the server rejected our request due to an error in our request: {error}",
                )
            ) from error
    else:
        if not isinstance(document, dict):
            raise bad_request("merge patch must be a JSON object")
        patched = merge_patch(current, document)
    if not isinstance(patched, dict):
        raise bad_request("the patched object is not a JSON object")
    return patched


def _decode(body: bytes | Any) -> Any:
    if not isinstance(body, bytes | bytearray | str):
        return body
    try:
        return json.loads(body)
    except ValueError as error:
        raise bad_request(f"error decoding patch: {error}") from error
