"""Karmada's resource detector, pure: which policy claims a resource template, and its binding.

Follows karmada-io/karmada ``pkg/detector`` (v1.19 main, f8fdd02) for one reconcile of a new or
changed template, with the feature gates at their defaults. ``dry-run --job`` and the sandbox
both use it.

1. Templates Karmada never propagates are left alone: those in its reserved namespaces
   (``karmada-system``, ``karmada-cluster``, ``karmada-es-*``) or in a namespace matching
   ``--skipped-propagating-namespaces`` (default ``kube-.*``, anchored), and those labelled
   ``resourcetemplate.karmada.io/claimed-by`` (``EventFilter``, ``Reconcile``).
2. A template that already carries a policy's claim (its permanent-id label and name
   annotations) stays with that policy while the policy exists and still selects it; a claim
   on a policy that is gone is cleaned up and the template matched afresh (``propagateResource``
   steps 1–2, ``getAndApplyPolicy``).
3. Otherwise the PropagationPolicies of the template's namespace are tried, then, only when none
   matches, the ClusterPropagationPolicies; policies being deleted are skipped. Among matching
   policies of one kind: the highest ``spec.priority`` (default 0), then the most exact selector
   (name > label selector > apiVersion and kind only: ``util.ResourceMatchSelectorsPriority``),
   then the alphabetically first name (``compare.go``).
4. The binding is ``BuildResourceBinding`` / ``BuildClusterResourceBinding``: named
   lower(``<name>-<Kind>``) (``names.GenerateBindingName``, ``:`` → ``.``), owned by the template
   (controller, blockOwnerDeletion), with the policy's claim label and annotations, its
   placement and propagation fields copied, and the replicas Karmada's default interpreter reads
   (``engine.fleet.interpreter``).

Not modelled: policy preemption (runs when a policy changes, behind the PolicyPreemption alpha
gate), lazy activation, waiting for dependent overrides, workload affinity groups and components
(alpha gates), and what admission webhooks add afterwards (karmada-webhook's
``resourcebinding.karmada.io/permanent-id`` label, fleetgate's suspension).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from engine.fleet.interpreter import interpret_replicas
from engine.fleet.model import PropagationView, ResourceSelector
from engine.fleet.propagation import PERMANENT_ID_LABELS, read_policy
from engine.workloads.model import DemandError

BINDING_API_VERSION = "work.karmada.io/v1alpha2"
PP_NAMESPACE_ANNOTATION = "propagationpolicy.karmada.io/namespace"
PP_NAME_ANNOTATION = "propagationpolicy.karmada.io/name"
CPP_NAME_ANNOTATION = "clusterpropagationpolicy.karmada.io/name"
CLAIMED_BY_LABEL = "resourcetemplate.karmada.io/claimed-by"
FINALIZERS = {
    "ResourceBinding": "karmada.io/binding-controller",
    "ClusterResourceBinding": "karmada.io/cluster-resource-binding-controller",
}
DEFAULT_SKIPPED_NAMESPACES = ("kube-.*",)
# spec fields a binding copies from its policy when set (BuildResourceBinding).
COPIED_FIELDS = (
    "propagateDeps",
    "schedulerName",
    "failover",
    "conflictResolution",
    "preserveResourcesOnDeletion",
)


class Specificity(IntEnum):
    """``util.ImplicitPriority``: how exactly a policy's best resource selector names a template."""

    MISMATCH = 0
    KIND = 1
    LABEL_SELECTOR = 2
    NAME = 3


@dataclass(frozen=True, slots=True)
class Policy:
    """A (Cluster)PropagationPolicy: its view, and the raw spec a binding copies from."""

    view: PropagationView
    spec: Mapping[str, Any]
    deleting: bool = False

    @classmethod
    def read(cls, obj: Mapping[str, Any]) -> Policy:
        """Raises DemandError naming the field when ``obj`` is not a readable policy."""
        view = read_policy(obj)
        meta = obj.get("metadata")
        deleting = isinstance(meta, Mapping) and bool(meta.get("deletionTimestamp"))
        return cls(view, obj.get("spec") or {}, deleting)

    @property
    def ref(self) -> str:
        v = self.view
        return f"{v.kind} {v.namespace}/{v.name}" if v.namespace else f"{v.kind} {v.name}"


@dataclass(frozen=True, slots=True)
class Claim:
    """The policy that claims a template, or None with ``reason`` saying why none does."""

    policy: Policy | None
    reason: str


class DetectorError(DemandError):
    """A binding Karmada's detector would fail to build (it retries and records an Event)."""


@dataclass(frozen=True, slots=True)
class _Template:
    api_version: str
    kind: str
    namespace: str
    name: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> _Template:
        meta = obj.get("metadata")
        meta = meta if isinstance(meta, Mapping) else {}
        return cls(
            api_version=str(obj.get("apiVersion") or ""),
            kind=str(obj.get("kind") or ""),
            namespace=str(meta.get("namespace") or ""),
            name=str(meta.get("name") or ""),
            labels=_strings(meta.get("labels")),
            annotations=_strings(meta.get("annotations")),
        )


