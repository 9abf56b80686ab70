"""Deletion: finalizers, ``propagationPolicy`` and the garbage collector's cascade.

What the sandbox keeps from kube-apiserver and kube-controller-manager's garbage collector:

- An object with ``metadata.finalizers`` is not removed: it gets ``deletionTimestamp`` (and its
  generation is bumped) and stays until an update removes the last finalizer, which removes it.
- ``Background`` (the default): the object goes now; dependents (objects whose
  ``ownerReferences`` name its uid) that have no other live owner are deleted after it.
- ``Foreground``: the owner gets the ``foregroundDeletion`` finalizer and stays, with a
  ``deletionTimestamp``, until its dependents are gone; then it goes.
- ``Orphan``: dependents lose their ownerReference to it, and stay.
- Deleting a Namespace marks it Terminating (new content is refused with 403 Forbidden), deletes
  everything in it, and removes it once it is empty.

Unlike the real garbage collector, which works asynchronously, the cascade runs inside the
delete call (deterministic for tests), and its own writes skip admission.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sandbox import deadline, errors, meta
from sandbox.admission import DELETE
from sandbox.jsoncopy import copy_json
from sandbox.resources import Resource, ResourceType
from sandbox.storecore import StoreCore
from sandbox.watch import DELETED, MODIFIED, WatchEvent

FOREGROUND = "foregroundDeletion"
POLICIES = ("Background", "Foreground", "Orphan")


class Deletions(StoreCore):
    """The store's deletes, and the garbage collector's cascade they start."""

    def delete(
        self,
        resource: Resource,
        name: str,
        *,
        namespace: str | None = None,
        propagation_policy: str | None = None,
        preconditions: Mapping[str, str] | None = None,
        dry_run: bool = False,
        version: str | None = None,
    ) -> dict[str, Any]:
        """Delete, or start deleting: returns the removed object, or the object as it stays
        (with ``deletionTimestamp``) while finalizers remain. ``preconditions`` may hold
        ``uid`` and ``resourceVersion`` (409 Conflict when they do not match)."""
        rt = self.resource(resource)
        scope = self._scope(rt, namespace)
        policy = propagation_policy or "Background"
        if policy not in POLICIES:
            raise errors.bad_request(
                f'propagationPolicy: Unsupported value: "{policy}": '
                f"supported values: {', '.join(POLICIES)}"
            )
        with self._lock:
            current = self._lookup(rt, scope, name)
            _check_preconditions(rt, current, preconditions or {})
        self._validate(DELETE, rt, "", scope, None, current, dry_run)
        with self._lock:
            current = self._lookup(rt, scope, name)
            _check_preconditions(rt, current, preconditions or {})
            deadline.check()  # the request's deadline passed: nothing is deleted (504)
            if dry_run:
                return self._out(rt, current, version)
            return self._out(rt, self._start_deletion(rt, current, policy), version)

    def delete_collection(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str = "",
        field_selector: str = "",
        propagation_policy: str | None = None,
        dry_run: bool = False,
        version: str | None = None,
    ) -> dict[str, Any]:
        """Delete every matching object; returns the ``<Kind>List`` of what was deleted."""
        rt = self.resource(resource)
        listed = self.list(
            rt, namespace=namespace, label_selector=label_selector, field_selector=field_selector
        )
        deleted = []
        for item in listed["items"]:
            item_meta = item["metadata"]
            try:
                deleted.append(
                    self.delete(
                        rt,
                        item_meta["name"],
                        namespace=item_meta.get("namespace"),
                        propagation_policy=propagation_policy,
                        dry_run=dry_run,
                        version=version,
                    )
                )
            except errors.StatusError as error:
                if error.code != 404:  # already gone: deleted by a cascade meanwhile
                    raise
        return {
            "apiVersion": rt.api_version(version),
            "kind": rt.list_kind,
            "metadata": {},
            "items": deleted,
        }

    # -- under the lock ----------------------------------------------------------------------

    def _start_deletion(self, rt: ResourceType, obj: dict[str, Any], policy: str) -> dict[str, Any]:
        uid = obj["metadata"]["uid"]
        if policy == "Orphan":
            self._orphan(uid)
        if rt.kind == "Namespace":
            return self._delete_namespace(obj)
        finalizers = list(obj["metadata"].get("finalizers") or [])
        dependents = self._live_dependents(uid)
        if policy == "Foreground" and dependents and FOREGROUND not in finalizers:
            finalizers.append(FOREGROUND)
        if not finalizers:
            return self._remove(rt, obj)
        new = copy_json(obj)
        new["metadata"]["finalizers"] = finalizers
        if not new["metadata"].get("deletionTimestamp"):
            new["metadata"]["deletionTimestamp"] = meta.now_rfc3339(self._clock())
            new["metadata"]["deletionGracePeriodSeconds"] = 0
            new["metadata"]["generation"] = int(obj["metadata"].get("generation", 1)) + 1
        if new != obj:
            self._put(rt, new, MODIFIED, obj)
        if FOREGROUND in finalizers:
            for dep_rt, dependent in dependents:
                self._start_deletion(dep_rt, dependent, "Foreground")
            self._finish_foreground(uid)
        located = self._by_uid.get(uid)
        return self._objects[rt.key][located[1]] if located else new

    def _remove(self, rt: ResourceType, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Remove ``obj`` now, emit DELETED, then cascade. Returns the final object."""
        metadata = obj["metadata"]
        key = (metadata.get("namespace", ""), metadata["name"])
        self._rv += 1
        final = copy_json(obj)
        final["metadata"]["resourceVersion"] = str(self._rv)
        del self._objects[rt.key][key]
        self._index(None, obj)
        self._emit(rt, WatchEvent(DELETED, final, self._rv, obj))
        uid = metadata["uid"]
        for dep_uid in sorted(self._dependents.pop(uid, set())):
            located = self._by_uid.get(dep_uid)
            if located is None:
                continue
            dep_rt, dep_key = located
            dependent = self._objects[dep_rt.key][dep_key]
            if not any(owner in self._by_uid for owner in meta.owner_uids(dependent)):
                self._start_deletion(dep_rt, dependent, "Background")
        for owner in meta.owner_uids(obj):
            self._finish_foreground(owner)
        if rt.namespaced:
            self._finish_namespace(key[0])
        return final

    def _live_dependents(self, uid: str) -> list[tuple[ResourceType, dict[str, Any]]]:
        found = []
        for dep_uid in sorted(self._dependents.get(uid, set())):
            if located := self._by_uid.get(dep_uid):
                dep_rt, dep_key = located
                found.append((dep_rt, self._objects[dep_rt.key][dep_key]))
        return found

    def _orphan(self, uid: str) -> None:
        for dep_rt, dependent in self._live_dependents(uid):
            new = copy_json(dependent)
            refs = [r for r in new["metadata"].get("ownerReferences") or [] if r.get("uid") != uid]
            if refs:
                new["metadata"]["ownerReferences"] = refs
            else:
                new["metadata"].pop("ownerReferences", None)
            self._put(dep_rt, new, MODIFIED, dependent)

    def _finish_foreground(self, owner_uid: str) -> None:
        located = self._by_uid.get(owner_uid)
        if located is None:
            return
        rt, key = located
        owner = self._objects[rt.key][key]
        finalizers = owner["metadata"].get("finalizers") or []
        if FOREGROUND not in finalizers or self._live_dependents(owner_uid):
            return
        remaining = [f for f in finalizers if f != FOREGROUND]
        if not remaining:
            self._remove(rt, owner)
            return
        new = copy_json(owner)
        new["metadata"]["finalizers"] = remaining
        self._put(rt, new, MODIFIED, owner)

    def _delete_namespace(self, namespace: dict[str, Any]) -> dict[str, Any]:
        rt = self.registry.by_key("namespaces")
        name = namespace["metadata"]["name"]
        current = namespace
        if not namespace["metadata"].get("deletionTimestamp"):
            current = copy_json(namespace)
            current["metadata"]["deletionTimestamp"] = meta.now_rfc3339(self._clock())
            current["status"] = {"phase": "Terminating"}
            self._put(rt, current, MODIFIED, namespace)
        for obj_rt, obj in list(self._objects_in(name)):
            if obj["metadata"]["uid"] in self._by_uid and not obj["metadata"].get(
                "deletionTimestamp"
            ):
                self._start_deletion(obj_rt, obj, "Background")
        self._finish_namespace(name)
        return self._objects[rt.key].get(("", name), current)

    def _finish_namespace(self, name: str) -> None:
        rt = self.registry.by_key("namespaces")
        namespace = self._objects[rt.key].get(("", name))
        if namespace is None or not namespace["metadata"].get("deletionTimestamp"):
            return
        if namespace["metadata"].get("finalizers") or next(self._objects_in(name), None):
            return
        self._remove(rt, namespace)


def _check_preconditions(
    rt: ResourceType, obj: Mapping[str, Any], preconditions: Mapping[str, str]
) -> None:
    name = obj["metadata"]["name"]
    for field in ("uid", "resourceVersion"):
        wanted = preconditions.get(field)
        if wanted and wanted != obj["metadata"].get(field):
            label = "UID" if field == "uid" else "ResourceVersion"
            actual = obj["metadata"].get(field)
            why = (
                f"Precondition failed: {label} in precondition: {wanted}, "
                f"{label} in object meta: {actual}"
            )
            raise errors.conflict(rt.group, rt.plural, name, why)
