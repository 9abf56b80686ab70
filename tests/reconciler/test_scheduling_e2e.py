# ruff: noqa: F811  (the fixtures imported below are used by name as test parameters)
"""Scheduling end to end (issue 18): every job kind applied as kubectl would, held by
fleetgate's real webhook, admitted and run on a member that serves it; fair share and queue
priority visible round after round. The HTTPS sandbox, Karmada's controllers over
examples/fleet.yaml, the real ``kubernetes`` client, and the reconciler; the harness (fixtures
and steps) that test_resilience_e2e.py shares.

As in test_loop.py, Karmada's controllers and the reconciler run ``run_once`` on a shared fake
clock; only the informers and the webhook run on threads. Policies: policies/ for the job kinds,
small directories written into tmp_path otherwise.
"""

from __future__ import annotations

import copy
import json
import math
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import yaml

from engine import annotations as ann
from engine.fleet.bindings import job_outcome
from engine.fleet.detector import binding_name
from engine.policy.reload import PolicyHolder
from reconciler.loop import PassSummary, Reconciler
from reconciler.settings import ReconcilerSettings
from sandbox.karmada import KarmadaControllers
from sandbox.karmada.names import DURATION_ANNOTATION, execution_namespace, work_name
from sandbox.resources import plural_of
from tests.conftest import REPO
from tests.reconciler.conftest import time_limit
from tests.reconciler.test_loop import NS, _snapshot_items, conditions
from tests.reconciler.test_requeue_e2e import clock, custom, faults, karmada  # noqa: F401
from tests.sandbox.conftest import kubeconfig  # noqa: F401
from tests.sandbox.test_sandbox_cli import kubectl
from tests.waiting import eventually

TEST_SECONDS = 60
BINDINGS = ("work.karmada.io", "v1alpha2", "resourcebindings")
CLUSTER_OBJECTS = ("cluster.karmada.io", "v1alpha1", "clusters")
PP = ("policy.karmada.io", "v1alpha1")
GPU_CLUSTERS = ("gpu-east", "gpu-west")


@pytest.fixture(autouse=True)
def bounded() -> Iterator[None]:
    with time_limit(TEST_SECONDS):
        yield


# -- the reconciler over a policy directory ----------------------------------------------------


@pytest.fixture
def reconciler_over(
    api_client: kubernetes.client.ApiClient, clock
) -> Iterator[Callable[[Path], Reconciler]]:
    """Start a reconciler (no pass thread) over the policies of a directory; stopped after."""
    started: list[Reconciler] = []

    def start(policies: Path | PolicyHolder) -> Reconciler:
        holder = (
            policies if isinstance(policies, PolicyHolder) else PolicyHolder.for_paths([policies])
        )
        assert holder.status.ready or holder.reload(), holder.status.errors
        rec = Reconciler(api_client, holder, ReconcilerSettings(request_timeout=10), clock=clock)
        started.append(rec)
        rec.start(loop=False)
        assert rec.wait_synced(15)
        return rec

    try:
        yield start
    finally:
        for rec in started:
            rec.stop()


def synced(rec: Reconciler, custom) -> None:
    """Wait until the reconciler's caches hold what the server holds: every binding (all
    namespaces) and every Cluster, whose status Karmada's controllers may just have written,
    and every Namespace (a test may just have relabelled one)."""
    bindings = rec.informers["resourcebindings.work.karmada.io"]
    clusters = rec.informers["clusters.cluster.karmada.io"]
    namespaces = rec.informers["namespaces"]
    core = kubernetes.client.CoreV1Api(custom.api_client)

    def same() -> bool:
        served = custom.list_cluster_custom_object(*BINDINGS)["items"]
        members = custom.list_cluster_custom_object(*CLUSTER_OBJECTS)["items"]
        spaces = core.list_namespace(_preload_content=False)
        listed = json.loads(spaces.data)["items"]
        return all(
            (cache.get(o["metadata"].get("namespace", ""), o["metadata"]["name"]) or {})
            .get("metadata", {})
            .get("resourceVersion")
            == o["metadata"]["resourceVersion"]
            for cache, items in ((bindings, served), (clusters, members), (namespaces, listed))
            for o in items
        )

    eventually(same, what="the reconciler's cache to catch up")


