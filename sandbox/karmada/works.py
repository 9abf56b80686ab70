"""The binding controller: one Work per target cluster of each binding, and cleanup.

For a binding with ``spec.clusters`` it keeps, in each cluster's execution namespace
``karmada-es-<cluster>`` (created when missing), a Work named ``names.work_name`` whose
``spec.workload.manifests`` hold the template as Karmada propagates it (server fields and status
dropped; the per-cluster replicas of a divisible kind written in), labelled with the binding's
permanent id. A cluster leaving ``spec.clusters`` loses its Work; a binding being deleted loses
all of them, then its ``karmada.io/binding-controller`` finalizer.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from engine.fleet.detector import FINALIZERS
from sandbox.errors import StatusError
from sandbox.jsoncopy import copy_json
from sandbox.karmada.common import deleting, get_or_none, meta, with_retry
from sandbox.karmada.names import (
    BINDING_NAME,
    BINDING_NAMESPACE,
    BINDING_PERMANENT_ID,
    CLUSTER_BINDING_NAME,
    CLUSTER_BINDING_PERMANENT_ID,
    EXECUTION_SPACE_PREFIX,
    MANAGED_BY,
    TEMPLATE_UID,
    WORK_NAME,
    WORK_NAMESPACE,
    execution_namespace,
    work_name,
)
from sandbox.store import Store

RB = "resourcebindings.work.karmada.io"
CRB = "clusterresourcebindings.work.karmada.io"
WORKS = "works.work.karmada.io"
NAMESPACES = "namespaces"
WORK_API_VERSION = "work.karmada.io/v1alpha1"
# where a divisible kind's per-cluster replicas go (Karmada's ReviseReplica)
REPLICA_FIELDS = {
    "Deployment": "replicas",
    "ReplicaSet": "replicas",
    "StatefulSet": "replicas",
    "Job": "parallelism",
}
SERVER_FIELDS = (
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "ownerReferences",
    "finalizers",
    "selfLink",
)


def binding_id(binding: Mapping[str, Any]) -> tuple[str, str]:
    """(label key, value) that ties Works to ``binding``: its permanent id (set by the
    detector, as karmada-webhook does), else its uid for a binding made by hand."""
    key = (
        BINDING_PERMANENT_ID
        if binding.get("kind") != "ClusterResourceBinding"
        else CLUSTER_BINDING_PERMANENT_ID
    )
    m = meta(binding)
    return key, str((m.get("labels") or {}).get(key) or m.get("uid", ""))


WorkIndex = dict[tuple[str, str], list[dict[str, Any]]]


def works_index(store: Store) -> WorkIndex:
    """Every Work in an execution namespace by its binding's (label key, id): one list a pass."""
    index: WorkIndex = {}
    for work in store.list(WORKS)["items"]:
        m = meta(work)
        if not str(m.get("namespace", "")).startswith(EXECUTION_SPACE_PREFIX):
            continue
        labels = m.get("labels") or {}
        for key in (BINDING_PERMANENT_ID, CLUSTER_BINDING_PERMANENT_ID):
            if labels.get(key):
                index.setdefault((key, labels[key]), []).append(work)
    return index


def works_of(index: WorkIndex, binding: Mapping[str, Any]) -> list[dict[str, Any]]:
    return index.get(binding_id(binding), [])


def cluster_of(work: Mapping[str, Any]) -> str:
    return str(meta(work).get("namespace", ""))[len(EXECUTION_SPACE_PREFIX) :]


WorksLookup = Callable[[Mapping[str, Any]], list[dict[str, Any]]]
BindingReconcile = Callable[[str, dict[str, Any], list[dict[str, Any]]], None]


def reconcile_binding_keys(
    store: Store,
    keys: Sequence[tuple[str, str, str]],
    lookup: WorksLookup,
    reconcile: BindingReconcile,
) -> None:
    """``reconcile(resource, binding, works)`` for these bindings (resource key, namespace,
    name) that still exist, each retried on conflict."""
    for resource, namespace, name in keys:
        binding = get_or_none(store, resource, name, namespace or None)
        if binding is not None:
            with_retry(store, resource, binding, lambda b, r=resource: reconcile(r, b, lookup(b)))


def reconcile_all_bindings(store: Store, reconcile: BindingReconcile) -> None:
    """``reconcile(resource, binding, works)`` for every (Cluster)ResourceBinding, its Works
    from one index of every Work, each retried on conflict."""
    index = works_index(store)
    for resource in (RB, CRB):
        for binding in store.list(resource)["items"]:
            works = works_of(index, binding)
            with_retry(store, resource, binding, lambda b, r=resource, w=works: reconcile(r, b, w))