def binding_name(kind: str, name: str) -> str:
    """``names.GenerateBindingName``."""
    return f"{name.replace(':', '.')}-{kind}".lower()


def selector_specificity(template: Mapping[str, Any], selector: ResourceSelector) -> Specificity:
    """``util.ResourceSelectorPriority``: a name decides alone; no name and no label selector
    matches every object of the kind."""
    t = _Template.of(template)
    if (
        t.api_version != selector.api_version
        or t.kind != selector.kind
        or (selector.namespace and t.namespace != selector.namespace)
    ):
        return Specificity.MISMATCH
    if selector.name:
        return Specificity.NAME if selector.name == t.name else Specificity.MISMATCH
    if selector.label_selector is None:
        return Specificity.KIND
    if selector.label_selector.matches(t.labels):
        return Specificity.LABEL_SELECTOR
    return Specificity.MISMATCH


def policy_specificity(template: Mapping[str, Any], view: PropagationView) -> Specificity:
    """``util.ResourceMatchSelectorsPriority``: the best of the policy's selectors."""
    return max(
        (selector_specificity(template, s) for s in view.resource_selectors),
        default=Specificity.MISMATCH,
    )


def highest(template: Mapping[str, Any], candidates: Iterable[Policy]) -> Policy | None:
    """``getHighestPriority(Cluster)PropagationPolicy`` among policies of one kind."""
    best: tuple[int, int, str] | None = None
    chosen = None
    for policy in candidates:
        specificity = policy_specificity(template, policy.view)
        if specificity == Specificity.MISMATCH:
            continue
        # larger wins on priority and specificity; the smaller name wins a tie
        key = (policy.view.priority, int(specificity), policy.view.name)
        if best is None or key[:2] > best[:2] or (key[:2] == best[:2] and key[2] < best[2]):
            best, chosen = key, policy
    return chosen


def find_policy(
    template: Mapping[str, Any],
    policies: Sequence[Policy],
    skipped_namespaces: Sequence[str] = DEFAULT_SKIPPED_NAMESPACES,
) -> Claim:
    """The policy Karmada's detector applies to ``template`` (steps 1–3 of the module doc)."""
    t = _Template.of(template)
    skipped = _skipped(t, skipped_namespaces)
    if skipped:
        return Claim(None, skipped)
    claimed = _claimed(template, t, policies)
    if claimed is not None:
        return claimed
    live = [p for p in policies if not p.deleting]
    if t.namespace:
        namespaced = [
            p
            for p in live
            if p.view.kind == "PropagationPolicy" and p.view.namespace == t.namespace
        ]
        policy = highest(template, namespaced)
        if policy is not None:
            return Claim(policy, _why(template, policy))
    policy = highest(template, (p for p in live if p.view.kind == "ClusterPropagationPolicy"))
    if policy is not None:
        return Claim(policy, _why(template, policy))
    where = f"in namespace {t.namespace} " if t.namespace else ""
    return Claim(
        None,
        f"no PropagationPolicy {where}and no ClusterPropagationPolicy selects "
        f"{t.api_version} {t.kind} {t.name!r}",
    )


def claim_template(template: Mapping[str, Any], policy: Policy) -> dict[str, Any]:
    """A copy of ``template`` with the policy's claim (``AddPPClaimMetadata`` /
    ``AddCPPClaimMetadata``), as the detector updates it before building the binding."""
    claimed = copy.deepcopy(dict(template))
    meta = claimed.setdefault("metadata", {})
    meta.setdefault("labels", {}).update(_claim_labels(policy))
    meta.setdefault("annotations", {}).update(_claim_annotations(policy))
    return claimed


def build_binding(
    template: Mapping[str, Any],
    policy: Policy,
    priority_classes: Mapping[str, int] | None = None,
) -> dict[str, Any]:
    """The (Cluster)ResourceBinding Karmada's detector creates for ``template`` under ``policy``.

    ``priority_classes`` (name → value) resolve a policy's ``spec.schedulePriority``. Raises
    DetectorError when Karmada could not build it either, DemandError for a malformed template.
    """
    t = _Template.of(template)
    meta = template.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    kind = "ResourceBinding" if t.namespace else "ClusterResourceBinding"
    uid = str(meta.get("uid") or "")
    resource: dict[str, Any] = {"apiVersion": t.api_version, "kind": t.kind}
    if t.namespace:
        resource["namespace"] = t.namespace
    resource["name"] = t.name
    if uid:
        resource["uid"] = uid
    if meta.get("resourceVersion"):
        resource["resourceVersion"] = str(meta["resourceVersion"])
    owner: dict[str, Any] = {"apiVersion": t.api_version, "kind": t.kind, "name": t.name}
    if uid:
        owner["uid"] = uid
    owner |= {"controller": True, "blockOwnerDeletion": True}
    metadata: dict[str, Any] = {"name": binding_name(t.kind, t.name)}
    if t.namespace:
        metadata["namespace"] = t.namespace
    metadata |= {
        "labels": _claim_labels(policy),
        "annotations": _claim_annotations(policy),
        "ownerReferences": [owner],
        "finalizers": [FINALIZERS[kind]],
    }
    spec: dict[str, Any] = {"resource": resource}
    for field in COPIED_FIELDS:
        value = policy.spec.get(field)
        if value not in (None, False, ""):
            spec[field] = copy.deepcopy(value)
    spec["placement"] = copy.deepcopy(dict(policy.spec.get("placement") or {}))
    if policy.spec.get("suspension") is not None:
        spec["suspension"] = copy.deepcopy(dict(policy.spec["suspension"]))
    interpreted = interpret_replicas(template)
    if interpreted is not None:
        replicas, requirements = interpreted
        if replicas:
            spec["replicas"] = replicas
        if requirements is not None:
            spec["replicaRequirements"] = requirements
    if kind == "ResourceBinding" and policy.spec.get("schedulePriority") is not None:
        spec["schedulePriority"] = _schedule_priority(policy, priority_classes or {})
    return {"apiVersion": BINDING_API_VERSION, "kind": kind, "metadata": metadata, "spec": spec}


