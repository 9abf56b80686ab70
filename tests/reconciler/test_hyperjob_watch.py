"""A live reconciler sizes a Volcano HyperJob's group from the HyperJob object it watches
(issue 21): ``training.volcano.sh/v1alpha1 hyperjobs`` is among its informers, so a HyperJob of
3 jobs with 2 children present waits for its third child instead of being admitted as a group
of the 2 seen. Through the HTTPS sandbox (the fixtures of test_requeue_e2e.py)."""

from __future__ import annotations

from typing import Any

import kubernetes
import yaml

from engine import annotations as ann
from engine.workloads import hyperjob
from reconciler.informers import Informers
from reconciler.resources import HYPERJOBS, RESOURCE_BINDINGS
from sandbox.karmada.names import DURATION_ANNOTATION
from sandbox.resources import HYPERJOB_TYPE, Registry, default_registry
from sandbox.server import Sandbox
from sandbox.store import Store
from tests.conftest import REPO
from tests.reconciler import test_requeue_e2e as e2e
from tests.reconciler.test_loop import KUBEFLOW, NS, eventually
from tests.sandbox.test_webhooks import pytorchjob

bounded, clock, custom, faults, karmada, rec = (
    e2e.bounded, e2e.clock, e2e.custom, e2e.faults, e2e.karmada, e2e.rec
)  # fmt: skip
clusters_of, notes_of, step = e2e.clusters_of, e2e.notes_of, e2e.step

HYPERJOB = ("training.volcano.sh", "v1alpha1", NS, "hyperjobs")


def llm_pretrain() -> dict[str, Any]:
    """examples/hyperjob/hyperjobs.yaml's ``llm-pretrain``: 2 trainers and 1 evaluator, min 3."""
    documents = yaml.safe_load_all((REPO / "examples" / "hyperjob" / "hyperjobs.yaml").read_text())
    found = next(d for d in documents if d and d["metadata"]["name"] == "llm-pretrain")
    found["metadata"] = {"name": "llm-pretrain", "namespace": NS}
    return found


def child(name: str) -> dict[str, Any]:
    """A child of ``llm-pretrain`` (its HyperJob label), one pod of 8 GPUs."""
    job = pytorchjob(0)
    job["metadata"]["name"] = name
    job["metadata"].setdefault("labels", {})[hyperjob.NAME_LABEL] = "llm-pretrain"
    job["metadata"]["annotations"] = {DURATION_ANNOTATION: "1h"}
    job["spec"]["runPolicy"]["schedulingPolicy"]["minAvailable"] = 1
    return job


def test_a_hyperjob_of_3_with_2_children_present_waits_for_its_third(custom, karmada, rec, clock):
    custom.create_namespaced_custom_object(*HYPERJOB, llm_pretrain())
    for name in ("llm-pretrain-trainer-0", "llm-pretrain-trainer-1"):
        custom.create_namespaced_custom_object(*KUBEFLOW, child(name))
    informer = rec.informers[HYPERJOBS.key]
    eventually(lambda: informer.get(NS, "llm-pretrain") is not None)
    step(karmada, rec, custom, clock)
    for name in ("llm-pretrain-trainer-0", "llm-pretrain-trainer-1"):
        assert clusters_of(custom, name) == []
        pending = notes_of(custom, name)[ann.PENDING]
        assert pending.startswith("WaitingForGroup: "), pending
        assert "HyperJob/research/llm-pretrain: 2 of 3 members present" in pending, pending


def test_a_server_without_the_hyperjob_crd_breaks_nothing(tmp_path):
    """Like any kind the server does not serve: synced, empty, and the rest is watched."""
    registry = Registry(t for t in default_registry() if t is not HYPERJOB_TYPE)
    server = Sandbox(Store(registry=registry), bookmark_interval=0.5)
    server.start(port=0)
    configuration = kubernetes.client.Configuration()
    kubernetes.config.load_kube_config(
        config_file=str(server.write_kubeconfig(tmp_path / "kubeconfig")),
        client_configuration=configuration,
    )
    client = kubernetes.client.ApiClient(configuration)
    informers = Informers(client, seed=1, backoff_base=0.02, watch_timeout=5).start()
    try:
        assert informers.wait_synced(10)
        assert informers[HYPERJOBS.key].served is False
        assert informers[RESOURCE_BINDINGS.key].served is True
    finally:
        informers.stop(timeout=3)
        client.close()
        server.stop(timeout=5)