def step(karmada: KarmadaControllers, rec: Reconciler, custom) -> PassSummary:
    """Karmada's controllers, then (once the reconciler's cache caught up) one pass."""
    karmada.run_once()
    synced(rec, custom)
    summary = rec.run_once()
    assert summary.errors == 0, summary
    return summary


def bound(custom, namespace: str, name: str) -> dict[str, Any]:
    return dict(custom.get_namespaced_custom_object(*BINDINGS[:2], namespace, BINDINGS[2], name))


def works_on(custom, cluster: str) -> list[str]:
    found = custom.list_namespaced_custom_object(
        "work.karmada.io", "v1alpha1", execution_namespace(cluster), "works"
    )["items"]
    return sorted(w["metadata"]["name"] for w in found)


# -- 1. every job kind, applied as kubectl would -----------------------------------------------


def template(kind: str, name: str) -> dict[str, Any]:
    """An object of examples/fleet-snapshot.yaml as a user writes it: no server fields."""
    for item in _snapshot_items():
        if item["kind"] == kind and item["metadata"]["name"] == name:
            found = copy.deepcopy(item)
            meta = found["metadata"]
            found["metadata"] = {
                "name": meta["name"],
                "namespace": meta.get("namespace"),
                "labels": {
                    k: v for k, v in (meta.get("labels") or {}).items() if "karmada.io" not in k
                },
            }
            found.pop("status", None)
            return found
    raise KeyError(f"{kind}/{name}")


def propagation(name: str, namespace: str, api_version: str, kind: str) -> dict[str, Any]:
    """A PropagationPolicy for one kind onto the GPU clusters (one cluster per job)."""
    return {
        "apiVersion": "policy.karmada.io/v1alpha1",
        "kind": "PropagationPolicy",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "resourceSelectors": [{"apiVersion": api_version, "kind": kind}],
            "placement": {
                "clusterAffinity": {"clusterNames": list(GPU_CLUSTERS)},
                "spreadConstraints": [{"spreadByField": "cluster", "maxGroups": 1, "minGroups": 1}],
            },
        },
    }


def tfjob() -> dict[str, Any]:
    gpu = {"requests": {"cpu": "8", "memory": "64Gi"}, "limits": {"nvidia.com/gpu": "4"}}
    cpu = {"requests": {"cpu": "4", "memory": "16Gi"}}
    role = lambda n, res: {  # noqa: E731
        "replicas": n,
        "template": {
            "spec": {"containers": [{"name": "tensorflow", "image": "tf", "resources": res}]}
        },
    }
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {
            "name": "mnist-tf",
            "namespace": NS,
            "labels": {"fleetgate.io/queue": "research-experiments"},
        },
        "spec": {"tfReplicaSpecs": {"PS": role(1, cpu), "Worker": role(2, gpu)}},
    }


def jobset() -> dict[str, Any]:
    pod = {
        "containers": [
            {"name": "c", "image": "x", "resources": {"requests": {"cpu": "2", "memory": "4Gi"}}}
        ],
        "restartPolicy": "Never",
    }
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {
            "name": "shards",
            "namespace": NS,
            "labels": {"fleetgate.io/queue": "research-experiments"},
        },
        "spec": {
            "replicatedJobs": [
                {
                    "name": "shard",
                    "replicas": 2,
                    "template": {"spec": {"parallelism": 1, "template": {"spec": pod}}},
                }
            ]
        },
    }


def snapshot(*objects: tuple[str, str]) -> Callable[[], list[dict[str, Any]]]:
    return lambda: [template(kind, name) for kind, name in objects]


def example(path: str) -> Callable[[], list[dict[str, Any]]]:
    return lambda: [d for d in yaml.safe_load_all((REPO / path).read_text()) if d]


