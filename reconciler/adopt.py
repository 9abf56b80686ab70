"""Adopt the placed bindings fleetgate's webhook never saw, on the next pass.

With the webhook down in a fail-open setup (``failurePolicy: Ignore``), the API server lets a
ResourceBinding through unheld and Karmada's scheduler places it: it has ``spec.clusters`` but
no ``fleetgate.io/managed`` label. The cycle reads only managed bindings, so its room would count
against no queue until someone updated it and the webhook adopted it then. Each pass therefore
looks, before its cycle, for cached bindings that are placed, unlabelled and carry no admission,
and asks the webhook's own decision on an UPDATE of each (``webhook.mutate.mutate_binding``:
the SchedulingPolicy's ``scope``, then what adopting writes: suspended, labelled managed,
``admitted-at`` when it was scheduled, ``admitted-to`` its clusters). When that decision is to
adopt, the pass writes it as a merge patch with the resourceVersion it read, and an ``Adopted``
Event; the cycle of the same pass reads the binding as the API server returned it, so the job
counts as admitted from that pass on. A binding out of scope is remembered (by its
resourceVersion and the policy version) and not asked about again until one of them changes.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from engine import annotations as ann
from engine.enforce import EventSpec
from engine.policy.policyset import PolicySet
from webhook.mutate import mutate_binding
from webhook.review import AdmissionRequest, GroupVersionKind, ReviewError

log = logging.getLogger("fleetgate.reconciler")

ADOPTED = "Adopted"  # what PassSummary.applied_to records for an adoption
GROUP, VERSION = "work.karmada.io", "v1alpha2"
KINDS = ("ResourceBinding", "ClusterResourceBinding")
MEMO_LIMIT = 100_000  # out-of-scope bindings remembered; when full, it starts again


@dataclass(frozen=True, slots=True)
class Adoption:
    """The merge patch that adopts one binding (with the resourceVersion it was decided on)."""

    binding: str  # namespace/name, or name for a ClusterResourceBinding
    patch: dict[str, Any]
    event: EventSpec


class Adopter:
    """Finds the bindings to adopt; remembers those the scope leaves out."""

    def __init__(self) -> None:
        self._out_of_scope: dict[str, tuple[str, str]] = {}  # ref → (resourceVersion, policy)

    def find(
        self, bindings: Iterable[Mapping[str, Any]], policies: PolicySet, now: dt.datetime
    ) -> list[Adoption]:
        found: list[Adoption] = []
        for obj in bindings:
            if not unadmitted_and_placed(obj):
                continue
            ref, seen = ref_of(obj), (_version(obj), policies.version)
            if self._out_of_scope.get(ref) == seen:
                continue
            adoption = adoption_of(obj, policies, now)
            if adoption is not None:
                found.append(adoption)
                continue
            if len(self._out_of_scope) >= MEMO_LIMIT:
                self._out_of_scope = {}
            self._out_of_scope[ref] = seen
        return found


def adoption_of(obj: Mapping[str, Any], policies: PolicySet, now: dt.datetime) -> Adoption | None:
    """The webhook's decision on an UPDATE of ``obj`` that changes nothing, when it adopts."""
    meta = obj.get("metadata") or {}
    request = AdmissionRequest(
        uid="",
        kind=GroupVersionKind(GROUP, VERSION, str(obj.get("kind") or KINDS[0])),
        operation="UPDATE",
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        object=obj,
        old_object=obj,
    )
    try:
        verdict = mutate_binding(request, policies, now)
    except ReviewError as error:  # a binding the webhook could not read: leave it as it is
        log.warning("%s: not adopted: %s", ref_of(obj), error)
        return None
    if verdict.audit.get("decision") != "adopted" or not verdict.patch:
        return None
    patch = merge_patch(verdict.patch)
    patch.setdefault("metadata", {})["resourceVersion"] = _version(obj)
    clusters = ", ".join(c.get("name", "") for c in (obj.get("spec") or {}).get("clusters") or [])
    message = (
        f"placed on {clusters} without fleetgate's admission (its webhook did not see it): "
        "adopted, and counted in its queue from now on"
    )
    return Adoption(ref_of(obj), patch, EventSpec("Normal", ADOPTED, message))


def merge_patch(operations: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The JSON merge patch doing what ``operations`` do: the webhook's ``add`` and ``replace``
    of object members (a whole map only where none was), never of array items."""
    patch: dict[str, Any] = {}
    for operation in operations:
        path = str(operation.get("path") or "")
        if operation.get("op") not in ("add", "replace") or not path.startswith("/"):
            raise ValueError(f"no merge patch for {operation!r}")
        tokens = [t.replace("~1", "/").replace("~0", "~") for t in path[1:].split("/")]
        target = patch
        for token in tokens[:-1]:
            target = target.setdefault(token, {})
            if not isinstance(target, dict):
                raise ValueError(f"no merge patch for {operation!r}")
        target[tokens[-1]] = operation.get("value")
    return patch


def unadmitted_and_placed(obj: Mapping[str, Any]) -> bool:
    meta = obj.get("metadata") or {}
    labels, notes = meta.get("labels") or {}, meta.get("annotations") or {}
    return (
        obj.get("kind", KINDS[0]) in KINDS
        and bool((obj.get("spec") or {}).get("clusters"))
        and labels.get(ann.MANAGED) != "true"
        and ann.ADMITTED_AT not in notes
    )


def ref_of(obj: Mapping[str, Any]) -> str:
    """A binding object's ref: namespace/name, or name for a ClusterResourceBinding."""
    meta = obj.get("metadata") or {}
    namespace, name = meta.get("namespace") or "", meta.get("name") or ""
    return f"{namespace}/{name}" if namespace else str(name)


def _version(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")
