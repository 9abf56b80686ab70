"""Object metadata rules: names, ``generateName``, timestamps, generation.

Shared by the store's write paths. Pure functions over dicts; randomness and time are passed in.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from sandbox.jsoncopy import copy_json
from sandbox.resources import ResourceType

_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
# utilrand.String's alphabet: consonants and digits, no vowels (no accidental words), no 0/1/3.
_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"

# Fields a client may not change through an update; the server keeps its own values.
SERVER_OWNED = (
    "uid",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generation",
    "selfLink",
)


def now_rfc3339(now: datetime | None = None) -> str:
    moment = now or datetime.now(UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def name_problem(rt: ResourceType, name: str) -> str | None:
    """Why ``name`` is not a valid object name for ``rt``, or None (apimachinery's wording)."""
    if rt.kind == "Namespace":
        if len(name) > 63 or not _LABEL.match(name):
            return (
                "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or "
                "'-', and must start and end with an alphanumeric character"
            )
        return None
    if rt.group == "rbac.authorization.k8s.io":  # ValidateRBACName: a path segment name
        for bad in (".", ".."):
            if name == bad:
                return f"may not be '{bad}'"
        for bad in ("/", "%"):
            if bad in name:
                return f"may not contain '{bad}'"
        return None
    if len(name) > 253 or not _SUBDOMAIN.match(name):
        return (
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
            "'-' or '.', and must start and end with an alphanumeric character"
        )
    return None


def generate_name(prefix: str, rng: random.Random) -> str:
    """``generateName`` + 5 random characters, the prefix cut so the name fits 63 characters."""
    return prefix[: 63 - 5] + "".join(rng.choice(_ALPHABET) for _ in range(5))


def spec_part(obj: Mapping[str, Any], has_status: bool) -> dict[str, Any]:
    """What the generation tracks: everything but metadata (and status, with a subresource)."""
    skip = {"metadata", "apiVersion", "kind"} | ({"status"} if has_status else set())
    return {k: v for k, v in obj.items() if k not in skip}


def carry_server_fields(new: dict[str, Any], old: Mapping[str, Any]) -> None:
    """Keep the server-owned metadata of ``old`` on an updated ``new`` (in place)."""
    meta = new.setdefault("metadata", {})
    for key in SERVER_OWNED:
        if key in old["metadata"]:
            meta[key] = old["metadata"][key]
        else:
            meta.pop(key, None)
    for key in ("name", "namespace"):
        if key in old["metadata"]:
            meta[key] = old["metadata"][key]


def frozen_copy(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A private deep copy; stored objects are never mutated after they are stored."""
    return copy_json(obj)


def owner_uids(obj: Mapping[str, Any]) -> tuple[str, ...]:
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    return tuple(str(ref.get("uid", "")) for ref in refs if isinstance(ref, Mapping))
