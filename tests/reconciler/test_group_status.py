"""A member's co-admission group in the read-only API (issue 21): ``/api/v1/jobs`` and
``/api/v1/jobs/NS/NAME`` show its ``group`` with the fields ``fleetgate dry-run -o json`` gives
(name, size, min, present, state), also once the group was admitted by an earlier pass; and the
Events say when a group is admitted or rolled back. Over examples/hyperjob/snapshot.yaml."""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

import pytest
from flask.testing import FlaskClient

from engine import annotations as ann
from engine.enforce import groupplan
from fleetgate.cli import main as fleetgate
from reconciler.api import create_app
from tests.conftest import REPO
from tests.reconciler import test_group_enforce as enforce
from tests.reconciler import test_requeue_e2e as e2e
from tests.reconciler.snapshot_world import NOW, NOW_TEXT, policies, reconciler, snapshot_objects

# the sandbox fixtures of test_requeue_e2e.py, for the Events
bounded, clock, core, custom, faults, karmada, rec = (
    e2e.bounded, e2e.clock, e2e.core, e2e.custom, e2e.faults, e2e.karmada, e2e.rec
)  # fmt: skip
NS = "research"
HYPERJOB = REPO / "examples" / "hyperjob"
SNAPSHOT = HYPERJOB / "snapshot.yaml"
FINETUNE = ("research/llm-finetune-tuner-0-job", "research/llm-finetune-tuner-1-job")
GROUP = "HyperJob/research/llm-finetune"


def dry_run(capsys: pytest.CaptureFixture[str]) -> dict[str, dict[str, Any]]:
    argv = ["dry-run", "--policies", str(HYPERJOB / "policies"), "--snapshot", str(SNAPSHOT)]
    assert fleetgate([*argv, "--now", NOW_TEXT, "-o", "json"]) == 0
    return {d["binding"]: d for d in json.loads(capsys.readouterr().out)["decisions"]}


def served(objects: list[tuple[str, Mapping[str, Any]]]) -> FlaskClient:
    rec, _ = reconciler(objects, policies(HYPERJOB / "policies"))
    rec.run_once(NOW)
    return create_app(rec).test_client()


def get(client: FlaskClient, url: str) -> dict[str, Any]:
    response = client.get(url)
    assert response.status_code == 200, response.get_data(as_text=True)
    return response.get_json()


def placed(decided: Mapping[str, dict[str, Any]]) -> list[tuple[str, Mapping[str, Any]]]:
    """The snapshot after the pass that admitted llm-finetune: its members' bindings placed
    where the dry run put them, with the admission's record."""
    objects = []
    for source, obj in snapshot_objects(SNAPSHOT):
        items = obj.get("items") if obj.get("kind") == "List" else None
        for item in items if items is not None else [obj]:
            meta = item.get("metadata") or {}
            ref = f"{meta.get('namespace')}/{meta.get('name')}"
            if item.get("kind") == "ResourceBinding" and ref in FINETUNE:
                item = copy.deepcopy(item)
                names = [c["name"] for c in decided[ref]["clusters"]]
                item["spec"]["clusters"] = decided[ref]["clusters"]
                item["spec"].pop("suspension", None)
                item["metadata"]["annotations"] |= {
                    ann.ADMITTED_AT: "2025-03-10T09:30:00Z",
                    ann.ADMITTED_TO: ",".join(names),
                    ann.ADMITTED_GROUP: GROUP,
                    ann.ADMITTED_GROUP_MIN: "2",
                }
            objects.append((source, item))
    return objects


def test_each_member_shows_its_group_as_dry_run_does(capsys: pytest.CaptureFixture[str]) -> None:
    decided = dry_run(capsys)
    client = served(snapshot_objects(SNAPSHOT))
    listed = {j["binding"]: j for j in get(client, "/api/v1/jobs")["items"]}
    grouped = {ref: d["group"] for ref, d in decided.items() if "group" in d}
    assert len(grouped) == 7  # every job of the example is in a group
    for ref, group in grouped.items():
        assert listed[ref]["group"] == group
        assert get(client, f"/api/v1/jobs/{ref}")["group"] == group


def test_a_member_admitted_by_an_earlier_pass_shows_its_group_running(
    capsys: pytest.CaptureFixture[str],
) -> None:
    client = served(placed(dry_run(capsys)))
    running = {"name": GROUP, "size": 2, "min": 2, "present": 2, "state": "Running"}
    listed = {j["binding"]: j for j in get(client, "/api/v1/jobs")["items"]}
    for ref in FINETUNE:
        job = get(client, f"/api/v1/jobs/{ref}")
        assert job["action"] is None and job["reason"] == "Admitted"  # by the earlier pass
        assert job["group"] == running
        assert listed[ref]["group"] == running


# -- Events, end to end through the sandbox (the fixtures of test_requeue_e2e.py) ---------------


def test_events_name_the_group_when_admitted_and_when_rolled_back(
    custom, core, karmada, rec, clock, faults
):
    enforce.submit_member(custom, "a")
    enforce.submit_member(custom, "b")
    e2e.step(karmada, rec, custom, clock)
    for name in ("a", "b"):
        (cluster,) = e2e.clusters_of(custom, name)
        (admitted,) = [m for reason, m in e2e.events(core, name) if reason == "Admitted"]
        # the cycle's message says where once: not "admitted to X: admitted to X with …"
        assert admitted == f"admitted to {cluster} with its group {enforce.GROUP} (2 of 2 members)"
    e2e.step(karmada, rec, custom, clock)  # both run

    faults.fail_job(NS, "a", "NCCL watchdog timeout")
    clock.advance(10)
    e2e.step(karmada, rec, custom, clock)
    (rolled,) = [m for reason, m in e2e.events(core, "b") if reason == groupplan.ROLLED_BACK]
    assert rolled.startswith(f"group {enforce.GROUP}: 1 of at least 2 members placed"), rolled