RESEARCH_JOBS = ("PropagationPolicy", "research-jobs")
# what ``kubectl apply -f`` gets, the job last; the clusters it may be admitted to
KINDS: dict[str, tuple[Callable[[], list[dict[str, Any]]], set[str]]] = {
    "PyTorchJob": (snapshot(RESEARCH_JOBS, ("PyTorchJob", "llama-pretrain")), set(GPU_CLUSTERS)),
    "PyTorchJob-examples-jobs": (
        lambda: [template(*RESEARCH_JOBS), *example("examples/jobs/pytorch-finetune.yaml")()],
        set(GPU_CLUSTERS),
    ),
    "PyTorchJob-examples-sandbox": (example("examples/sandbox/pytorchjob.yaml"), set(GPU_CLUSTERS)),
    "MPIJob": (snapshot(RESEARCH_JOBS, ("MPIJob", "llama-finetune")), set(GPU_CLUSTERS)),
    "TFJob": (
        lambda: [propagation("tf", NS, "kubeflow.org/v1", "TFJob"), tfjob()],
        set(GPU_CLUSTERS),
    ),
    "VolcanoJob": (snapshot(RESEARCH_JOBS, ("Job", "bert-sweep")), set(GPU_CLUSTERS)),
    # only gpu-east serves Ray (examples/fleet.yaml)
    "RayJob": (snapshot(RESEARCH_JOBS, ("RayJob", "vit-probe")), {"gpu-east"}),
    # team-data-jobs: a100-first
    "BatchJob": (
        snapshot(("PropagationPolicy", "team-data-jobs"), ("Job", "tokenizer-stats")),
        {"gpu-west"},
    ),
    "SparkApplication": (
        snapshot(("PropagationPolicy", "analytics-spark"), ("SparkApplication", "nightly-etl")),
        {"cpu-spot"},
    ),
}


def kubectl_apply(api_client: kubernetes.client.ApiClient, obj: dict[str, Any]) -> None:
    """Create ``obj`` through the client at its own path, as ``kubectl apply`` does first (its
    namespace too); one that exists is left as it is."""
    group, _, version = obj["apiVersion"].rpartition("/")
    namespace = obj["metadata"].get("namespace")
    try:
        if obj["kind"] == "Namespace":
            kubernetes.client.CoreV1Api(api_client).create_namespace(obj)
            return
        kubectl_apply(
            api_client,
            {"apiVersion": "v1", "kind": "Namespace"} | {"metadata": {"name": namespace}},
        )
        if (group, obj["kind"]) == ("batch", "Job"):
            kubernetes.client.BatchV1Api(api_client).create_namespaced_job(namespace, obj)
        else:
            kubernetes.client.CustomObjectsApi(api_client).create_namespaced_custom_object(
                group, version, namespace, plural_of(obj["kind"]), obj
            )
    except kubernetes.client.ApiException as error:
        if error.status != 409:  # AlreadyExists
            raise


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_each_job_kind_is_held_admitted_and_run_on_a_member_that_serves_it(
    kind, api_client, custom, karmada, reconciler_over, clock
):
    # catches: a kind whose binding the webhook does not hold, whose demand the cycle cannot
    # read (UnknownDemand), that is admitted to a cluster not serving it or its placement, whose
    # resizable replicas are not written per cluster, or that never reaches its member
    documents, allowed = KINDS[kind]
    *others, job = documents()
    namespace, name = job["metadata"]["namespace"], job["metadata"]["name"]
    job["metadata"].setdefault("annotations", {}).setdefault(DURATION_ANNOTATION, "5m")
    for obj in [*others, job]:
        kubectl_apply(api_client, obj)
    rec = reconciler_over(REPO / "policies")
    ref = binding_name(job["kind"], name)

    karmada.run_once()  # the detector makes the binding; fleetgate's webhook holds it
    held = bound(custom, namespace, ref)
    assert held["spec"]["suspension"]["scheduling"] is True
    assert held["metadata"]["labels"][ann.MANAGED] == "true"
    assert not held["spec"].get("clusters")

    synced(rec, custom)
    summary = rec.run_once()
    decided = rec.last_result.decision(f"{namespace}/{ref}")
    assert (summary.applied, summary.errors) == (1, 0), (summary, decided)
    admitted = bound(custom, namespace, ref)
    targets = admitted["spec"]["clusters"]
    assert {t["name"] for t in targets} <= allowed, targets
    assert conditions(admitted)["Scheduled"]["reason"] == "FleetgateAdmitted"
    if kind == "BatchJob":  # resizable: Karmada gets the replicas of each cluster
        assert sum(t["replicas"] for t in targets) == job["spec"]["parallelism"]
    else:
        assert len(targets) == 1 and "replicas" not in targets[0]

    step(karmada, rec, custom)  # Works on the member; it runs the job; fleetgate records it
    (where,) = {t["name"] for t in targets}
    assert work_name(job["kind"], name, namespace) in works_on(custom, where)
    running = bound(custom, namespace, ref)
    assert ann.RUNNING_SINCE in running["metadata"]["annotations"]
    assert [s["clusterName"] for s in running["status"]["aggregatedStatus"]] == [where]

    karmada.run_once(clock.advance(5 * 60))
    (done,) = bound(custom, namespace, ref)["status"]["aggregatedStatus"]
    assert job_outcome(done["status"]) == "Succeeded", done


