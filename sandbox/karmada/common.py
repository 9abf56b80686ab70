"""Helpers every controller uses: reading without raising, conditions, conflict retries."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, TypeVar

from sandbox.errors import StatusError
from sandbox.meta import now_rfc3339
from sandbox.store import Resource, Store

log = logging.getLogger("sandbox.karmada")
T = TypeVar("T")
CONFLICT_RETRIES = 5


def get_or_none(
    store: Store, resource: Resource, name: str, namespace: str | None = None
) -> dict[str, Any] | None:
    try:
        return store.get(resource, name, namespace=namespace)
    except StatusError as error:
        if error.code == 404:
            return None
        raise


def on_conflict_retry(action: Callable[[], T]) -> T | None:
    """Run ``action`` (which re-reads what it writes) again after a 409; None once it gave up,
    or when what it writes is gone (404): the next pass looks again."""
    for _ in range(CONFLICT_RETRIES):
        try:
            return action()
        except StatusError as error:
            if error.code == 404:
                return None
            if error.code != 409:
                raise
    log.info("still conflicting after %d attempts; the next pass retries", CONFLICT_RETRIES)
    return None


def with_retry(
    store: Store,
    resource: Resource,
    obj: dict[str, Any],
    action: Callable[[dict[str, Any]], T],
) -> T | None:
    """``action(obj)``; after a 409, ``action`` again on the object read afresh. None when the
    object is gone, or still conflicting after a few attempts (the next pass looks again)."""
    m = meta(obj)
    current: dict[str, Any] | None = obj
    for _ in range(CONFLICT_RETRIES):
        if current is None:
            return None
        try:
            return action(current)
        except StatusError as error:
            if error.code == 404:
                return None
            if error.code != 409:
                raise
        current = get_or_none(store, resource, m["name"], m.get("namespace"))
    log.info("%s %s: still conflicting; the next pass retries", resource, m.get("name"))
    return None


def condition(
    existing: list[Any] | None,
    kind: str,
    status: str,
    reason: str,
    message: str,
    now: datetime,
) -> list[dict[str, Any]]:
    """``conditions`` with ``kind`` set; its lastTransitionTime moves only when status does
    (``meta.SetStatusCondition``)."""
    conditions = [dict(c) for c in existing or [] if isinstance(c, Mapping)]
    old = next((c for c in conditions if c.get("type") == kind), None)
    since = now_rfc3339(now)
    if old is not None and old.get("status") == status and old.get("lastTransitionTime"):
        since = old["lastTransitionTime"]
    new = {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": since,
    }
    if old is None:
        return [*conditions, new]
    return [new if c is old else c for c in conditions]


def condition_status(obj: Mapping[str, Any], kind: str) -> str:
    for item in (obj.get("status") or {}).get("conditions") or []:
        if isinstance(item, Mapping) and item.get("type") == kind:
            return str(item.get("status", ""))
    return ""


def meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    value = obj.get("metadata")
    return value if isinstance(value, Mapping) else {}


def deleting(obj: Mapping[str, Any]) -> bool:
    return bool(meta(obj).get("deletionTimestamp"))
