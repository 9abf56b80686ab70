"""The read-only API (``reconciler.api.create_app``) through Flask's test client, over a real
Reconciler's passes on examples/fleet-snapshot.yaml: every job and queue says what
``fleetgate dry-run -o json`` (and ``--explain``) says of the same snapshot, policies and time."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from flask.testing import FlaskClient

from fleetgate.cli import main as fleetgate
from reconciler.api import create_app
from reconciler.loop import Reconciler
from reconciler.metrics import ReconcilerMetrics
from tests.reconciler.snapshot_world import NOW, NOW_TEXT, POLICIES, SNAPSHOT, policies, reconciler

DRY_RUN = ["dry-run", "--policies", str(POLICIES), "--snapshot", str(SNAPSHOT), "--now", NOW_TEXT]


def cli(capsys: pytest.CaptureFixture[str], *extra: str) -> str:
    assert fleetgate([*DRY_RUN, *extra]) == 0
    return capsys.readouterr().out


@pytest.fixture
def world() -> tuple[Reconciler, FlaskClient]:
    rec, _ = reconciler()
    return rec, create_app(rec).test_client()


@pytest.fixture
def client(world: tuple[Reconciler, FlaskClient]) -> FlaskClient:
    rec, client = world
    rec.run_once(NOW)
    return client


def get(client: FlaskClient, url: str, code: int = 200) -> dict[str, Any]:
    response = client.get(url)
    assert response.status_code == code, response.get_data(as_text=True)
    assert response.mimetype == "application/json"
    return response.get_json()


def pages(client: FlaskClient, query: str, limit: int) -> Iterator[dict[str, Any]]:
    url = f"/api/v1/jobs?{query}&limit={limit}"
    while True:
        page = get(client, url)
        yield page
        token = page["metadata"].get("continue")
        if token is None:
            return
        url = f"/api/v1/jobs?{query}&limit={limit}&continue={token}"


def test_each_job_has_the_fields_dry_run_prints_and_the_explain_text(
    client: FlaskClient, capsys: pytest.CaptureFixture[str]
) -> None:
    decisions = json.loads(cli(capsys, "-o", "json"))["decisions"]
    assert {d["action"] for d in decisions} == {"Admit", "Pending"}
    for decision in decisions:
        served = get(client, f"/api/v1/jobs/{decision['binding']}")
        assert {k: served[k] for k in decision} == decision
        assert served["state"] == {"Admit": "admitted", "Pending": "pending"}[decision["action"]]
        template = decision["workload"].split("/", 1)[1]  # the template's ns/name finds it too
        assert get(client, f"/api/v1/jobs/{template}")["binding"] == decision["binding"]
        assert served["explanation"] == cli(capsys, "--explain", template).rstrip("\n")


def test_queues_are_dry_runs_reports_with_the_policy_settings(
    client: FlaskClient, capsys: pytest.CaptureFixture[str]
) -> None:
    reports = json.loads(cli(capsys, "-o", "json"))["queues"]
    body = get(client, "/api/v1/queues")
    assert body["kind"] == "QueueList" and body["metadata"]["decidedAt"] == NOW_TEXT
    assert [q["name"] for q in body["items"]] == [q["name"] for q in reports]
    policy_set = policies()
    for served, report in zip(body["items"], reports, strict=True):
        assert {k: served[k] for k in report} == report
        spec = policy_set.queue(report["name"])
        assert spec is not None
        assert (served["weight"], served["priority"]) == (float(spec.weight), spec.priority)
        assert get(client, f"/api/v1/queues/{report['name']}")["admitted"] == report["admitted"]


def test_a_list_pages_through_every_job_once_in_binding_order(client: FlaskClient) -> None:
    everything = get(client, "/api/v1/jobs")["items"]
    assert len(everything) > 3
    seen: list[str] = []
    for page in pages(client, "", 3):
        assert len(page["items"]) <= 3
        seen += [j["binding"] for j in page["items"]]
        left = page["metadata"].get("remainingItemCount", 0)
        assert left == len(everything) - len(seen)
    assert seen == sorted(seen) == [j["binding"] for j in everything]


def test_filters_by_queue_subtree_and_state(
    client: FlaskClient, capsys: pytest.CaptureFixture[str]
) -> None:
    decisions = json.loads(cli(capsys, "-o", "json"))["decisions"]
    pending = sorted(d["binding"] for d in decisions if d["action"] == "Pending")
    got = [j["binding"] for j in get(client, "/api/v1/jobs?state=pending")["items"]]
    assert got == pending

    research = get(client, "/api/v1/jobs?queue=research")["items"]  # a parent: its children
    assert {j["queue"] for j in research} == {"research-training", "research-experiments"}
    admitted = get(client, "/api/v1/jobs?queue=research-training&state=admitted")["items"]
    # llama-pretrain was admitted before this pass: no decision, still listed as admitted
    assert [(j["binding"], j["action"], j["state"]) for j in admitted] == [
        ("research/llama-pretrain-pytorchjob", None, "admitted")
    ]
    paged = [j for page in pages(client, "queue=research&state=admitted", 1) for j in page["items"]]
    assert paged == [j for j in research if j["state"] == "admitted"]


def test_a_job_admitted_by_an_earlier_pass_is_explained_from_its_binding(
    client: FlaskClient,
) -> None:
    job = get(client, "/api/v1/jobs/research/llama-pretrain")
    assert job["action"] is None and job["reason"] == "Admitted"
    assert job["clusters"] == [{"name": "gpu-east", "replicas": 3}]  # its 3 pods, not 0
    assert job["admittedAt"] < NOW_TEXT
    assert "gpu-east (3 pods)" in job["explanation"]


@pytest.mark.parametrize(
    ("url", "code", "reason"),
    [
        ("/api/v1/jobs/research/nope", 404, "NotFound"),
        ("/api/v1/jobs?queue=nope", 404, "NotFound"),
        ("/api/v1/queues/nope", 404, "NotFound"),
        ("/api/v1/jobs?state=running", 400, "BadRequest"),
        ("/api/v1/jobs?limit=0", 400, "BadRequest"),
        ("/api/v1/jobs?limit=ten", 400, "BadRequest"),
        ("/api/v1/jobs?continue=%21%21not-a-token", 400, "BadRequest"),
        ("/api/v1/nothing-here", 404, "NotFound"),
    ],
)
def test_mistakes_get_a_kubernetes_status(
    client: FlaskClient, url: str, code: int, reason: str
) -> None:
    status = get(client, url, code)
    assert status["kind"] == "Status" and status["status"] == "Failure"
    assert (status["code"], status["reason"]) == (code, reason)
    assert status["message"]


def test_a_continue_token_is_refused_with_other_parameters(client: FlaskClient) -> None:
    token = get(client, "/api/v1/jobs?limit=1")["metadata"]["continue"]
    status = get(client, f"/api/v1/jobs?limit=1&state=pending&continue={token}", 400)
    assert "state" in status["message"]


def test_writes_are_not_allowed(client: FlaskClient) -> None:
    response = client.post("/api/v1/jobs", json={})
    assert response.status_code == 405
    assert response.get_json()["reason"] == "MethodNotAllowed"


def test_ready_once_synced_and_after_one_pass(world: tuple[Reconciler, FlaskClient]) -> None:
    rec, client = world
    assert client.get("/healthz").status_code == 200
    assert client.get("/readyz").status_code == 503
    assert get(client, "/api/v1/queues", 503)["reason"] == "ServiceUnavailable"
    rec.informers.synced = False  # type: ignore[attr-defined]
    rec.run_once(NOW)
    assert client.get("/readyz").status_code == 503
    rec.informers.synced = True  # type: ignore[attr-defined]
    assert client.get("/readyz").status_code == 200


def test_metrics_are_served_and_updated_once_per_pass() -> None:
    rec, _ = reconciler()
    metrics = ReconcilerMetrics().attach(rec)  # as `fleetgate serve` may do before mounting
    client = create_app(rec, metrics).test_client()
    rec.run_once(NOW)
    response = client.get("/metrics")
    assert response.status_code == 200 and response.mimetype == "text/plain"
    text = response.get_data(as_text=True)
    assert 'fleetgate_pending_jobs{queue="research-training",reason="BlockedByHead"} 1.0' in text
    assert "fleetgate_reconcile_pass_duration_seconds_count 1.0" in text  # attached once


def test_the_view_follows_the_latest_pass(world: tuple[Reconciler, FlaskClient]) -> None:
    rec, client = world
    rec.run_once(NOW)
    before = get(client, "/api/v1/jobs/research/vit-probe")
    assert before["state"] == "admitted" and before["action"] == "Admit"
    later = NOW.replace(hour=11)
    rec.run_once(later)
    assert get(client, "/api/v1/queues")["metadata"]["decidedAt"] == "2025-03-10T11:00:00Z"


def test_a_follower_answers_from_its_own_caches_without_a_pass(
    world: tuple[Reconciler, FlaskClient],
) -> None:
    # catches: a follower answering 503, so that a Service over every replica failed one
    # request in N (issue 29, item 2)
    rec, client = world
    rec.gate = lambda: False  # leader election: another replica leads, this one runs no pass
    assert client.get("/readyz").status_code == 200
    follower = get(client, "/api/v1/jobs")
    assert rec.passes == 0 and follower["items"]  # no pass ran, nothing was written
    assert get(client, "/api/v1/jobs/research/vit-probe")["state"] == "admitted"
    rec.gate = None  # it leads now: its own pass, on the same caches, says the same
    rec.run_once(NOW)
    leader = get(client, "/api/v1/jobs")

    def said(items: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
        return [(i["binding"], i["state"], i["reason"]) for i in items]

    assert said(follower["items"]) == said(leader["items"])
    rec.gate = lambda: False
    rec.informers.synced = False  # type: ignore[attr-defined]
    assert client.get("/readyz").status_code == 503
    assert get(client, "/api/v1/jobs", 503)["reason"] == "ServiceUnavailable"
