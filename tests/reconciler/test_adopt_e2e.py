"""A binding Karmada placed while fleetgate's webhook was down (a fail-open setup: the API server
let it through unheld) is adopted by the reconciler's next pass, without waiting for anyone to
update it: from that pass on it counts toward its queue's usage (issue 29, item 7, part b).

The HTTPS sandbox, Karmada's controllers over examples/fleet.yaml, the real ``kubernetes``
client, fleetgate's real webhook registered only once the first job is placed, and the
reconciler over policies/ on a fake clock (as in test_loop.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import kubernetes
import pytest

from engine import annotations as ann
from engine.cycle.reasons import Action
from engine.members import Fleet, load_fleet
from sandbox.karmada import KarmadaControllers
from sandbox.server import Sandbox
from tests.conftest import REPO
from tests.reconciler.conftest import time_limit
from tests.reconciler.test_loop import (
    NS,
    Clock,
    binding,
    caught_up,
    eventually,
    seed,
    started_reconciler,
)
from tests.reconciler.test_requeue_e2e import submit
from tests.sandbox.test_webhooks import fleetgate_webhook, register

QUEUE = "research-training"  # max 48 GPUs (policies/queues.yaml)


@pytest.fixture(autouse=True)
def bounded() -> Iterator[None]:
    with time_limit(60):
        yield


@pytest.fixture
def custom(api_client: kubernetes.client.ApiClient) -> kubernetes.client.CustomObjectsApi:
    return kubernetes.client.CustomObjectsApi(api_client)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def unguarded(
    sandbox: Sandbox, api_client: kubernetes.client.ApiClient, clock: Clock
) -> Iterator[KarmadaControllers]:
    """The research namespace, its PriorityClasses and policy, and Karmada's controllers over
    examples/fleet.yaml; no webhook registered."""
    seed(api_client)
    fleet = Fleet(load_fleet(REPO / "examples" / "fleet.yaml"), clock())
    karmada = KarmadaControllers(sandbox.store, fleet, clock)
    try:
        karmada.run_once()
        yield karmada
    finally:
        karmada.stop()


def test_a_binding_placed_while_the_webhook_was_down_counts_from_the_next_pass(
    custom, api_client, unguarded: KarmadaControllers, clock: Clock, tmp_path: Path
):
    karmada = unguarded
    submit(custom, "unseen", workers=3)  # 4 pods of 8 GPUs: 32 of the queue's 48

    def placed() -> bool:
        karmada.run_once(clock())
        return bool(binding(custom, "unseen")["spec"].get("clusters"))

    eventually(placed)
    before = binding(custom, "unseen")
    assert ann.MANAGED not in (before["metadata"].get("labels") or {})
    (cluster,) = [c["name"] for c in before["spec"]["clusters"]]

    with fleetgate_webhook(tmp_path / "tls") as served:  # the webhook is back
        register(api_client, *served)
        with started_reconciler(api_client, clock) as rec:
            submit(custom, "later", workers=2)  # 24 GPUs: 32 + 24 > 48
            karmada.run_once(clock())
            held = binding(custom, "later")
            assert held["metadata"]["labels"][ann.MANAGED] == "true"
            caught_up(rec, custom)
            summary = rec.run_once()
            assert summary.errors == 0, summary

            result = rec.last_result
            assert result is not None
            (report,) = [q for q in result.queues if q.name == QUEUE]
            assert report.admitted == 1
            assert report.to_json()["usage"]["nvidia.com/gpu"] == 32  # the adopted job alone
            later = result.decision(f"{NS}/later-pytorchjob")
            assert later is not None and later.action != Action.ADMIT, later
            assert "48" in later.message, later.message  # the queue's max, not room
            assert not binding(custom, "later")["spec"].get("clusters")

            # the adoption is written where people look, and stays where it runs
            adopted = binding(custom, "unseen")
            notes = adopted["metadata"]["annotations"]
            assert adopted["metadata"]["labels"][ann.MANAGED] == "true"
            assert notes[ann.ADMITTED_TO] == cluster
            assert ann.ADMITTED_AT in notes
            assert [c["name"] for c in adopted["spec"]["clusters"]] == [cluster]
            assert adopted["spec"]["suspension"]["scheduling"] is True

            caught_up(rec, custom)  # the next pass decides the same: nothing to adopt again
            again = rec.run_once()
            assert (again.errors, again.conflicts) == (0, 0), again
            assert ("research/unseen-pytorchjob", "Adopted") not in again.applied_to
            assert not binding(custom, "later")["spec"].get("clusters")