# -- helpers ------------------------------------------------------------------------------------


def _skipped(t: _Template, skipped_namespaces: Sequence[str]) -> str:
    ns = t.namespace
    if ns in ("karmada-system", "karmada-cluster") or ns.startswith("karmada-es-"):
        return f"namespace {ns} is reserved by Karmada; its objects are never propagated"
    for pattern in skipped_namespaces:
        if ns and re.fullmatch(pattern, ns):
            return (
                f"namespace {ns} matches the detector's --skipped-propagating-namespaces "
                f"{pattern!r}; its objects are never propagated"
            )
    if t.labels.get(CLAIMED_BY_LABEL):
        return f"label {CLAIMED_BY_LABEL}={t.labels[CLAIMED_BY_LABEL]}: another controller owns it"
    return ""


def _claimed(template: Mapping[str, Any], t: _Template, policies: Sequence[Policy]) -> Claim | None:
    """The claim the template already carries; None when it carries none, or its policy is gone
    (Karmada then removes the claim and matches the template afresh)."""
    pp_label = PERMANENT_ID_LABELS["PropagationPolicy"]
    cpp_label = PERMANENT_ID_LABELS["ClusterPropagationPolicy"]
    namespace = t.annotations.get(PP_NAMESPACE_ANNOTATION, "")
    name = t.annotations.get(PP_NAME_ANNOTATION, "")
    if namespace and name and t.labels.get(pp_label):
        kind = "PropagationPolicy"
    else:
        namespace, name, kind = "", t.annotations.get(CPP_NAME_ANNOTATION, ""), ""
        if name and t.labels.get(cpp_label):
            kind = "ClusterPropagationPolicy"
    if not kind:
        return None
    policy = next(
        (
            p
            for p in policies
            if p.view.kind == kind and p.view.namespace == namespace and p.view.name == name
        ),
        None,
    )
    if policy is None:
        return None
    if policy.deleting:
        return Claim(None, f"claimed by {policy.ref}, which is being deleted")
    if policy_specificity(template, policy.view) == Specificity.MISMATCH:
        return Claim(None, f"claimed by {policy.ref}, whose resourceSelectors no longer select it")
    return Claim(policy, f"already claimed by {policy.ref} (its claim labels)")


def _why(template: Mapping[str, Any], policy: Policy) -> str:
    selector = {
        Specificity.NAME: "by name",
        Specificity.LABEL_SELECTOR: "by label selector",
        Specificity.KIND: "by kind",
    }[policy_specificity(template, policy.view)]
    return f"selected by {policy.ref} ({selector}, priority {policy.view.priority})"


def _claim_labels(policy: Policy) -> dict[str, str]:
    return {PERMANENT_ID_LABELS[policy.view.kind]: policy.view.permanent_id}


def _claim_annotations(policy: Policy) -> dict[str, str]:
    if policy.view.kind == "PropagationPolicy":
        return {
            PP_NAMESPACE_ANNOTATION: policy.view.namespace,
            PP_NAME_ANNOTATION: policy.view.name,
        }
    return {CPP_NAME_ANNOTATION: policy.view.name}


def _schedule_priority(policy: Policy, priority_classes: Mapping[str, int]) -> dict[str, Any]:
    path = "spec.schedulePriority"
    raw = policy.spec["schedulePriority"]
    if not isinstance(raw, Mapping):
        raise DetectorError(path, f"{policy.ref}: expected an object")
    source = raw.get("priorityClassSource")
    if source != "KubePriorityClass":
        raise DetectorError(
            f"{path}.priorityClassSource",
            f"{policy.ref}: priority class source {source!r} is not supported by Karmada",
        )
    name = str(raw.get("priorityClassName") or "")
    if name not in priority_classes:
        raise DetectorError(
            f"{path}.priorityClassName",
            f"{policy.ref}: PriorityClass {name!r} not found; Karmada retries until it exists",
        )
    value = priority_classes[name]
    return {"priority": value} if value else {}


def _strings(raw: Any) -> Mapping[str, str]:
    if not isinstance(raw, Mapping):
        return {}
    return {str(k): str(v) for k, v in raw.items() if v is not None}
