"""Which bindings a pass adopts (reconciler.adopt), and the merge patch it writes: the webhook's
own decision on an UPDATE of the binding, for placed bindings it never saw."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from engine import annotations as ann
from engine.policy.reload import PolicyHolder
from reconciler import adopt
from reconciler.adopt import Adopter, merge_patch
from tests.conftest import REPO
from tests.sandbox.builders import binding

NOW = dt.datetime(2025, 3, 10, 6, 0, tzinfo=dt.UTC)


@pytest.fixture(scope="module")
def policies():
    holder = PolicyHolder.for_paths([REPO / "policies"])
    assert holder.reload(), holder.status.errors
    return holder.current


def placed(name: str, kind: str = "PyTorchJob", **meta: Any) -> dict[str, Any]:
    obj = binding(name, "research", clusters=[{"name": "gpu-east", "replicas": 1}])
    obj["spec"]["resource"] |= {"kind": kind}
    if kind == "Deployment":
        obj["spec"]["resource"]["apiVersion"] = "apps/v1"
    obj["metadata"] |= {"resourceVersion": "7", **meta}
    return obj


@pytest.fixture
def asked(monkeypatch) -> list[str]:
    """The bindings the webhook's decision is asked about."""
    seen: list[str] = []
    decide = adopt.mutate_binding

    def counting(request, policies, now):
        seen.append(request.name)
        return decide(request, policies, now)

    monkeypatch.setattr(adopt, "mutate_binding", counting)
    return seen


def test_a_placed_unlabelled_batch_job_is_adopted_where_it_runs(policies, asked):
    (found,) = Adopter().find([placed("train")], policies, NOW)
    assert found.binding == "research/train-pytorchjob"
    assert found.patch == {
        "metadata": {
            "resourceVersion": "7",
            "labels": {ann.MANAGED: "true"},
            "annotations": {
                ann.ADMITTED_AT: ann.format_time(NOW),
                ann.ADMITTED_TO: "gpu-east",
                ann.POLICY_VERSION: policies.version,
            },
        },
        "spec": {"suspension": {"scheduling": True}},
    }
    assert found.event.reason == "Adopted" and "gpu-east" in found.event.message


def test_bindings_held_admitted_unplaced_or_out_of_scope_are_left_alone(policies, asked):
    managed = placed("held", labels={ann.MANAGED: "true"})
    admitted = placed("admitted", annotations={ann.ADMITTED_AT: ann.format_time(NOW)})
    waiting = binding("waiting", "research")
    service = placed("web", kind="Deployment")
    adopter = Adopter()
    objects = [managed, admitted, waiting, service]
    assert adopter.find(objects, policies, NOW) == []
    assert asked == ["web-pytorchjob"]  # only the placed, unlabelled one, out of scope
    assert adopter.find(objects, policies, NOW) == []
    assert asked == ["web-pytorchjob"]  # remembered while its version and the policies hold
    service["metadata"]["resourceVersion"] = "8"
    assert adopter.find(objects, policies, NOW) == []
    assert asked == ["web-pytorchjob"] * 2


def test_merge_patch_of_the_webhook_operations():
    operations = [
        {"op": "add", "path": "/spec/suspension/scheduling", "value": True},
        {"op": "add", "path": "/metadata/labels/fleetgate.io~1managed", "value": "true"},
        {"op": "add", "path": "/metadata/annotations", "value": {"a~b": "1"}},
    ]
    assert merge_patch(operations) == {
        "spec": {"suspension": {"scheduling": True}},
        "metadata": {"labels": {"fleetgate.io/managed": "true"}, "annotations": {"a~b": "1"}},
    }
    with pytest.raises(ValueError):
        merge_patch([{"op": "remove", "path": "/metadata/labels/x"}])
