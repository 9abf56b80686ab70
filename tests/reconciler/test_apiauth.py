"""The direct port's delegated authentication and authorization (``reconciler.apiauth``): a
request maps to the RBAC attributes the visibility API has behind the API server, and the
answers of TokenReview and SubjectAccessReview decide (here a stand-in gives them; the
sandbox's own are used end to end in tests/reconciler/test_visibility_e2e.py)."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.api import create_app
from reconciler.apiauth import Attributes, attributes_of
from reconciler.visibility import Caller
from tests.reconciler.snapshot_world import NOW, reconciler


class Answers:
    """TokenReview and SubjectAccessReview as an API server with two tenants would answer."""

    def __init__(self) -> None:
        self.asked: list[Attributes] = []
        self.down = False

    def authenticate(self, token: str) -> Caller | None:
        if self.down:
            raise OSError("connection refused")
        return {"tok-alice": Caller("alice", ("research-team",))}.get(token)

    def allowed(self, caller: Caller, asked: Attributes) -> bool:
        self.asked.append(asked)
        return asked.resource == "jobs" and asked.namespace == "research"


@pytest.mark.parametrize(
    ("path", "query", "expected"),
    [
        ("/api/v1/jobs", {}, Attributes("list", "jobs")),
        ("/api/v1/jobs", {"namespace": "research"}, Attributes("list", "jobs", "research")),
        ("/api/v1/jobs/research/first", {}, Attributes("get", "jobs", "research", "first")),
        ("/api/v1/queues", {}, Attributes("list", "queues")),
        ("/api/v1/queues/prod-inference", {}, Attributes("get", "queues", name="prod-inference")),
        ("/api/v1/other", {}, None),
    ],
)
def test_each_read_has_the_rbac_attributes_of_the_visibility_api(
    path: str, query: dict[str, str], expected: Attributes | None
) -> None:
    assert attributes_of(path, query) == expected


@pytest.fixture
def served() -> tuple[Any, Answers]:
    rec, _ = reconciler()
    rec.run_once(NOW)
    answers = Answers()
    return create_app(rec, auth=answers).test_client(), answers  # type: ignore[arg-type]


def test_a_tenant_reads_its_namespace_and_nothing_else(served: tuple[Any, Answers]) -> None:
    client, answers = served
    alice = {"Authorization": "Bearer tok-alice"}
    own = client.get("/api/v1/jobs?namespace=research", headers=alice)
    assert own.status_code == 200
    refs = [i["binding"] for i in own.get_json()["items"]]
    assert refs and all(r.startswith("research/") for r in refs)
    every = client.get("/api/v1/jobs", headers=alice)
    assert every.status_code == 403
    assert every.get_json()["message"] == (
        'jobs.visibility.fleetgate.io is forbidden: User "alice" cannot list resource "jobs" '
        'in API group "visibility.fleetgate.io"'
    )
    assert client.get("/api/v1/queues", headers=alice).status_code == 403
    assert answers.asked[-1] == Attributes("list", "queues")


def test_without_a_known_token_nothing_but_the_probes_and_metrics(
    served: tuple[Any, Answers],
) -> None:
    client, answers = served
    for headers in ({}, {"Authorization": "Bearer nope"}, {"Authorization": "Basic eDp5"}):
        answer = client.get("/api/v1/jobs?namespace=research", headers=headers)
        assert answer.status_code == 401 and answer.get_json()["reason"] == "Unauthorized"
    for open_path in ("/healthz", "/readyz", "/metrics"):
        assert client.get(open_path).status_code == 200
    answers.down = True  # the API server cannot be asked: refused, and said why
    down = client.get("/api/v1/jobs", headers={"Authorization": "Bearer tok-alice"})
    assert down.status_code == 503 and "connection refused" in down.get_json()["message"]