def test_a_jobset_no_member_serves_waits_with_its_reason(
    api_client,
    custom,
    karmada,
    reconciler_over,
):
    # catches: a binding admitted to a cluster that cannot run its kind (examples/fleet.yaml:
    # no member serves jobset.x-k8s.io; the sandbox's API does), or a wait without a reason
    job = jobset()
    kubectl_apply(api_client, propagation("sets", NS, "jobset.x-k8s.io/v1alpha2", "JobSet"))
    kubectl_apply(api_client, job)
    rec = reconciler_over(REPO / "policies")
    step(karmada, rec, custom)
    held = bound(custom, NS, binding_name("JobSet", "shards"))
    assert held["spec"]["suspension"]["scheduling"] is True
    assert not held["spec"].get("clusters")
    reason, _, message = held["metadata"]["annotations"][ann.PENDING].partition(": ")
    assert reason == "NoCandidateCluster", message
    decided = rec.last_result.decision(f"{NS}/{binding_name('JobSet', 'shards')}")
    assert decided is not None and decided.action == "Pending"
    # the kind is checked before the placement: every cluster says it does not serve it
    why = "does not serve jobset.x-k8s.io/v1alpha2 JobSet"
    assert dict(decided.cluster_reasons) == dict.fromkeys(("cpu-spot", *GPU_CLUSTERS), why)


# -- small policy directories and GPU jobs -----------------------------------------------------

ALLOW_SPLIT = 'job.resizable && !(job.kind in ["Job", "JobSet"])'  # policies/scheduling.yaml
# The webhook (serving policies/) refuses a job whose queue policies/ does not define: the
# policies written here reuse those leaf queues' names, with specs of their own.
A, B = "research-experiments", "research-training"
HIGH, LOW = "prod-inference", "research-training"


def write_policies(
    directory: Path, queues: dict[str, dict[str, Any]], allow_split: str = ALLOW_SPLIT
) -> Path:
    """Queues (name → spec) and a SchedulingPolicy: the queue from the job's label, fair
    share over GPUs, gangs admitted whole, BinPack; one file each, as a platform team writes."""
    directory.mkdir(parents=True, exist_ok=True)
    documents = [
        {"apiVersion": "fleetgate.io/v1alpha1", "kind": "Queue", "metadata": {"name": name}}
        | {"spec": spec}
        for name, spec in queues.items()
    ]
    (directory / "queues.yaml").write_text(yaml.safe_dump_all(documents, sort_keys=False))
    scheduling = {
        "apiVersion": "fleetgate.io/v1alpha1",
        "kind": "SchedulingPolicy",
        "metadata": {"name": "fleet"},
        "spec": {
            "queue": 'job.labels["fleetgate.io/queue"]',
            "fairSharing": {"enabled": True, "resources": ["nvidia.com/gpu"]},
            "gang": {"admitOn": "All", "allowSplit": allow_split},
            "placement": {"strategy": "BinPack"},
        },
    }
    (directory / "scheduling.yaml").write_text(yaml.safe_dump(scheduling, sort_keys=False))
    return directory


def gpu_job(
    custom,
    name: str,
    queue: str,
    pods: int = 1,
    gpus: int = 8,
    runs: str = "5m",
    priority_class: str = "standard",
) -> str:
    """A PyTorchJob in research (the seeded research-jobs policy: one GPU cluster): a master
    and ``pods - 1`` workers of ``gpus`` GPUs each, running ``runs``. Its binding's name."""
    container = {
        "name": "pytorch",
        "image": "ghcr.io/example/train:1.0",
        "resources": {
            "requests": {"cpu": "8", "memory": "64Gi"},
            "limits": {"memory": "64Gi", "nvidia.com/gpu": str(gpus)},
        },
    }
    role = lambda n: {"replicas": n, "template": {"spec": {"containers": [container]}}}  # noqa: E731
    specs = {"Master": role(1)} | ({"Worker": role(pods - 1)} if pods > 1 else {})
    job = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {
            "name": name,
            "namespace": NS,
            "labels": {"fleetgate.io/queue": queue},
            "annotations": {DURATION_ANNOTATION: runs},
        },
        "spec": {
            "pytorchReplicaSpecs": specs,
            "runPolicy": {"schedulingPolicy": {"priorityClass": priority_class}},
        },
    }
    custom.create_namespaced_custom_object("kubeflow.org", "v1", NS, "pytorchjobs", job)
    return binding_name("PyTorchJob", name)


