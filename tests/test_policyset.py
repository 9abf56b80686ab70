"""The PolicySet: immutable, versioned by content, with working built-in defaults."""

from __future__ import annotations

import dataclasses
import datetime as dt
import re

import pytest

from engine.policy import cel
from engine.policy.policyset import load_policy_set
from tests.conftest import REPO, queue_doc

NOW = dt.datetime(2026, 11, 21, tzinfo=dt.UTC)

QUEUES = queue_doc("a", "priority: 1\nweight: 2\nmax:\n  cpu: 8") + "---\n" + queue_doc("b")
# The same two documents: other key order, quoting, spacing, comments, document order.
QUEUES_REWRITTEN = """\
# rewritten by hand
apiVersion: fleetgate.io/v1alpha1
kind: Queue
metadata: {name: b}
spec: {weight: 1}
---
kind: Queue
apiVersion: "fleetgate.io/v1alpha1"
spec:
  max: {cpu: 8}
  weight: 2      # heavier
  priority: 1
metadata:
    name: 'a'
"""


def test_shipped_policies_load():
    policies = load_policy_set([REPO / "policies"])
    assert re.fullmatch(r"[0-9a-f]{12}", policies.version)
    names = [q.name for q in policies.queues]
    assert names == sorted(names)
    assert {"research", "research-training", "prod-inference", "analytics"} <= set(names)
    assert policies.scheduling.name == "fleet"
    assert policies.scheduling.origin is not None


def test_version_ignores_layout_key_order_comments_and_file_split(write, load_ok):
    write("q.yaml", QUEUES)
    first = load_ok().version
    write("q.yaml", QUEUES_REWRITTEN)
    assert load_ok().version == first
    # the same documents split over two files
    write("q.yaml", queue_doc("a", "priority: 1\nweight: 2\nmax:\n  cpu: 8"))
    write("z.yaml", queue_doc("b"))
    assert load_ok().version == first


def test_version_changes_with_content(write, load_ok):
    write("q.yaml", QUEUES)
    before = load_ok().version
    write("q.yaml", QUEUES.replace("cpu: 8", "cpu: 9"))
    assert load_ok().version != before


def test_revision_is_recorded(write):
    path = write("q.yaml", QUEUES)
    plain = load_policy_set([path])
    tagged = load_policy_set([path], revision="4f1c2e9")
    assert tagged.version == f"{plain.version}@4f1c2e9"
    assert tagged.digest == plain.digest
    assert tagged.revision == "4f1c2e9"


def test_policy_set_is_immutable(write, load_ok):
    write("q.yaml", QUEUES)
    policies = load_ok()
    with pytest.raises(dataclasses.FrozenInstanceError):
        policies.version = "x"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        policies.queues[0].weight = 5  # type: ignore[misc]
    assert isinstance(policies.queues, tuple)


def test_quantities_are_exact(write, load_ok):
    write("q.yaml", queue_doc("a", "guarantee:\n  cpu: 100m\n  memory: 1.5Gi\nmax:\n  cpu: 1e3"))
    queue = load_ok().queue("a")
    assert queue is not None
    assert str(queue.guarantee["cpu"]) == "1/10"
    assert queue.guarantee["memory"] == 1610612736
    assert queue.max["cpu"] == 1000


def test_built_in_scheduling_policy_when_absent(write, load_ok):
    write("q.yaml", QUEUES)
    policy = load_ok().scheduling
    assert policy.origin is None
    assert policy.requeue.backoff_base == 30
    assert policy.requeue.max_attempts == 5


@pytest.mark.parametrize(
    ("labels", "annotations", "spec_queue", "queue"),
    [
        ({"fleetgate.io/queue": "a", "kueue.x-k8s.io/queue-name": "b"}, {}, "c", "a"),
        ({"kueue.x-k8s.io/queue-name": "b"}, {"scheduling.volcano.sh/queue-name": "v"}, "c", "v"),
        ({"kueue.x-k8s.io/queue-name": "b"}, {}, "c", "b"),
        ({}, {}, "c", "c"),
        ({}, {}, "", "default"),
    ],
    ids=[
        "fleetgate label wins",
        "volcano annotation before kueue label",
        "kueue label before the spec",
        "the spec's own queue",
        "default queue when no hint",
    ],
)
def test_default_queue_mapping_reads_the_usual_hints(
    write, load_ok, labels, annotations, spec_queue, queue
):
    write("q.yaml", QUEUES)
    program = load_ok().scheduling.queue.program
    job = {"labels": labels, "annotations": annotations, "specQueue": spec_queue}
    assert program.evaluate(cel.activation(cel.MAPPING_VARS, job=job, now=NOW)) == queue


@pytest.mark.parametrize(
    ("api_version", "kind", "in_scope"),
    [
        ("kubeflow.org/v1", "PyTorchJob", True),
        ("batch.volcano.sh/v1alpha1", "Job", True),
        ("ray.io/v1", "RayJob", True),
        ("apps/v1", "Deployment", False),
        ("v1", "ConfigMap", False),
    ],
)
def test_default_scope_is_the_batch_kinds(write, load_ok, api_version, kind, in_scope):
    write("q.yaml", QUEUES)
    program = load_ok().scheduling.scope.program
    resource = {"apiVersion": api_version, "kind": kind, "namespace": "ns", "name": "x"}
    act = cel.activation(cel.SCOPE_VARS, binding={}, resource=resource, now=NOW)
    assert program.evaluate(act) is in_scope
