"""POST /validate/workloads: AdmissionPolicies in each enforcement mode, and the built-in checks.

The example policy set has one policy per mode: ``gpu-gang-within-fleet`` (Deny, more than 64
GPUs), ``gpu-jobs-name-a-queue`` (Warn, a GPU job in the default queue) and ``team-label``
(DryRun, no ``team`` label). The fleet is ``examples/fleet-snapshot.yaml``: 32 GPUs on each of
gpu-east and gpu-west.
"""

from __future__ import annotations

import copy
import re

import pytest
import yaml

from tests.conftest import policy_doc
from tests.webhook.helpers import example, review
from webhook.app import VERSION_HEADER

URL = "/validate/workloads"


def pytorchjob(workers: int = 2, gpus: int = 8, **labels: str) -> dict:
    """llama-pretrain (research-training, team llm): a master and ``workers`` workers."""
    job = example("PyTorchJob", "llama-pretrain")
    for key in ("uid", "resourceVersion", "creationTimestamp", "generation"):
        job["metadata"].pop(key)
    job.pop("status")
    job["metadata"]["labels"].update(labels)
    specs = job["spec"]["pytorchReplicaSpecs"]
    specs["Worker"]["replicas"] = workers
    for role in specs.values():
        role["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = str(
            gpus
        )
    return job


def validate(client, obj, *, operation="CREATE", old=None):
    sent = review(obj, operation=operation, old=old)
    reply = client.post(URL, json=sent)
    assert reply.status_code == 200, reply.text
    response = reply.get_json()["response"]
    assert response["uid"] == sent["request"]["uid"]
    assert "patch" not in response
    return response, reply


def metric(client, name: str, **labels: str) -> float:
    text = client.get("/metrics").text
    selector = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    match = re.search(rf"^{re.escape(name)}\{{{re.escape(selector)}\}} (\S+)$", text, re.M)
    return float(match.group(1)) if match else 0.0


def add_policy(policy_dir, holder, name: str, spec: str) -> None:
    (policy_dir / f"{name}.yaml").write_text(policy_doc("AdmissionPolicy", name, spec))
    assert holder.reload(), holder.status.errors


def test_a_job_that_meets_every_policy_is_allowed_silently(client, holder):
    response, reply = validate(client, pytorchjob())
    assert response["allowed"] is True
    assert "warnings" not in response
    assert "status" not in response
    assert response["auditAnnotations"]["queue"] == "research-training"
    assert reply.headers[VERSION_HEADER] == holder.current.version


def test_deny_refuses_with_403_and_the_policy_message(client):
    response, _ = validate(client, pytorchjob(workers=8))  # 9 pods x 8 GPUs = 72 > 64
    assert response["allowed"] is False
    status = response["status"]
    assert status["code"] == 403
    assert (
        "gpu-gang-within-fleet: job asks for 72 GPUs in one gang; the fleet has 64"
        in (status["message"])
    )
    assert "builtin:fit: " in status["message"]  # every refusal is named, built-ins first
    assert status["reason"] == "Forbidden"  # the first refusal's reason
    assert status["message"].startswith("fleetgate denied PyTorchJob/research/llama-pretrain: ")
    assert metric(client, "fleetgate_webhook_denials_total", policy="gpu-gang-within-fleet") == 1
    assert metric(client, "fleetgate_webhook_requests_total", endpoint=URL, result="denied") == 1


def test_warn_allows_with_a_warning(client):
    job = pytorchjob()
    job["metadata"]["labels"].pop("fleetgate.io/queue")
    job["metadata"]["namespace"] = "team-vision"  # no queue hint: the default queue
    response, _ = validate(client, job)
    assert response["allowed"] is True
    assert response["auditAnnotations"]["queue"] == "default"
    [warning] = response["warnings"]
    assert warning.startswith("gpu-jobs-name-a-queue: GPU job lands in the small default queue")
    assert metric(client, "fleetgate_webhook_warnings_total", policy="gpu-jobs-name-a-queue") == 1
    assert metric(client, "fleetgate_webhook_requests_total", endpoint=URL, result="warned") == 1