def queued(karmada: KarmadaControllers) -> None:
    """Karmada's detector makes the bindings of the jobs submitted so far (the webhook stamps
    their queued-at, in whole seconds of its own clock); then wait for the wall clock's next
    second, so that jobs submitted after are queued later, not in a tie."""
    karmada.run_once()
    second = int(time.time())  # the webhook's clock is the wall clock
    eventually(lambda: int(time.time()) > second, what="the next second")


def admitted_by_queue(summary: PassSummary) -> dict[str, int]:
    """Admissions of a pass by queue (the job names start with their queue's)."""
    counts: dict[str, int] = {}
    for ref, what in summary.applied_to:
        if what == "Admit":
            queue = ref.rpartition("/")[2].split("-")[0]
            counts[queue] = counts.get(queue, 0) + 1
    return counts


def running(karmada: KarmadaControllers, rec: Reconciler, custom, clock) -> PassSummary:
    """The admitted jobs start on their members and the Clusters' next status (10 s later)
    counts their pods; then a reconciler pass (it records them running); then the clock moves
    past ``clusterStatusLag`` (20 s), when the cycle stops reserving their room itself."""
    karmada.run_once()
    karmada.run_once(clock.advance(10))
    synced(rec, custom)
    summary = rec.run_once()
    assert summary.errors == 0, summary
    clock.advance(20)
    return summary


def finish_round(karmada: KarmadaControllers, clock, runs: float = 5 * 60) -> None:
    """Let every running job of ``runs`` seconds finish, and the Clusters report it."""
    karmada.run_once(clock.advance(runs))
    karmada.run_once(clock.advance(10))


# -- 2. fair share and queue priority over time ------------------------------------------------

ROUNDS = 3
SLOTS = 16  # 64 GPUs of examples/fleet.yaml in 4-GPU jobs


@pytest.mark.parametrize(("weight_a", "weight_b"), [(1, 1), (2, 1)], ids=["1:1", "2:1"])
def test_two_saturating_queues_are_served_by_their_weights_round_after_round(
    tmp_path,
    custom,
    karmada,
    reconciler_over,
    clock,
    weight_a,
    weight_b,
):
    # catches: fair share ignored (one queue, first by name or by age, takes the fleet), a
    # weight ignored, usage of finished jobs never released (no later round), or a job
    # admitted twice. The b jobs are all submitted first: FIFO across queues would give b all.
    policies = write_policies(
        tmp_path / "policies", {A: {"weight": weight_a}, B: {"weight": weight_b}}
    )
    share_a = weight_a / (weight_a + weight_b)
    for prefix, queue, share in (("b", B, 1 - share_a), ("a", A, share_a)):
        # more than the queue can be given over the run: it never runs dry
        for i in range(math.ceil(share * SLOTS * ROUNDS) + ROUNDS + 1):
            gpu_job(custom, f"{prefix}-{i:02}", queue, gpus=4)
        queued(karmada)  # b's jobs strictly older: FIFO across queues would serve b alone
    rec = reconciler_over(policies)

    totals = {"a": 0, "b": 0}
    for done in range(1, ROUNDS + 1):
        summary = step(karmada, rec, custom)
        counts = admitted_by_queue(summary)
        assert sum(counts.values()) == SLOTS, (done, counts)  # the fleet is full again
        for queue in totals:
            totals[queue] += counts.get(queue, 0)
        # within one job per round of the weights (a pick is a whole job; ties go by name)
        assert abs(totals["a"] - share_a * SLOTS * done) <= done, (done, totals)
        running(karmada, rec, custom, clock)  # the next pass admits nothing: no room
        assert admitted_by_queue(rec.last) == {}, (rec.last.applied_to, totals)
        finish_round(karmada, clock)
    admitted = [
        b for b in custom.list_namespaced_custom_object(*BINDINGS[:2], NS, BINDINGS[2])["items"]
        if b["spec"].get("clusters")
    ]  # fmt: skip
    assert len(admitted) == SLOTS * ROUNDS == sum(totals.values())


