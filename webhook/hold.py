"""The mutating webhook applied offline: a new binding as ``/mutate/resourcebindings`` leaves it.

``dry-run --job`` (and the sandbox) create bindings without an API server in front; this runs the
webhook's own decision (``mutate_binding`` on a CREATE request, the scope expression included)
and applies its JSON patch, so a synthesised binding is held exactly as a real one would be.
"""

from __future__ import annotations

import copy
import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

from engine import annotations as ann
from engine.fleet.submit import Held
from engine.policy.policyset import PolicySet
from webhook.mutate import GROUP, mutate_binding
from webhook.review import AdmissionRequest, GroupVersionKind, ReviewError


def hold(binding: Mapping[str, Any], policies: PolicySet, now: dt.datetime) -> Held:
    """``binding`` after the webhook admitted its CREATE; ``managed`` when the webhook held it."""
    meta = binding.get("metadata") or {}
    version = str(binding.get("apiVersion", "")).rpartition("/")[2]
    request = AdmissionRequest(
        uid="dry-run",
        kind=GroupVersionKind(GROUP, version, str(binding.get("kind", ""))),
        operation="CREATE",
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        object=binding,
        old_object=None,
        dry_run=True,
    )
    verdict = mutate_binding(request, policies, now)
    held = apply_patch(binding, verdict.patch)
    labels = (held.get("metadata") or {}).get("labels") or {}
    return Held(held, managed=labels.get(ann.MANAGED) == "true", warnings=verdict.warnings)


def apply_patch(obj: Mapping[str, Any], patch: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A copy of ``obj`` with the RFC 6902 ``add`` operations the webhook emits applied."""
    result = copy.deepcopy(dict(obj))
    for op in patch:
        if op.get("op") != "add":
            raise ReviewError(f"offline patch supports only 'add', got {op.get('op')!r}")
        *parents, last = [_unescape(token) for token in str(op["path"]).split("/")[1:]]
        target: Any = result
        for token in parents:
            target = target[token]
        target[last] = copy.deepcopy(op["value"])
    return result


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")
