"""Writes: create, update (PUT), the status subresource and patch, with admission.

A write reads the current object under the store's lock, computes the new object and runs
admission and schema validation outside it, then commits only if the object did not change
meanwhile (otherwise it recomputes: a stale precondition then fails with 409, an unconditional
write or a patch is re-applied, as kube-apiserver retries). Built on :mod:`sandbox.deletion`:
an update that takes the last finalizer off an object being deleted removes it.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from typing import Any

from sandbox import deadline, errors, meta, secrets
from sandbox.admission import CREATE, UPDATE
from sandbox.deletion import Deletions
from sandbox.jsoncopy import copy_json
from sandbox.patch import MERGE, apply_patch
from sandbox.resources import Resource, ResourceType
from sandbox.watch import ADDED, MODIFIED

_MAX_RETRIES = 16
_NAMESPACE_MISMATCH = (
    "the namespace of the provided object does not match the namespace sent on the request"
)


class Writes(Deletions):
    """The store's creates, updates, status updates and patches."""

    # -- writes ------------------------------------------------------------------------------

    def create(
        self,
        resource: Resource,
        obj: Mapping[str, Any],
        *,
        namespace: str | None = None,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        rt = self.resource(resource)
        new = self._typed(rt, obj)
        metadata = new.setdefault("metadata", {})
        scope = self._scope(rt, namespace if namespace is not None else metadata.get("namespace"))
        if rt.namespaced:
            if metadata.get("namespace", scope) != scope:
                raise errors.bad_request(_NAMESPACE_MISMATCH)
            metadata["namespace"] = scope
            with self._lock:
                self._check_namespace(rt, scope, metadata.get("name") or "")
        sent_version = new["apiVersion"]
        new = self._mutate(CREATE, rt, "", scope, new, None, dry_run)
        self._before_create(rt, new)
        self._check_schema(rt, new, sent_version)
        self._validate(CREATE, rt, "", scope, new, None, dry_run)
        with self._lock:
            if rt.namespaced:
                self._check_namespace(rt, scope, new["metadata"]["name"])
            key = (scope, new["metadata"]["name"])
            if key in self._objects[rt.key]:
                raise errors.already_exists(rt.group, rt.plural, key[1])
            deadline.check()  # the request's deadline passed: nothing is stored (504)
            if dry_run:
                return self._out(rt, new, _version(sent_version))
            self._put(rt, new, ADDED, None)
            return self._out(rt, new, _version(sent_version))

    def update(
        self,
        resource: Resource,
        obj: Mapping[str, Any],
        *,
        namespace: str | None = None,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        """PUT: 409 when ``metadata.resourceVersion`` is stale. Custom resources require it."""
        return self._replace(self.resource(resource), obj, namespace, "", dry_run)

    def update_status(
        self,
        resource: Resource,
        obj: Mapping[str, Any],
        *,
        namespace: str | None = None,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        """PUT on the status subresource: only ``status`` changes; generation never."""
        return self._replace(self.resource(resource), obj, namespace, "status", dry_run)

    def patch(
        self,
        resource: Resource,
        name: str,
        patch: Any,
        *,
        namespace: str | None = None,
        content_type: str = MERGE,
        subresource: str = "",
        dry_run: bool = False,
        version: str | None = None,
    ) -> dict[str, Any]:
        """Merge patch (default), JSON patch (a list of operations) or, for built-in kinds,
        strategic merge patch applied as a merge patch. ``patch`` may be bytes or decoded JSON;
        a ``metadata.resourceVersion`` in it is a precondition (409 when stale)."""
        rt = self.resource(resource)
        scope = self._scope(rt, namespace)
        self._check_subresource(rt, subresource)

        def compute(current: Mapping[str, Any]) -> dict[str, Any]:
            patched = apply_patch(content_type, rt.built_in, self._out(rt, current, version), patch)
            wanted = (patched.get("metadata") or {}).get("resourceVersion")
            _check_precondition(rt, name, wanted, current)
            return patched

        return self._write(rt, scope, name, compute, subresource, dry_run, version)

    def _replace(
        self,
        rt: ResourceType,
        obj: Mapping[str, Any],
        namespace: str | None,
        subresource: str,
        dry_run: bool,
    ) -> dict[str, Any]:
        body = self._typed(rt, obj)
        metadata = body.get("metadata") or {}
        name = str(metadata.get("name") or "")
        scope = self._scope(rt, namespace if namespace is not None else metadata.get("namespace"))
        self._check_subresource(rt, subresource)
        if rt.namespaced and metadata.get("namespace", scope) != scope:
            raise errors.bad_request(_NAMESPACE_MISMATCH)
        wanted = str(metadata.get("resourceVersion") or "")
        if not wanted and not rt.built_in:
            raise errors.invalid(
                rt.group,
                rt.kind,
                name,
                [
                    (
                        "metadata.resourceVersion",
                        "FieldValueInvalid",
                        "Invalid value: 0x0: must be specified for an update",
                    )
                ],
            )

        def compute(current: Mapping[str, Any]) -> dict[str, Any]:
            _check_precondition(rt, name, wanted, current)
            return copy_json(body)

        return self._write(
            rt, scope, name, compute, subresource, dry_run, _version(body["apiVersion"])
        )

    def _write(
        self,
        rt: ResourceType,
        scope: str,
        name: str,
        compute: Callable[[Mapping[str, Any]], dict[str, Any]],
        subresource: str,
        dry_run: bool,
        version: str | None,
    ) -> dict[str, Any]:
        """Read, compute, admit outside the lock, then commit if nothing changed meanwhile."""
        for _ in range(_MAX_RETRIES):
            with self._lock:
                current = self._lookup(rt, scope, name)
            proposed = compute(current)
            sent_version = proposed.get("apiVersion") or rt.api_version(version)
            proposed = self._mutate(UPDATE, rt, subresource, scope, proposed, current, dry_run)
            new = self._prepare_update(rt, current, proposed, subresource)
            self._check_schema(rt, new, sent_version, current)
            self._validate(UPDATE, rt, subresource, scope, new, current, dry_run)
            with self._lock:
                latest = self._objects[rt.key].get((scope, name))
                if latest is not current:
                    if latest is None:
                        raise errors.not_found(rt.group, rt.plural, name)
                    continue  # written meanwhile: recompute (a stale precondition now fails)
                deadline.check()  # the request's deadline passed: nothing is stored (504)
                if dry_run or new == current:
                    return self._out(rt, new, version)
                if new["metadata"].get("deletionTimestamp") and not new["metadata"].get(
                    "finalizers"
                ):
                    return self._out(rt, self._remove(rt, new), version)
                self._put(rt, new, MODIFIED, current)
                return self._out(rt, new, version)
        raise errors.conflict(rt.group, rt.plural, name, "too many concurrent writes; try again")

    def _check_schema(
        self,
        rt: ResourceType,
        new: dict[str, Any],
        sent: str,
        current: Mapping[str, Any] | None = None,
    ) -> None:
        """Validate ``new`` against the schema of the version sent, then store it as the
        storage version. An update in the storage version that changes nothing but
        ``metadata`` (labels, annotations, finalizers) is not validated again: what the schema
        constrains is as it was accepted (kube-apiserver's CRD validation ratcheting lets
        unchanged values through the same way), and re-validating every annotation patch was
        a tenth of the sandbox's CPU under load."""
        if (
            current is not None
            and sent == rt.storage_api_version
            and _same_but_metadata(new, current)
        ):
            new["apiVersion"] = rt.storage_api_version
            return
        new["apiVersion"] = sent
        self.schemas.validate(new, rt.group)
        new["apiVersion"] = rt.storage_api_version

    def _typed(self, rt: ResourceType, obj: Mapping[str, Any]) -> dict[str, Any]:
        """A copy of ``obj`` with apiVersion/kind checked against ``rt`` (filled when absent)."""
        new = copy_json(obj)
        api_version = new.setdefault("apiVersion", rt.storage_api_version)
        if api_version not in {rt.api_version(v) for v in rt.versions}:
            raise errors.bad_request(
                f"the API version in the data ({api_version}) does not match the expected "
                f"API version ({rt.storage_api_version})"
            )
        if new.setdefault("kind", rt.kind) != rt.kind:
            raise errors.bad_request(
                f"the kind in the data ({new['kind']}) does not match the expected kind ({rt.kind})"
            )
        if not isinstance(new.get("metadata", {}), dict):
            raise errors.bad_request("metadata must be an object")
        return new

    def _check_subresource(self, rt: ResourceType, subresource: str) -> None:
        if subresource not in ("", "status") or (
            subresource == "status" and not rt.status_subresource
        ):
            raise errors.not_found_path()

    def _before_create(self, rt: ResourceType, new: dict[str, Any]) -> None:
        """Server-side fields of a new object (kube-apiserver's BeforeCreate)."""
        metadata = new["metadata"]
        if not metadata.get("name"):
            if not metadata.get("generateName"):
                raise errors.invalid(
                    rt.group,
                    rt.kind,
                    "",
                    [
                        (
                            "metadata.name",
                            "FieldValueRequired",
                            "Required value: name or generateName is required",
                        )
                    ],
                )
            metadata["name"] = meta.generate_name(metadata["generateName"], self._rng)
        name = metadata["name"]
        if problem := meta.name_problem(rt, name):
            raise errors.invalid(
                rt.group,
                rt.kind,
                name,
                [("metadata.name", "FieldValueInvalid", f'Invalid value: "{name}": {problem}')],
            )
        for key in (*meta.SERVER_OWNED, "resourceVersion"):
            metadata.pop(key, None)
        metadata["uid"] = str(uuid.UUID(int=self._rng.getrandbits(128), version=4))
        metadata["creationTimestamp"] = meta.now_rfc3339(self._clock())
        metadata["generation"] = 1
        if rt.status_subresource:
            new.pop("status", None)
        if rt.kind == "Namespace":
            new["spec"] = {"finalizers": ["kubernetes"]}
            new["status"] = {"phase": "Active"}
        if rt.key == "secrets":
            secrets.prepare(new, None, self.service_account, self.ca_pem)

    def _prepare_update(
        self,
        rt: ResourceType,
        current: Mapping[str, Any],
        proposed: dict[str, Any],
        subresource: str,
    ) -> dict[str, Any]:
        new = copy_json(proposed)
        new["apiVersion"], new["kind"] = rt.storage_api_version, rt.kind
        meta.carry_server_fields(new, current)
        if rt.key == "secrets":
            secrets.prepare(new, current, self.service_account, self.ca_pem)
        if subresource == "status":
            status = new.get("status")
            new = copy_json(current)
            if status is None:
                new.pop("status", None)
            else:
                new["status"] = status
        elif rt.status_subresource:
            if "status" in current:
                new["status"] = copy_json(current["status"])
            else:
                new.pop("status", None)
        generation = int(current["metadata"].get("generation", 1))
        if meta.spec_part(new, rt.status_subresource) != meta.spec_part(
            current, rt.status_subresource
        ):
            generation += 1
        new["metadata"]["generation"] = generation
        new["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        return new

    def service_account(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        """The stored ServiceAccount (not a copy: do not change it), or None."""
        return self._objects["serviceaccounts"].get((namespace, name))

    def _check_namespace(self, rt: ResourceType, namespace: str, name: str) -> None:
        """404 when the namespace does not exist; 403 while it terminates."""
        found = self._objects["namespaces"].get(("", namespace))
        if found is None:
            raise errors.not_found("", "namespaces", namespace)
        if found["metadata"].get("deletionTimestamp"):
            why = (
                f"unable to create new content in namespace {namespace} "
                "because it is being terminated"
            )
            raise errors.forbidden(rt.group, rt.plural, name, why)


def _check_precondition(
    rt: ResourceType, name: str, wanted: str | None, current: Mapping[str, Any]
) -> None:
    """409 when the write names a ``resourceVersion`` other than the current one."""
    if wanted and wanted != current["metadata"]["resourceVersion"]:
        raise errors.stale_object(rt.group, rt.plural, name)


def _version(api_version: str) -> str:
    return api_version.rpartition("/")[2]


def _same_but_metadata(new: Mapping[str, Any], current: Mapping[str, Any]) -> bool:
    if new.keys() != current.keys():
        return False
    return all(new[k] == current[k] for k in new if k != "metadata")