def test_a_higher_priority_queue_is_served_first(
    tmp_path,
    custom,
    karmada,
    reconciler_over,
    clock,
):
    # catches: queue priority tiers ignored (fair share between tiers would give low half of
    # the first round), or the low queue starved after the high one is drained
    policies = write_policies(
        tmp_path / "policies", {HIGH: {"priority": 10}, LOW: {"priority": 0, "weight": 4}}
    )
    for i in range(SLOTS):  # low's jobs first: older, and favoured by weight
        gpu_job(custom, f"low-{i:02}", LOW, gpus=4)
    queued(karmada)
    for i in range(SLOTS + SLOTS // 2):
        gpu_job(custom, f"high-{i:02}", HIGH, gpus=4)
    rec = reconciler_over(policies)

    rounds = []
    for _ in range(2):
        rounds.append(admitted_by_queue(step(karmada, rec, custom)))
        assert admitted_by_queue(running(karmada, rec, custom, clock)) == {}
        finish_round(karmada, clock)
    assert rounds == [{"high": SLOTS}, {"high": SLOTS // 2, "low": SLOTS // 2}]
    waiting = [d for d in rec.last_result.decisions if d.action == "Pending"]
    assert len(waiting) == SLOTS // 2 and {d.queue for d in waiting} == {LOW}, waiting


def test_a_namespace_may_use_a_queue_only_once_its_labels_match_the_selector(
    tmp_path, custom, karmada, reconciler_over, api_client
):
    # catches: a namespace labelling its jobs into any queue (issue 29), Namespaces not
    # watched (a relabelled namespace stays refused), or the refusal not a Reject
    # (the queue names are policies/' own, which the webhook of this harness checks jobs by)
    policies = write_policies(
        tmp_path / "policies",
        {HIGH: {"namespaceSelector": {"matchLabels": {"tenant": "ml"}}}, LOW: {}},
    )
    core = kubernetes.client.CoreV1Api(api_client)
    core.patch_namespace(NS, {"metadata": {"labels": {"tenant": "other"}}})
    gpu_job(custom, "prod-01", HIGH, gpus=4)
    gpu_job(custom, "research-01", LOW, gpus=4)
    queued(karmada)
    rec = reconciler_over(policies)

    step(karmada, rec, custom)
    decided = {d.workload.rpartition("/")[2]: d for d in rec.last_result.decisions}
    refused = decided["prod-01"]
    assert (refused.action, refused.reason) == ("Reject", "QueueNotAllowed"), refused
    assert f"namespace {NS} may not use queue {HIGH}" in refused.message
    assert decided["research-01"].reason == "Admitted"

    core.patch_namespace(NS, {"metadata": {"labels": {"tenant": "ml"}}})
    summary = step(karmada, rec, custom)
    assert admitted_by_queue(summary) == {"prod": 1}, summary.applied_to


# -- 3. the story on the user's own job ---------------------------------------------------------


def test_kubectl_describe_of_a_job_that_waited_shows_it_queued_then_admitted(
    tmp_path, custom, karmada, reconciler_over, clock, kubeconfig
):
    # catches: Events only on the ResourceBinding (kubectl describe of the PyTorchJob the user
    # applied ends with "Events: <none>"), or Events about the template under a wrong uid
    policies = write_policies(tmp_path / "policies", {A: {"max": {"nvidia.com/gpu": 8}}})
    refs = [gpu_job(custom, name, A) for name in ("one", "two")]  # 8 GPUs each: one at a time
    karmada.run_once()
    rec = reconciler_over(policies)
    step(karmada, rec, custom)
    waiting = [r for r in refs if not bound(custom, NS, r)["spec"].get("clusters")]
    assert len(waiting) == 1, waiting
    name = waiting[0].removesuffix("-pytorchjob")
    running(karmada, rec, custom, clock)
    finish_round(karmada, clock)
    step(karmada, rec, custom)
    assert bound(custom, NS, waiting[0])["spec"].get("clusters")

    described = kubectl(kubeconfig, "describe", "pytorchjob", "-n", NS, name)
    assert described.returncode == 0, described.stderr
    events = described.stdout.partition("Events:")[2]
    lines = [line.split() for line in events.splitlines() if "fleetgate" in line]
    reasons = [line[1] for line in lines]
    assert reasons[:2] == ["Queued", "Admitted"], events
    assert f"queued in {A} at position 1: WaitingForQuota" in events
    assert all(line[0] == "Normal" for line in lines[:2])
