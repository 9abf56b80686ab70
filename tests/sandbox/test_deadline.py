"""The request deadline, as kube-apiserver's ``WithRequestDeadline`` gives it: ``?timeout=``
bounds when a write may still be stored; past it, 504 Timeout and nothing is stored.

Seen on 2026-11-29 (``tests/reconciler/test_kill.py`` on a machine running three times the work
it has cores for): a leader sent six patches inside its lease, the sandbox committed them four
seconds later, after another replica had taken the Lease. The sandbox ignored ``timeout``, so
no client could bound that. The stall is made exact here: a latency fault holds the request in
the server until its deadline has passed (``Faults(sleep=…)``), with no timing in the test."""

from __future__ import annotations

import json
import time
from typing import Any

import kubernetes
import pytest

from sandbox import deadline
from sandbox.faults import Faults
from sandbox.server import Sandbox
from tests.waiting import eventually

CONFIGMAPS = "/api/v1/namespaces/default/configmaps"


def stall_past_the_deadline(_seconds: float) -> None:
    """A latency fault's sleep: hold the request until its own deadline has passed."""
    until = deadline.current()
    assert until is not None, "a request served over HTTP has a deadline"
    eventually(lambda: time.monotonic() > until, what="the request's deadline to pass")


@pytest.fixture
def stalled(sandbox: Sandbox) -> Faults:
    return Faults(seed=1, sleep=stall_past_the_deadline).attach(sandbox)


def call(
    core: kubernetes.client.CoreV1Api,
    method: str,
    path: str,
    body: Any = None,
    timeout: str | None = None,
) -> tuple[int, dict[str, Any]]:
    """(status, decoded body) of one request through the real client, ``?timeout=`` added."""
    headers = {"Accept": "application/json"}
    if method == "PATCH":
        headers["Content-Type"] = "application/merge-patch+json"
    elif body is not None:
        headers["Content-Type"] = "application/json"
    client = core.api_client
    request = client.param_serialize(
        method,
        path,
        query_params=[("timeout", timeout)] if timeout is not None else [],
        header_params=headers,
        body=body,
        auth_settings=["BearerToken"],
    )
    answer = client.call_api(*request)
    answer.read()
    return answer.status, json.loads(answer.data or b"{}")


def configmap(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "data": {"k": "v"}}


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("1500ms", 1.5),
        ("2s", 2.0),
        ("1m30s", 90.0),
        ("1h", 3600.0),
        (".5s", 0.5),
        ("1.5s", 1.5),
        ("250us", 0.00025),
        ("0", 0.0),
        ("-2s", -2.0),
        ("+3s", 3.0),
    ],
)
def test_timeouts_parse_as_go_durations(text: str, seconds: float) -> None:
    assert deadline.parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "5", "s", "1x", "soon", "1s5", "--1s", ".", "1.5"])
def test_what_go_does_not_parse_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="invalid duration"):
        deadline.parse_duration(text)


def test_the_deadline_is_the_asked_timeout_within_the_servers_maximum() -> None:
    assert deadline.deadline_of({"timeout": "2s"}, 100.0) == 102.0
    for unbounded in ({}, {"timeout": ""}, {"timeout": "0"}, {"timeout": "-1s"}, {"timeout": "2m"}):
        assert deadline.deadline_of(unbounded, 100.0) == 100.0 + deadline.MAXIMUM_SECONDS


def test_a_patch_held_past_its_timeout_is_not_stored(core, stalled) -> None:
    core.create_namespaced_config_map("default", configmap("settings"))
    before = core.read_namespaced_config_map("settings", "default").metadata.resource_version
    stalled.delay_requests(1, method="PATCH", path=CONFIGMAPS + "/settings$", count=1)
    patch = {"metadata": {"labels": {"late": "yes"}}}
    code, status = call(core, "PATCH", CONFIGMAPS + "/settings", patch, timeout="5ms")
    assert (code, status["reason"], status["code"]) == (504, "Timeout", 504)
    assert "request did not complete within requested timeout" in status["message"]
    after = core.read_namespaced_config_map("settings", "default")
    assert after.metadata.resource_version == before and not after.metadata.labels


def test_a_create_and_a_delete_held_past_their_timeout_change_nothing(core, stalled) -> None:
    core.create_namespaced_config_map("default", configmap("kept"))
    stalled.delay_requests(1, method="POST|DELETE", path=CONFIGMAPS, count=2)
    for method, path, body in (
        ("POST", CONFIGMAPS, configmap("late")),
        ("DELETE", CONFIGMAPS + "/kept", None),
    ):
        assert call(core, method, path, body, timeout="1ms")[0] == 504, method
    names = [c.metadata.name for c in core.list_namespaced_config_map("default").items]
    assert "late" not in names and "kept" in names


def test_a_write_within_its_timeout_is_stored(core) -> None:
    core.create_namespaced_config_map("default", configmap("prompt"))
    patch = {"metadata": {"labels": {"a": "b"}}}
    assert call(core, "PATCH", CONFIGMAPS + "/prompt", patch, timeout="30s")[0] == 200
    assert core.read_namespaced_config_map("prompt", "default").metadata.labels == {"a": "b"}


def test_a_timeout_that_does_not_parse_is_a_bad_request(core) -> None:
    code, status = call(core, "POST", CONFIGMAPS, configmap("odd"), timeout="soon")
    assert (code, status["reason"]) == (400, "BadRequest")
    assert status["message"] == (
        'invalid timeout specified in the request URL - time: invalid duration "soon"'
    )
    assert "odd" not in [c.metadata.name for c in core.list_namespaced_config_map("default").items]


def test_a_watch_has_no_deadline_and_its_timeout_is_not_read(core) -> None:
    # long-running requests skip kube-apiserver's WithRequestDeadline: no 400 for the value
    client = core.api_client
    query = [("watch", "1"), ("timeoutSeconds", "1"), ("timeout", "soon")]
    request = client.param_serialize(
        "GET", CONFIGMAPS, query_params=query, auth_settings=["BearerToken"]
    )
    answer = client.call_api(*request)
    answer.read()  # the stream ends after timeoutSeconds
    assert answer.status == 200


def test_a_watch_timeout_that_is_not_an_integer_is_a_bad_request(core) -> None:
    code, status = call(core, "GET", CONFIGMAPS + "?watch=1&timeoutSeconds=soon")
    assert (code, status["reason"]) == (400, "BadRequest")
