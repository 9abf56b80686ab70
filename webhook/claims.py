"""fleetgate's own marks on a ResourceBinding are fleetgate's: written back when anyone else
changes them.

The label ``fleetgate.io/managed`` and fleetgate's annotations (admission, queue, backoff,
preemption count, group plan: ``engine.annotations``) are what the scheduling cycle believes.
Someone who may update bindings but is not fleetgate could otherwise mark a job admitted,
reset its preemption count past ``maxPerJob``, or take it out of fleetgate's hands. On an UPDATE
by a user who is neither one of fleetgate's (``writers``: its ServiceAccount by default) nor in
``system:masters`` (cluster administrators, who may do anything anyway), every change to those
keys is undone by the mutating webhook: the old value is put back (or the key removed again), with
a warning naming the keys. Two removals stay allowed, because docs/scheduling-cycle.md tells
operators to make them: ``fleetgate.io/gave-up`` and ``fleetgate.io/attempts`` (one more
attempt after giving up). A CREATE is ``webhook.mutate``'s: a new binding claims nothing.
"""

from __future__ import annotations

import copy
from collections.abc import Collection, Mapping
from typing import Any

from engine import annotations as ann
from engine import untrusted
from webhook import binding as rb
from webhook.review import AdmissionRequest

DEFAULT_WRITERS = frozenset({"system:serviceaccount:fleetgate-system:fleetgate-reconciler"})
MASTERS = "system:masters"

GUARDED = (
    ann.QUEUED_AT,
    ann.POLICY_VERSION,
    ann.ADMITTED_AT,
    ann.ADMITTED_TO,
    ann.READMIT,
    ann.BACKOFF_UNTIL,
    ann.ATTEMPTS,
    ann.EXCLUDED_CLUSTERS,
    ann.PREEMPTIONS,
    ann.GAVE_UP,
    ann.RUNNING_SINCE,
    ann.NOMINATED_CLUSTER,
    ann.PENDING,
    ann.QUEUE_POSITION,
    ann.ADMITTED_GROUP,
    ann.ADMITTED_GROUP_MIN,
    ann.GROUP_PLAN,
)
REMOVABLE = frozenset({ann.GAVE_UP, ann.ATTEMPTS})  # an operator's documented retry


def trusted(request: AdmissionRequest, writers: Collection[str]) -> bool:
    return request.user in writers or MASTERS in request.groups


def guard(
    request: AdmissionRequest, writers: Collection[str] = DEFAULT_WRITERS
) -> tuple[rb.Patch, Mapping[str, Any] | None, tuple[str, ...]]:
    """(the patch that undoes someone else's changes to fleetgate's marks, the binding as it is
    after that patch, the keys undone); an empty patch and None when there is nothing to undo."""
    obj, old = request.object, request.old_object
    if request.operation != "UPDATE" or obj is None or old is None or trusted(request, writers):
        return [], None, ()
    patch: rb.Patch = []
    restored = copy.deepcopy(dict(obj))
    meta = restored.setdefault("metadata", {})
    undone: list[str] = []
    for field, keys in (("labels", (ann.MANAGED,)), ("annotations", GUARDED)):
        now = (obj.get("metadata") or {}).get(field) or {}
        was = (old.get("metadata") or {}).get(field) or {}
        back = {
            k: was.get(k)
            for k in keys
            if now.get(k) != was.get(k) and not (k in REMOVABLE and k not in now)
        }
        if not back:
            continue
        undone += sorted(back)
        entries = {k: v for k, v in back.items() if v is not None}
        current = (obj.get("metadata") or {}).get(field)
        patch += rb.set_entries(current, field, entries)
        patch += [
            {"op": "remove", "path": f"/metadata/{field}/{rb.escape(k)}"}
            for k, v in sorted(back.items())
            if v is None
        ]
        merged = {k: v for k, v in {**now, **back}.items() if v is not None}
        meta[field] = merged
    if not patch:
        return [], None, ()
    return patch, restored, tuple(undone)


def warning(request: AdmissionRequest, undone: tuple[str, ...]) -> str:
    keys = ", ".join(undone)
    who = untrusted.echo(request.user or "an unnamed user", 63)
    return f"fleetgate wrote back {keys}: only fleetgate changes them, not {who}"