class BindingController:
    def __init__(self, store: Store, lookup: WorksLookup | None = None) -> None:
        self.store = store
        # a binding's Works: from the controllers' index, else a list of every Work
        self.lookup = lookup or (lambda b: works_of(works_index(self.store), b))

    def run_keys(self, keys: Sequence[tuple[str, str, str]]) -> None:
        """Only these bindings (resource key, namespace, name)."""
        reconcile_binding_keys(self.store, keys, self.lookup, self.reconcile)

    def run(self) -> None:
        reconcile_all_bindings(self.store, self.reconcile)

    def reconcile(
        self, resource: str, binding: dict[str, Any], works: list[dict[str, Any]]
    ) -> None:
        existing = {cluster_of(w): w for w in works}
        targets = {} if deleting(binding) else _targets(binding)
        template = self._template(binding) if targets else None
        for cluster, work in sorted(existing.items()):
            if cluster not in targets or template is None:
                self._delete(work)
        if template is not None:
            for cluster, replicas in sorted(targets.items()):
                self._ensure(binding, template, cluster, replicas, existing.get(cluster))
        if deleting(binding):
            self._release(resource, binding)

    def _template(self, binding: Mapping[str, Any]) -> dict[str, Any] | None:
        ref = (binding.get("spec") or {}).get("resource") or {}
        rt = self.store.registry.for_kind(str(ref.get("apiVersion", "")), str(ref.get("kind", "")))
        if rt is None:
            return None
        version = str(ref["apiVersion"]).rpartition("/")[2]
        try:
            template = self.store.get(
                rt,
                str(ref.get("name", "")),
                namespace=ref.get("namespace") or None,
                version=version,
            )
        except StatusError as error:
            if error.code in (400, 404):
                return None
            raise
        return None if deleting(template) else template

    def _ensure(
        self,
        binding: Mapping[str, Any],
        template: Mapping[str, Any],
        cluster: str,
        replicas: int,
        existing: dict[str, Any] | None,
    ) -> None:
        namespace = execution_namespace(cluster)
        if get_or_none(self.store, NAMESPACES, namespace) is None:
            try:
                self.store.create(NAMESPACES, {"metadata": {"name": namespace}})
            except StatusError as error:
                if error.code != 409:
                    raise
        desired = _work(binding, template, namespace, replicas)
        if existing is None:
            try:
                self.store.create(WORKS, desired)
            except StatusError as error:
                if error.code != 409:
                    raise
            return
        updated = copy_json(existing)
        updated["metadata"]["labels"] = {
            **(existing["metadata"].get("labels") or {}),
            **desired["metadata"]["labels"],
        }
        updated["metadata"]["annotations"] = {
            **(existing["metadata"].get("annotations") or {}),
            **desired["metadata"]["annotations"],
        }
        updated["spec"] = desired["spec"]
        if updated != existing:
            self.store.update(WORKS, updated)

    def _delete(self, work: Mapping[str, Any]) -> None:
        m = meta(work)
        try:
            self.store.delete(WORKS, m["name"], namespace=m["namespace"])
        except StatusError as error:
            if error.code != 404:
                raise

    def _release(self, resource: str, binding: dict[str, Any]) -> None:
        if self.lookup(binding):
            return  # Works with finalizers of their own are still going
        finalizer = FINALIZERS[str(binding.get("kind"))]
        finalizers = binding["metadata"].get("finalizers") or []
        if finalizer in finalizers:
            binding["metadata"]["finalizers"] = [f for f in finalizers if f != finalizer]
            self.store.update(resource, binding)


def _targets(binding: Mapping[str, Any]) -> dict[str, int]:
    targets: dict[str, int] = {}
    for item in (binding.get("spec") or {}).get("clusters") or []:
        if isinstance(item, Mapping) and item.get("name"):
            targets[str(item["name"])] = int(item.get("replicas") or 0)
    return targets


def _work(
    binding: Mapping[str, Any], template: Mapping[str, Any], namespace: str, replicas: int
) -> dict[str, Any]:
    tm = meta(template)
    name = work_name(str(template["kind"]), str(tm["name"]), str(tm.get("namespace") or ""))
    manifest = copy_json(template)
    manifest.pop("status", None)
    mm = manifest["metadata"]
    for field in SERVER_FIELDS:
        mm.pop(field, None)
    mm["annotations"] = {
        **(mm.get("annotations") or {}),
        TEMPLATE_UID: str(tm.get("uid", "")),
        WORK_NAME: name,
        WORK_NAMESPACE: namespace,
    }
    replica_field = REPLICA_FIELDS.get(str(template["kind"]))
    if replica_field and replicas and "replicas" in (binding.get("spec") or {}):
        manifest.setdefault("spec", {})[replica_field] = replicas
    key, value = binding_id(binding)
    bm = meta(binding)
    if binding.get("kind") == "ClusterResourceBinding":
        annotations = {CLUSTER_BINDING_NAME: str(bm["name"])}
    else:
        annotations = {
            BINDING_NAME: str(bm["name"]),
            BINDING_NAMESPACE: str(bm.get("namespace", "")),
        }
    spec: dict[str, Any] = {"workload": {"manifests": [manifest]}}
    if (binding.get("spec") or {}).get("preserveResourcesOnDeletion"):
        spec["preserveResourcesOnDeletion"] = True
    return {
        "apiVersion": WORK_API_VERSION,
        "kind": "Work",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {key: value, MANAGED_BY: "true"},
            "annotations": annotations,
        },
        "spec": spec,
    }
