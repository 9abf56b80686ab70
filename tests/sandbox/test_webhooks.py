"""The sandbox calls admission webhooks as kube-apiserver does: fleetgate's real webhook over TLS.

fleetgate's webhook (the Flask app on cheroot, HTTPS with a CA made for the test) is registered
through the ``kubernetes`` client with deploy/karmada-apiserver's configurations, their ``url``
and ``caBundle`` pointed at it; every write then goes through the client too.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import yaml
from kubernetes.client.rest import ApiException

from engine.policy.reload import PolicyHolder
from sandbox import tls, webhookcall
from sandbox import webhooks as sandbox_webhooks
from tests.conftest import REPO
from tests.waiting import PATIENCE_S
from tests.webhook.helpers import created_binding, example, write_certificates
from webhook.app import create_app
from webhook.fit import Fleet
from webhook.serve import WebhookServer

DEPLOY = REPO / "deploy" / "karmada-apiserver"
MUTATING_NAME = "resourcebindings.fleetgate.io"
VALIDATING_NAME = "workloads.fleetgate.io"
NEVER_S = 10 * PATIENCE_S  # a slow webhook's delay: longer than any test waits


# -- fleetgate's webhook, for real ------------------------------------------------------------


@contextlib.contextmanager
def fleetgate_webhook(directory: Path) -> Iterator[tuple[str, str]]:
    """The webhook on 127.0.0.1 over HTTPS: yields (base URL, caBundle)."""
    cert, key, ca_file, _ = write_certificates(directory)
    holder = PolicyHolder.for_paths([REPO / "policies"])
    assert holder.reload(), holder.status.errors
    fleet, _ = Fleet.from_files([REPO / "examples" / "fleet-snapshot.yaml"])
    server = WebhookServer(create_app(holder, fleet=fleet), "127.0.0.1", 0, tls=(cert, key))
    server.start()
    try:
        host, port = server.address
        yield f"https://{host}:{port}", base64.b64encode(ca_file.read_bytes()).decode()
    finally:
        server.stop()


def configuration(file: str, base_url: str, ca_bundle: str, **changes: Any) -> dict[str, Any]:
    """A deployed webhook configuration pointed at ``base_url``, with ``changes`` per webhook."""
    document = yaml.safe_load((DEPLOY / file).read_text())
    for webhook in document["webhooks"]:
        path = webhook["clientConfig"]["url"].split(":443", 1)[1]
        webhook["clientConfig"] = {"url": base_url + path, "caBundle": ca_bundle}
        webhook.update(changes)
    return document


def register(api: kubernetes.client.ApiClient, base_url: str, ca_bundle: str, **changes: Any):
    admission = kubernetes.client.AdmissionregistrationV1Api(api)
    admission.create_mutating_webhook_configuration(
        configuration("mutatingwebhookconfiguration.yaml", base_url, ca_bundle, **changes)
    )
    admission.create_validating_webhook_configuration(
        configuration("validatingwebhookconfiguration.yaml", base_url, ca_bundle, **changes)
    )


def namespace(core: kubernetes.client.CoreV1Api, name: str) -> None:
    core.create_namespace({"metadata": {"name": name}})


def pytorchjob(workers: int = 2, **labels: str) -> dict[str, Any]:
    """llama-pretrain (research): a master and ``workers`` workers of 8 GPUs each."""
    job = example("PyTorchJob", "llama-pretrain")
    for key in ("uid", "resourceVersion", "creationTimestamp", "generation"):
        job["metadata"].pop(key)
    job.pop("status")
    job["metadata"]["labels"].update(labels)
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = workers
    return job


def create_job(custom: kubernetes.client.CustomObjectsApi, job: dict[str, Any]):
    """(object, headers) of a PyTorchJob created through the client."""
    data, _, headers = custom.create_namespaced_custom_object_with_http_info(
        "kubeflow.org", "v1", job["metadata"]["namespace"], "pytorchjobs", job
    )
    return data, headers


def error_body(error: ApiException) -> dict[str, Any]:
    return json.loads(error.body)


@pytest.fixture
def webhook(tmp_path: Path) -> Iterator[tuple[str, str]]:
    with fleetgate_webhook(tmp_path / "tls") as served:
        yield served


# -- fleetgate's webhook through the sandbox --------------------------------------------------


def test_a_new_binding_comes_back_suspended_and_managed(api_client, core, custom, webhook):
    register(api_client, *webhook)
    namespace(core, "team-data")
    created = custom.create_namespaced_custom_object(
        "work.karmada.io", "v1alpha2", "team-data", "resourcebindings", created_binding()
    )
    assert created["spec"]["suspension"] == {"scheduling": True}
    assert created["metadata"]["labels"]["fleetgate.io/managed"] == "true"
    stored = custom.get_namespaced_custom_object(
        "work.karmada.io", "v1alpha2", "team-data", "resourcebindings", "tokenizer-stats-job"
    )
    assert stored["spec"]["suspension"] == {"scheduling": True}


def test_a_binding_in_an_excluded_namespace_is_not_sent(api_client, core, custom, webhook):
    register(api_client, *webhook)
    namespace(core, "fleetgate-system")  # the namespaceSelector leaves it out
    binding = created_binding()
    binding["metadata"]["namespace"] = "fleetgate-system"
    created = custom.create_namespaced_custom_object(
        "work.karmada.io", "v1alpha2", "fleetgate-system", "resourcebindings", binding
    )
    assert "suspension" not in created["spec"]
    assert "fleetgate.io/managed" not in created["metadata"].get("labels", {})


def test_an_admission_policy_denial_is_a_403_with_fleetgates_message(
    api_client, core, custom, webhook
):
    register(api_client, *webhook)
    namespace(core, "research")
    with pytest.raises(ApiException) as raised:
        create_job(custom, pytorchjob(workers=8))  # 9 pods x 8 GPUs = 72 > 64
    assert raised.value.status == 403
    status = error_body(raised.value)
    assert status["reason"] == "Forbidden"
    assert status["message"].startswith(
        f'admission webhook "{VALIDATING_NAME}" denied the request: '
        "fleetgate denied PyTorchJob/research/llama-pretrain: "
    )
    assert (
        "gpu-gang-within-fleet: job asks for 72 GPUs in one gang; the fleet has 64"
        in (status["message"])
    )
    with pytest.raises(ApiException) as missing:
        custom.get_namespaced_custom_object(
            "kubeflow.org", "v1", "research", "pytorchjobs", "llama-pretrain"
        )
    assert missing.value.status == 404


def test_a_warn_policy_reaches_the_client_in_a_warning_header(api_client, core, custom, webhook):
    register(api_client, *webhook)
    namespace(core, "team-vision")
    job = pytorchjob()
    job["metadata"]["labels"].pop("fleetgate.io/queue")
    job["metadata"]["namespace"] = "team-vision"  # no queue hint: the default queue
    created, headers = create_job(custom, job)
    assert created["metadata"]["name"] == "llama-pretrain"
    warning = headers["Warning"]
    assert warning.startswith('299 - "gpu-jobs-name-a-queue: GPU job lands in the small default')
    assert warning.endswith('"')


def test_failure_policy_with_the_webhook_stopped(api_client, core, custom, tmp_path):
    with fleetgate_webhook(tmp_path / "tls") as (base_url, ca_bundle):
        register(api_client, base_url, ca_bundle)
    namespace(core, "research")  # (namespaces are not sent to fleetgate's webhooks)
    with pytest.raises(ApiException) as raised:
        create_job(custom, pytorchjob())
    assert raised.value.status == 500
    message = error_body(raised.value)["message"]
    assert message.startswith(
        f'Internal error occurred: failed calling webhook "{VALIDATING_NAME}": '
        f'failed to call webhook: Post "{base_url}/validate/workloads?timeout=5s"'
    )

    admission = kubernetes.client.AdmissionregistrationV1Api(api_client)
    ignoring = configuration(
        "validatingwebhookconfiguration.yaml", base_url, ca_bundle, failurePolicy="Ignore"
    )
    ignoring["metadata"]["resourceVersion"] = admission.read_validating_webhook_configuration(
        "fleetgate"
    ).metadata.resource_version
    admission.replace_validating_webhook_configuration("fleetgate", ignoring)
    created, _ = create_job(custom, pytorchjob())
    assert created["metadata"]["name"] == "llama-pretrain"


def test_a_webhook_behind_an_unknown_ca_fails_the_handshake(api_client, core, custom, webhook):
    base_url, _ = webhook
    stranger = base64.b64encode(tls.generate().ca_pem).decode()
    register(api_client, base_url, stranger)
    namespace(core, "team-data")
    with pytest.raises(ApiException) as raised:
        custom.create_namespaced_custom_object(
            "work.karmada.io", "v1alpha2", "team-data", "resourcebindings", created_binding()
        )
    assert raised.value.status == 500
    assert "certificate verify failed" in error_body(raised.value)["message"]


# -- timeoutSeconds, with a webhook that takes its time ---------------------------------------


@contextlib.contextmanager
def slow_webhook(delay: float) -> Iterator[tuple[str, str]]:
    """An HTTPS webhook that waits ``delay`` seconds, then allows: (URL, caBundle)."""
    serving = tls.generate()
    released = threading.Event()

    class Slow(BaseHTTPRequestHandler):
        def log_message(self, *_: Any) -> None:
            pass

        def do_POST(self) -> None:
            review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            released.wait(delay)
            answer = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}
            answer["response"] = {"uid": review["request"]["uid"], "allowed": True}
            data = json.dumps(answer).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            with contextlib.suppress(OSError):  # the caller may have given up already
                self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Slow)
    server.daemon_threads = True
    server.socket = serving.server_context().wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        port = server.server_address[1]
        yield f"https://127.0.0.1:{port}/slow", base64.b64encode(serving.ca_pem).decode()
    finally:
        released.set()
        server.shutdown()
        server.server_close()
        thread.join(5)


def slow_configuration(url: str, ca_bundle: str, failure_policy: str) -> dict[str, Any]:
    webhook = {
        "name": "slow.example.com",
        "admissionReviewVersions": ["v1"],
        "clientConfig": {"url": url, "caBundle": ca_bundle},
        "rules": [
            {
                "operations": ["CREATE"],
                "apiGroups": [""],
                "apiVersions": ["v1"],
                "resources": ["configmaps"],
            }
        ],
        "failurePolicy": failure_policy,
        "sideEffects": "None",
        "timeoutSeconds": 1,
    }
    return {"metadata": {"name": f"slow-{failure_policy.lower()}"}, "webhooks": [webhook]}


@pytest.mark.parametrize("failure_policy", ["Fail", "Ignore"])
def test_timeout_seconds_bounds_a_slow_webhook(api_client, core, failure_policy, monkeypatch):
    bounds: list[float] = []

    def post_review(url: str, review: Any, timeout: float, *rest: Any) -> dict[str, Any]:
        bounds.append(timeout)
        return webhookcall.post_review(url, review, timeout, *rest)

    monkeypatch.setattr(sandbox_webhooks, "post_review", post_review)
    admission = kubernetes.client.AdmissionregistrationV1Api(api_client)
    with slow_webhook(delay=NEVER_S) as (url, ca_bundle):  # answers only once the test ends
        admission.create_validating_webhook_configuration(
            slow_configuration(url, ca_bundle, failure_policy)
        )
        body = {"metadata": {"name": "settings"}, "data": {"a": "b"}}
        if failure_policy == "Fail":
            with pytest.raises(ApiException) as raised:
                core.create_namespaced_config_map("default", copy.deepcopy(body))
            assert raised.value.status == 500
            message = error_body(raised.value)["message"]
            assert 'failed calling webhook "slow.example.com"' in message
            assert message.endswith('?timeout=1s": context deadline exceeded')
        else:
            core.create_namespaced_config_map("default", copy.deepcopy(body))
            assert core.read_namespaced_config_map("settings", "default").data == {"a": "b"}
    assert bounds == [1.0]  # the one call was bounded by timeoutSeconds, and gave up
