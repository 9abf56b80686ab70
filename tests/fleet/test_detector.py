"""Karmada's detector rules (engine.fleet.detector): which policy claims a template, the binding."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from engine.fleet.detector import (
    Policy,
    Specificity,
    binding_name,
    build_binding,
    claim_template,
    find_policy,
    highest,
    policy_specificity,
)
from engine.workloads.model import DemandError
from tests.fleet.builders import CPP_ID_LABEL, PP_ID_LABEL, policy, pytorch_job

PYTORCH = ("kubeflow.org/v1", "PyTorchJob")


def pp(name: str, namespace: str = "research", **kw: Any) -> dict[str, Any]:
    return policy(name, namespace, **kw)


def with_selectors(obj: dict[str, Any], *selectors: dict[str, Any]) -> dict[str, Any]:
    obj = copy.deepcopy(obj)
    obj["spec"]["resourceSelectors"] = [
        {"apiVersion": PYTORCH[0], "kind": PYTORCH[1], **s} for s in selectors
    ]
    return obj


def read(*objs: dict[str, Any]) -> list[Policy]:
    return [Policy.read(o) for o in objs]


def chosen(template: dict[str, Any], *objs: dict[str, Any]) -> str | None:
    claim = find_policy(template, read(*objs))
    return None if claim.policy is None else claim.policy.view.name


def job(name: str = "llama", namespace: str = "research", **labels: str) -> dict[str, Any]:
    obj = pytorch_job(name, namespace)
    obj["metadata"]["labels"] = dict(labels)
    return obj


# -- which policy ---------------------------------------------------------------------------------


def test_explicit_priority_beats_a_more_exact_selector():
    by_name = with_selectors(pp("by-name"), {"name": "llama"})
    assert chosen(job(), by_name, pp("by-kind", priority=5)) == "by-kind"


@pytest.mark.parametrize(
    ("selectors", "want"),
    [
        ({"name": "llama"}, Specificity.NAME),
        ({"labelSelector": {"matchLabels": {"team": "llm"}}}, Specificity.LABEL_SELECTOR),
        ({"labelSelector": {}}, Specificity.LABEL_SELECTOR),  # empty selector: matches all
        ({}, Specificity.KIND),
        ({"name": "other"}, Specificity.MISMATCH),
        ({"name": "llama", "labelSelector": {"matchLabels": {"x": "y"}}}, Specificity.NAME),
        ({"labelSelector": {"matchLabels": {"team": "cv"}}}, Specificity.MISMATCH),
        ({"namespace": "other"}, Specificity.MISMATCH),
        ({"namespace": "research"}, Specificity.KIND),
    ],
)
def test_selector_specificity(selectors: dict[str, Any], want: Specificity):
    [policy_] = read(with_selectors(pp("p"), selectors))
    assert policy_specificity(job(team="llm"), policy_.view) == want


def test_at_equal_priority_the_most_exact_selector_wins():
    by_kind = pp("a-kind")
    by_label = with_selectors(pp("b-label"), {"labelSelector": {"matchLabels": {"team": "llm"}}})
    by_name = with_selectors(pp("c-name"), {"name": "llama"})
    assert chosen(job(team="llm"), by_kind, by_label, by_name) == "c-name"
    assert chosen(job(team="llm"), by_name, by_label, by_kind) == "c-name"
    assert chosen(job(team="llm"), by_kind, by_label) == "b-label"


def test_the_best_selector_of_a_policy_counts():
    mixed = with_selectors(pp("z-mixed"), {}, {"name": "llama"})
    assert chosen(job(), pp("a-kind"), mixed) == "z-mixed"


def test_a_full_tie_goes_to_the_alphabetically_first_name_in_any_order():
    assert chosen(job(), pp("beta"), pp("alpha")) == "alpha"
    assert chosen(job(), pp("alpha"), pp("beta")) == "alpha"
    assert highest(job(), []) is None


def test_a_propagation_policy_beats_any_cluster_propagation_policy():
    cluster_wide = policy("global", cluster_scoped=True, priority=100)
    assert chosen(job(), cluster_wide, pp("local")) == "local"


def test_a_policy_of_another_namespace_does_not_claim_the_template():
    cluster_wide = policy("global", cluster_scoped=True)
    assert chosen(job(), pp("theirs", namespace="other"), cluster_wide) == "global"
    assert chosen(job(), pp("theirs", namespace="other")) is None


def test_cluster_policies_follow_the_same_order():
    low = policy("a-low", cluster_scoped=True, priority=1)
    high = policy("z-high", cluster_scoped=True, priority=2)
    assert chosen(job(), low, high) == "z-high"


def test_no_match_says_what_was_looked_for():
    other_kind = pp("volcano", kinds=(("batch.volcano.sh/v1alpha1", "Job"),))
    claim = find_policy(job(), read(other_kind))
    assert claim.policy is None
    assert "no PropagationPolicy in namespace research" in claim.reason
    assert "kubeflow.org/v1 PyTorchJob 'llama'" in claim.reason


def test_a_policy_being_deleted_claims_nothing():
    deleting = pp("going")
    deleting["metadata"]["deletionTimestamp"] = "2025-03-10T09:00:00Z"
    assert chosen(job(), deleting, pp("staying")) == "staying"
    assert chosen(job(), deleting) is None


@pytest.mark.parametrize(
    ("namespace", "labels", "why"),
    [
        ("karmada-system", {}, "reserved"),
        ("karmada-es-gpu-east", {}, "reserved"),
        ("kube-system", {}, "skipped-propagating-namespaces"),
        ("research", {"resourcetemplate.karmada.io/claimed-by": "mcs"}, "claimed-by"),
    ],
)
def test_templates_karmada_never_propagates(namespace: str, labels: dict[str, str], why: str):
    template = job(namespace=namespace, **labels)
    claim = find_policy(template, read(pp("any", namespace=namespace)))
    assert claim.policy is None
    assert why in claim.reason


def claimed_by(template: dict[str, Any], obj: dict[str, Any]) -> dict[str, Any]:
    return claim_template(template, Policy.read(obj))


def test_a_claimed_template_keeps_its_policy():
    old = pp("old")
    newer = with_selectors(pp("newer", priority=9), {"name": "llama"})
    assert chosen(claimed_by(job(), old), old, newer) == "old"


def test_a_claim_on_a_policy_that_is_gone_is_matched_afresh():
    template = claimed_by(job(), pp("gone"))
    assert chosen(template, pp("present")) == "present"


def test_a_claim_whose_policy_no_longer_selects_the_template_propagates_nothing():
    template = claimed_by(job(), pp("old"))
    narrowed = with_selectors(pp("old"), {"name": "someone-else"})
    claim = find_policy(template, read(narrowed, pp("other")))
    assert claim.policy is None
    assert "no longer select" in claim.reason


def test_claiming_adds_the_policy_labels_and_annotations_to_a_copy():
    template = job(team="llm")
    claimed = claimed_by(template, pp("research-jobs"))
    assert claimed["metadata"]["labels"] == {"team": "llm", PP_ID_LABEL: "id-research-jobs"}
    assert claimed["metadata"]["annotations"] == {
        "propagationpolicy.karmada.io/namespace": "research",
        "propagationpolicy.karmada.io/name": "research-jobs",
    }
    assert template["metadata"]["labels"] == {"team": "llm"}
    cluster_claimed = claimed_by(template, policy("global", cluster_scoped=True))
    assert cluster_claimed["metadata"]["annotations"] == {
        "clusterpropagationpolicy.karmada.io/name": "global"
    }


# -- the binding ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "name", "want"),
    [
        ("PyTorchJob", "llama", "llama-pytorchjob"),
        ("Job", "Bert-Sweep", "bert-sweep-job"),
        ("ClusterRole", "system:aggregate", "system.aggregate-clusterrole"),
    ],
)
def test_binding_name_is_lower_name_dash_kind(kind: str, name: str, want: str):
    assert binding_name(kind, name) == want


def full_policy() -> dict[str, Any]:
    obj = pp("research-jobs", placement={"clusterAffinity": {"clusterNames": ["gpu-east"]}})
    obj["spec"] |= {
        "schedulerName": "default-scheduler",
        "conflictResolution": "Abort",
        "propagateDeps": False,
        "preserveResourcesOnDeletion": True,
        "failover": {"application": {"decisionConditions": {"tolerationSeconds": 30}}},
        "suspension": {"dispatching": True},
        "preemption": "Never",
    }
    return obj


def test_the_binding_points_at_its_template_and_policy():
    template = job()
    template["metadata"]["resourceVersion"] = "100105"
    obj = full_policy()
    binding = build_binding(template, Policy.read(obj))
    assert binding["apiVersion"] == "work.karmada.io/v1alpha2"
    assert binding["kind"] == "ResourceBinding"
    meta = binding["metadata"]
    assert (meta["namespace"], meta["name"]) == ("research", "llama-pytorchjob")
    assert meta["labels"] == {PP_ID_LABEL: "id-research-jobs"}
    assert meta["annotations"] == {
        "propagationpolicy.karmada.io/namespace": "research",
        "propagationpolicy.karmada.io/name": "research-jobs",
    }
    assert meta["finalizers"] == ["karmada.io/binding-controller"]
    assert meta["ownerReferences"] == [
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob",
            "name": "llama",
            "uid": "uid-llama",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    spec = binding["spec"]
    assert spec["resource"] == {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "namespace": "research",
        "name": "llama",
        "uid": "uid-llama",
        "resourceVersion": "100105",
    }
    assert spec["placement"] == obj["spec"]["placement"]
    assert spec["placement"] is not obj["spec"]["placement"]
    assert spec["schedulerName"] == "default-scheduler"
    assert spec["conflictResolution"] == "Abort"
    assert spec["preserveResourcesOnDeletion"] is True
    assert spec["failover"] == obj["spec"]["failover"]
    assert spec["suspension"] == {"dispatching": True}
    assert "propagateDeps" not in spec  # false is omitted, as Go's omitempty does
    assert "preemption" not in spec and "priority" not in spec
    # Karmada's interpreter gives AI job kinds no replicas (componentResource is alpha-gated)
    assert "replicas" not in spec and "replicaRequirements" not in spec


def test_a_cluster_policy_labels_the_binding_with_its_own_id():
    binding = build_binding(job(), Policy.read(policy("global", cluster_scoped=True)))
    assert binding["kind"] == "ResourceBinding"  # the template is namespaced
    assert binding["metadata"]["labels"] == {CPP_ID_LABEL: "id-global"}
    assert binding["metadata"]["annotations"] == {
        "clusterpropagationpolicy.karmada.io/name": "global"
    }


def test_a_cluster_scoped_template_gets_a_cluster_resource_binding():
    template = job()
    del template["metadata"]["namespace"]
    binding = build_binding(template, Policy.read(policy("global", cluster_scoped=True)))
    assert binding["kind"] == "ClusterResourceBinding"
    assert "namespace" not in binding["metadata"]
    assert "namespace" not in binding["spec"]["resource"]
    assert binding["metadata"]["finalizers"] == ["karmada.io/cluster-resource-binding-controller"]


def test_schedule_priority_comes_from_the_kube_priority_class():
    obj = pp("research-jobs")
    obj["spec"]["schedulePriority"] = {
        "priorityClassSource": "KubePriorityClass",
        "priorityClassName": "research-high",
    }
    binding = build_binding(job(), Policy.read(obj), {"research-high": 1000})
    assert binding["spec"]["schedulePriority"] == {"priority": 1000}
    with pytest.raises(DemandError, match="PriorityClass 'research-high' not found"):
        build_binding(job(), Policy.read(obj), {})