def test_dry_run_allows_and_only_counts(client):
    job = pytorchjob()
    job["metadata"]["labels"].pop("team")
    response, _ = validate(client, job)
    assert response["allowed"] is True
    assert "warnings" not in response
    assert metric(client, "fleetgate_webhook_dryrun_violations_total", policy="team-label") == 1
    assert metric(client, "fleetgate_webhook_requests_total", endpoint=URL, result="allowed") == 1


def test_message_expression_and_every_failed_deny_are_reported(make_app, policy_dir, holder):
    add_policy(
        policy_dir,
        holder,
        "small-masters",
        """
        enforcement: Deny
        validations:
          - expression: job.components.all(c, c.name != "Master" || c.requests["cpu"] <= 16.0)
            messageExpression: >-
              "master asks for " + string(job.components[0].requests["cpu"]) + " cores"
          - expression: job.name.size() < 5
            message: name too long
            reason: Invalid
        """,
    )
    response, _ = validate(make_app().test_client(), pytorchjob())
    message = response["status"]["message"]
    assert "small-masters: master asks for 48.0 cores" in message
    assert "small-masters: name too long" in message
    assert response["status"]["reason"] == "Forbidden"  # the first failed check's reason


@pytest.mark.parametrize("enforcement", ["Deny", "Warn", "DryRun"])
def test_failure_policy_fail_is_a_failed_check_under_each_enforcement(
    make_app, policy_dir, holder, enforcement
):
    add_policy(
        policy_dir,
        holder,
        "broken",
        f"""
        enforcement: {enforcement}
        failurePolicy: Fail
        validations:
          - expression: object.spec.nothing.here == 1
            message: unreachable
        """,
    )
    client = make_app().test_client()
    response, _ = validate(client, pytorchjob())
    assert metric(client, "fleetgate_webhook_cel_errors_total", policy="broken") == 1
    if enforcement == "Deny":
        assert response["allowed"] is False
        assert (
            "broken: expression failed: spec.validations[0].expression:"
            in (response["status"]["message"])
        )
        assert "nothing" in response["status"]["message"]
    elif enforcement == "Warn":
        assert response["allowed"] is True
        assert response["warnings"][0].startswith("broken: expression failed:")
    else:
        assert response["allowed"] is True
        assert metric(client, "fleetgate_webhook_dryrun_violations_total", policy="broken") == 1


def test_failure_policy_ignore_allows_with_a_warning(make_app, policy_dir, holder):
    add_policy(
        policy_dir,
        holder,
        "lenient",
        """
        failurePolicy: Ignore
        match: object.spec.nothing.here == 1
        validations:
          - expression: "false"
            message: unreachable
        """,
    )
    response, _ = validate(make_app().test_client(), pytorchjob())
    assert response["allowed"] is True
    [warning] = response["warnings"]
    assert warning.startswith("lenient: not evaluated (failurePolicy Ignore): spec.match:")


# -- built-in checks ----------------------------------------------------------------------------


def test_a_queue_that_does_not_exist_is_refused(client):
    response, _ = validate(client, pytorchjob(**{"fleetgate.io/queue": "reserch-training"}))
    assert response["allowed"] is False
    message = response["status"]["message"]
    assert "builtin:queue: queue 'reserch-training' does not exist; leaf queues: " in message
    assert "research-training" in message
    assert "research," not in message  # a parent queue is not offered


def test_a_queue_name_of_markup_and_escapes_is_refused_short_and_escaped(client):
    job = pytorchjob()
    del job["metadata"]["labels"]["fleetgate.io/queue"]  # the Volcano annotation decides
    hostile = "<i>\n\x1b[2J" + "q" * 200_000
    job["metadata"].setdefault("annotations", {})["scheduling.volcano.sh/queue-name"] = hostile
    response, _ = validate(client, job)
    assert response["allowed"] is False
    message = response["status"]["message"]
    assert "is not a DNS-1123 label" in message and "\\x1b[2J" in message
    assert len(message) < 500 and "\n" not in message and "\x1b" not in message


