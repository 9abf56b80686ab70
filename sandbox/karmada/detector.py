"""Karmada's resource detector over the store: claims templates, creates their bindings.

The rules are ``engine.fleet.detector`` (the same module ``fleetgate dry-run --job`` uses); this
module only reads the store and writes the difference. One pass, for every template of a kind
fleetgate reads (``engine.workloads.registry.known_kinds``) that the store serves:

1. give every (Cluster)PropagationPolicy its permanent-id label (karmada-webhook does that at
   admission; the sandbox's single admission slot belongs to fleetgate's webhook);
2. find the claiming policy; write its claim labels and annotations on the template (merge patch
   with the template's resourceVersion), or remove a stale claim;
3. create the binding through the store (so admission runs: fleetgate's webhook suspends it),
   with karmada-webhook's ``resourcebinding.karmada.io/permanent-id`` label; or update the fields
   Karmada's detector owns in an existing one (``ApplyPolicy``'s CreateOrUpdate mutate function),
   never ``spec.clusters`` nor ``spec.suspension.scheduling``.

A template's deletion deletes its binding through the ownerReference (the store's garbage
collector); the binding's finalizer keeps it until the binding controller has removed its Works.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from engine.fleet.detector import (
    CLAIMED_BY_LABEL,
    CPP_NAME_ANNOTATION,
    PP_NAME_ANNOTATION,
    PP_NAMESPACE_ANNOTATION,
    DetectorError,
    Policy,
    build_binding,
    find_policy,
)
from engine.fleet.propagation import PERMANENT_ID_LABELS
from engine.workloads.model import DemandError
from engine.workloads.registry import known_kinds
from sandbox.errors import StatusError
from sandbox.jsoncopy import copy_json
from sandbox.karmada.common import deleting, get_or_none, log, meta, with_retry
from sandbox.karmada.names import BINDING_PERMANENT_ID, CLUSTER_BINDING_PERMANENT_ID
from sandbox.resources import ResourceType
from sandbox.store import Store

PP = "propagationpolicies.policy.karmada.io"
CPP = "clusterpropagationpolicies.policy.karmada.io"
RB = "resourcebindings.work.karmada.io"
CRB = "clusterresourcebindings.work.karmada.io"
PRIORITY_CLASSES = "priorityclasses.scheduling.k8s.io"
CLAIM_LABELS = tuple(PERMANENT_ID_LABELS.values())
CLAIM_ANNOTATIONS = (PP_NAMESPACE_ANNOTATION, PP_NAME_ANNOTATION, CPP_NAME_ANNOTATION)
# spec fields the detector owns in an existing binding (ApplyPolicy's mutate function)
OWNED_SPEC = (
    "resource",
    "replicaRequirements",
    "replicas",
    "propagateDeps",
    "schedulerName",
    "placement",
    "failover",
    "conflictResolution",
    "preserveResourcesOnDeletion",
    "schedulePriority",
)


def template_types(store: Store) -> tuple[ResourceType, ...]:
    """The served types of every kind fleetgate reads, one per stored type."""
    found: dict[str, ResourceType] = {}
    for api_version, kind in known_kinds():
        rt = store.registry.for_kind(api_version, kind)
        if rt is not None:
            found.setdefault(rt.key, rt)
    return tuple(found[key] for key in sorted(found))


class Detector:
    def __init__(
        self,
        store: Store,
        skipped_namespaces: Sequence[str] = ("kube-.*",),
        new_id: Callable[[], str] = lambda: str(uuid.uuid4()),
        workers: int = 1,
    ) -> None:
        if workers < 1:
            raise ValueError(f"workers must be at least 1, got {workers}")
        self.store = store
        self.types = template_types(store)
        self.skipped_namespaces = tuple(skipped_namespaces)
        self.new_id = new_id
        self.workers = workers  # Karmada's --concurrent-resource-template-syncs (default 5)

    def run(self) -> None:
        policies = self._policies()
        classes = self._priority_classes()
        for rt in self.types:
            for template in self.store.list(rt)["items"]:
                with_retry(
                    self.store,
                    rt,
                    template,
                    lambda t, r=rt: self.reconcile(r, t, policies, classes),
                )

    def run_keys(self, keys: Sequence[tuple[str, str, str]]) -> None:
        """Reconcile only these templates (resource key, namespace, name)."""
        if not keys:
            return
        policies = self._policies()
        classes = self._priority_classes()

        def sync(key: tuple[str, str, str]) -> None:
            resource, namespace, name = key
            rt = self.store.resource(resource)
            template = get_or_none(self.store, rt, name, namespace or None)
            if template is not None:
                with_retry(
                    self.store,
                    rt,
                    template,
                    lambda t, r=rt: self.reconcile(r, t, policies, classes),
                )

        if self.workers == 1 or len(keys) == 1:
            for key in keys:
                sync(key)
            return
        # as Karmada's detector: up to ``workers`` templates at once, each key by one worker
        # (the keys are distinct); their admission calls overlap. Every key is tried; the first
        # error (in key order) is raised after all of them, as the serial loop fails the pass
        pending = iter(enumerate(keys))
        taking = threading.Lock()
        errors: list[tuple[int, Exception]] = []

        def work() -> None:
            while True:
                with taking:
                    taken = next(pending, None)
                if taken is None:
                    return
                try:
                    sync(taken[1])
                except Exception as error:  # noqa: BLE001 - kept, raised after the others
                    errors.append((taken[0], error))

        threads = [
            threading.Thread(target=work, name=f"karmada-detector-{i}", daemon=True)
            for i in range(min(self.workers, len(keys)))
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if errors:
            raise min(errors, key=lambda found: found[0])[1]

    def reconcile(
        self,
        rt: ResourceType,
        template: dict[str, Any],
        policies: Sequence[Policy],
        classes: Mapping[str, int],
    ) -> None:
        """One template, as listed (after a 409, as read again)."""
        m = meta(template)
        current = template
        if deleting(current):
            return
        claim = find_policy(current, policies, self.skipped_namespaces)
        if claim.policy is None:
            if not meta(current).get("labels", {}).get(CLAIMED_BY_LABEL):
                self._unclaim(rt, current)
            return
        current = self._claim(rt, current, claim.policy)
        try:
            desired = build_binding(current, claim.policy, classes)
        except DetectorError as error:
            log.info("detector: %s/%s: %s", m.get("namespace"), m["name"], error)
            return
        except DemandError as error:
            log.warning("detector: %s/%s is malformed: %s", m.get("namespace"), m["name"], error)
            return
        self._apply(desired, current)

    # -- policies ----------------------------------------------------------------------------

    def _policies(self) -> list[Policy]:
        policies = []
        for resource, kind in ((PP, "PropagationPolicy"), (CPP, "ClusterPropagationPolicy")):
            for obj in self.store.list(resource)["items"]:
                obj = self._with_permanent_id(resource, kind, obj)
                try:
                    policies.append(Policy.read(obj))
                except DemandError as error:
                    log.warning("detector: unreadable %s: %s", kind, error)
        return policies

    def _with_permanent_id(self, resource: str, kind: str, obj: dict[str, Any]) -> dict[str, Any]:
        label = PERMANENT_ID_LABELS[kind]
        m = meta(obj)
        if m.get("labels", {}).get(label) or deleting(obj):
            return obj
        patch = {
            "metadata": {"labels": {label: self.new_id()}, "resourceVersion": m["resourceVersion"]}
        }
        try:
            return self.store.patch(resource, m["name"], patch, namespace=m.get("namespace"))
        except StatusError as error:
            if error.code not in (404, 409):
                raise
            return obj  # read again on the next pass; read now without the label

    def _priority_classes(self) -> dict[str, int]:
        return {
            meta(pc)["name"]: int(pc.get("value") or 0)
            for pc in self.store.list(PRIORITY_CLASSES)["items"]
        }

    # -- the template's claim ----------------------------------------------------------------

    def _claim(self, rt: ResourceType, template: dict[str, Any], policy: Policy) -> dict[str, Any]:
        m = meta(template)
        labels = {PERMANENT_ID_LABELS[policy.view.kind]: policy.view.permanent_id}
        if policy.view.kind == "PropagationPolicy":
            annotations = {
                PP_NAMESPACE_ANNOTATION: policy.view.namespace,
                PP_NAME_ANNOTATION: policy.view.name,
            }
        else:
            annotations = {CPP_NAME_ANNOTATION: policy.view.name}
        wanted_labels = _changes(m.get("labels"), labels, CLAIM_LABELS)
        wanted_annotations = _changes(m.get("annotations"), annotations, CLAIM_ANNOTATIONS)
        if not wanted_labels and not wanted_annotations:
            return template
        patch: dict[str, Any] = {"metadata": {"resourceVersion": m["resourceVersion"]}}
        if wanted_labels:
            patch["metadata"]["labels"] = wanted_labels
        if wanted_annotations:
            patch["metadata"]["annotations"] = wanted_annotations
        return self.store.patch(rt, m["name"], patch, namespace=m.get("namespace"))

    def _unclaim(self, rt: ResourceType, template: dict[str, Any]) -> None:
        m = meta(template)
        labels = _changes(m.get("labels"), {}, CLAIM_LABELS)
        annotations = _changes(m.get("annotations"), {}, CLAIM_ANNOTATIONS)
        if not labels and not annotations:
            return
        patch = {
            "metadata": {
                "labels": labels,
                "annotations": annotations,
                "resourceVersion": m["resourceVersion"],
            }
        }
        self.store.patch(rt, m["name"], patch, namespace=m.get("namespace"))

    # -- the binding -------------------------------------------------------------------------

    def _apply(self, desired: dict[str, Any], template: Mapping[str, Any]) -> None:
        cluster_scoped = desired["kind"] == "ClusterResourceBinding"
        resource = CRB if cluster_scoped else RB
        m = desired["metadata"]
        existing = get_or_none(self.store, resource, m["name"], m.get("namespace"))
        if existing is None:
            label = CLUSTER_BINDING_PERMANENT_ID if cluster_scoped else BINDING_PERMANENT_ID
            m["labels"][label] = self.new_id()
            try:
                self.store.create(resource, desired)
            except StatusError as error:
                if error.code != 409:  # AlreadyExists: another pass made it; look again then
                    raise
            return
        owners = [o for o in meta(existing).get("ownerReferences") or [] if o.get("controller")]
        if owners and owners[0].get("uid") != meta(template).get("uid"):
            return  # an old template's binding: the garbage collector removes it first
        merged = _merged(existing, desired)
        if _differs(existing, merged):
            self.store.update(resource, merged)


def _changes(
    current: Mapping[str, str] | None, wanted: Mapping[str, str], owned: Sequence[str]
) -> dict[str, str | None]:
    """The merge patch that makes the ``owned`` keys of ``current`` equal ``wanted``."""
    current = current or {}
    patch: dict[str, str | None] = {k: v for k, v in wanted.items() if current.get(k) != v}
    patch |= {k: None for k in owned if k in current and k not in wanted}
    return patch


def _merged(existing: Mapping[str, Any], desired: Mapping[str, Any]) -> dict[str, Any]:
    merged = copy_json(existing)
    m, d = merged["metadata"], desired["metadata"]
    m["labels"] = {**(m.get("labels") or {}), **d.get("labels", {})}
    m["annotations"] = {**(m.get("annotations") or {}), **d.get("annotations", {})}
    m["finalizers"] = list(dict.fromkeys([*(m.get("finalizers") or []), *d.get("finalizers", [])]))
    m["ownerReferences"] = d["ownerReferences"]
    spec = merged.setdefault("spec", {})
    for field in OWNED_SPEC:
        if field in desired["spec"]:
            spec[field] = copy_json(desired["spec"][field])
        else:
            spec.pop(field, None)
    policy_suspension = desired["spec"].get("suspension")
    if policy_suspension is not None:
        kept = {k: v for k, v in (spec.get("suspension") or {}).items() if k == "scheduling"}
        spec["suspension"] = {**copy_json(policy_suspension), **kept}
    return merged


def _differs(existing: Mapping[str, Any], merged: Mapping[str, Any]) -> bool:
    """Whether anything but the template's resourceVersion changed: the detector ignores
    updates of a template's status and metadata (``eventfilter.SpecificationChanged``)."""

    def stripped(obj: Mapping[str, Any]) -> dict[str, Any]:
        out = copy_json(obj)
        out.get("spec", {}).get("resource", {}).pop("resourceVersion", None)
        return out

    return stripped(existing) != stripped(merged)