def test_a_parent_queue_is_refused(client):
    response, _ = validate(client, pytorchjob(**{"fleetgate.io/queue": "research"}))
    assert response["allowed"] is False
    assert (
        "queue 'research' is a parent queue (children: research-experiments, research-training)"
        in response["status"]["message"]
    )


def test_a_gang_larger_than_any_cluster_is_refused_with_numbers(client):
    response, _ = validate(client, pytorchjob(workers=4))  # 5 x 8 = 40 GPUs on one cluster
    assert response["allowed"] is False
    message = response["status"]["message"]
    assert "builtin:fit: the job can never start on this fleet:" in message
    assert "must start on one cluster and needs" in message
    assert "nvidia.com/gpu 40" in message
    assert "gpu-east has nvidia.com/gpu 32 < 40" in message
    assert "cpu-spot has nvidia.com/gpu 0 < 40" in message


def test_a_pod_larger_than_any_cluster_is_refused(client):
    response, _ = validate(client, pytorchjob(gpus=33))
    message = response["status"]["message"]
    assert "one Master pod needs" in message
    assert "nvidia.com/gpu 33" in message


def test_a_gang_that_fits_one_cluster_is_allowed(client):
    response, _ = validate(client, pytorchjob(workers=3))  # 4 x 8 = 32 = gpu-east's allocatable
    assert response["allowed"] is True


def test_without_fleet_data_the_fit_check_is_skipped(make_app):
    response, _ = validate(make_app(fleet=None).test_client(), pytorchjob(workers=4))
    assert response["allowed"] is True


def test_a_template_whose_demand_cannot_be_read_is_invalid(client):
    job = pytorchjob()
    resources = job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    resources["resources"]["requests"]["memory"] = "640GB"
    response, _ = validate(client, job)
    assert response["allowed"] is False
    assert response["status"]["code"] == 422
    assert "Worker" in response["status"]["message"]
    assert "memory" in response["status"]["message"]


def test_an_update_that_leaves_spec_and_labels_alone_is_always_allowed(client):
    old = pytorchjob(workers=8)  # violates the Deny policy (written before it existed)
    new = copy.deepcopy(old)
    new["metadata"]["finalizers"] = ["example.com/cleanup"]
    response, _ = validate(client, new, operation="UPDATE", old=old)
    assert response["allowed"] is True
    assert response["auditAnnotations"]["decision"] == "spec-unchanged"
    changed = copy.deepcopy(new)
    changed["spec"]["runPolicy"]["backoffLimit"] = 5
    assert validate(client, changed, operation="UPDATE", old=old)[0]["allowed"] is False


def test_karmadas_claim_of_a_template_is_allowed_without_judging_it_again(client):
    old = pytorchjob(workers=8)  # violates the Deny policy (written before it existed)
    claimed = copy.deepcopy(old)
    claimed["metadata"]["labels"]["propagationpolicy.karmada.io/permanent-id"] = "5f1c"
    claimed["metadata"].setdefault("annotations", {}).update(
        {
            "propagationpolicy.karmada.io/name": "research-gpu",
            "propagationpolicy.karmada.io/namespace": "research",
        }
    )
    response, _ = validate(client, claimed, operation="UPDATE", old=old)
    assert response["allowed"] is True
    assert response["auditAnnotations"]["decision"] == "karmada-claim"
    # a claim moved to a ClusterPropagationPolicy, claim keys removed: still Karmada's
    moved = copy.deepcopy(old)
    moved["metadata"]["labels"]["clusterpropagationpolicy.karmada.io/permanent-id"] = "9a0b"
    response, _ = validate(client, moved, operation="UPDATE", old=claimed)
    assert response["auditAnnotations"]["decision"] == "karmada-claim"
    # any other label change alongside the claim is judged again, like a CREATE
    relabelled = copy.deepcopy(claimed)
    relabelled["metadata"]["labels"]["team"] = "vision"
    assert validate(client, relabelled, operation="UPDATE", old=old)[0]["allowed"] is False
    lookalike = copy.deepcopy(old)
    lookalike["metadata"]["labels"]["x.propagationpolicy.karmada.io/id"] = "1"
    assert validate(client, lookalike, operation="UPDATE", old=old)[0]["allowed"] is False


@pytest.mark.parametrize(
    ("kind", "name"),
    [
        ("Job", "tokenizer-stats"),
        ("Job", "summarize-backfill"),
        ("SparkApplication", "clickstream-agg"),
        ("MPIJob", "llama-finetune"),
        ("RayJob", "vit-probe"),
        ("PyTorchJob", "resnet-ablation"),
    ],
)
def test_the_example_jobs_are_allowed(client, kind, name):
    response, _ = validate(client, example(kind, name))
    assert response["allowed"] is True, response


def generated(job: dict, prefix: str) -> dict:
    """``job`` as ``kubectl create`` sends it from a manifest with generateName: no name yet."""
    del job["metadata"]["name"]
    job["metadata"]["generateName"] = prefix
    return job


def test_a_create_named_by_generate_name_is_judged_like_any_job(client, policy_dir, holder):
    add_policy(
        policy_dir,
        holder,
        "names",
        """
        enforcement: Warn
        validations:
          - expression: "false"
            messageExpression: >-
              "job.name " + job.name + ", object.metadata.generateName "
              + object.metadata.generateName + ("name" in object.metadata ? ", named" : ", no name")
        """,
    )
    sent = generated(pytorchjob(), "llama-pretrain-")
    assert review(sent)["request"]["name"] == ""
    response, _ = validate(client, sent)
    assert response["allowed"] is True
    assert response["auditAnnotations"]["queue"] == "research-training"
    assert response["warnings"] == [
        "names: job.name llama-pretrain-*, object.metadata.generateName llama-pretrain-, no name"
    ]


def test_a_denied_job_named_by_generate_name_is_named_with_a_star(client):
    response, _ = validate(client, generated(pytorchjob(workers=8), "llama-pretrain-"))
    assert response["allowed"] is False
    assert response["status"]["code"] == 403
    assert response["status"]["message"].startswith(
        "fleetgate denied PyTorchJob/research/llama-pretrain-*: "
    )
    assert "72 GPUs" in response["status"]["message"]


def test_a_create_with_neither_name_nor_generate_name_is_unreadable(client):
    job = pytorchjob()
    del job["metadata"]["name"]
    response, _ = validate(client, job)
    assert response["allowed"] is False
    assert response["status"]["code"] == 422
    assert "metadata.name: required (or metadata.generateName)" in response["status"]["message"]


def test_a_namespace_its_queue_does_not_admit_is_denied_with_the_cycles_words(
    make_app, holder, policy_dir
):
    """research-training admits only namespaces labelled tenant=llm. llama-pretrain, of
    namespace research, is denied while research's labels (from the lookup: the reconciler's
    watch of Namespaces under ``serve``) do not match, in the words of the cycle's
    QueueNotAllowed; allowed once they do; and not checked while they are not known."""
    queues = policy_dir / "queues.yaml"
    docs = list(yaml.safe_load_all(queues.read_text()))
    for doc in docs:
        if doc["metadata"]["name"] == "research-training":
            doc["spec"]["namespaceSelector"] = {"matchLabels": {"tenant": "llm"}}
    queues.write_text(yaml.safe_dump_all(docs))
    assert holder.reload(), holder.status.errors
    name = {"kubernetes.io/metadata.name": "research"}  # as the API server labels it
    known: dict[str, dict[str, str]] = {"research": {"tenant": "vision", **name}}
    client = make_app(namespaces=known.get).test_client()

    response, _ = validate(client, pytorchjob())
    assert not response["allowed"]
    assert response["status"]["message"].endswith(
        "builtin:queue: namespace research may not use queue research-training: its labels do "
        "not match its spec.namespaceSelector"
    ), response["status"]["message"]
    known["research"] = {"tenant": "llm", **name}
    assert validate(client, pytorchjob())[0]["allowed"]
    known.clear()  # not seen yet: the cycle decides
    assert validate(client, pytorchjob())[0]["allowed"]
