"""``fleetgate serve`` fails clearly (issue 31, item 4): one line per distinct problem, said
again with backoff, never one per retry; words that say what to do."""

from __future__ import annotations

import json
import logging
import socket

import kubernetes
import pytest
import urllib3
from kubernetes.client.exceptions import ApiException

from reconciler.informer import Informer
from reconciler.problems import PROBLEMS, Problems, describe
from reconciler.resources import RESOURCE_BINDINGS
from tests.reconciler.test_loop import eventually


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_problem_is_said_once_then_with_backoff_and_when_it_is_over(caplog):
    clock = Clock()
    problems = Problems(logging.getLogger("test.problems"), clock)
    caplog.set_level(logging.INFO, "test.problems")
    for second in range(600):  # a retry a second for ten minutes
        clock.now = float(second)
        problems.report("unreachable", "the API server is unreachable")
    said = [r.getMessage() for r in caplog.records]
    # at 0 s, then 60 s, 180 s (120 s later), 420 s (240 s later): 4 lines, not 600
    assert said[0] == "the API server is unreachable"
    assert len(said) == 4, said
    assert said[1] == "the API server is unreachable (still; 60 more times since it was last said)"
    problems.report("403 list x", "RBAC forbids …")  # another problem: said at once
    assert caplog.records[-1].getMessage() == "RBAC forbids …"
    problems.over("unreachable", "the API server answers again")
    problems.over("unreachable", "the API server answers again")  # said once
    assert [r.getMessage() for r in caplog.records].count("the API server answers again") == 1
    problems.report("unreachable", "the API server is unreachable")  # again: a new problem
    assert caplog.records[-1].getMessage() == "the API server is unreachable"


def api_error(status: int, reason: str, message: str) -> ApiException:
    error = ApiException(status=status, reason=reason)
    error.body = json.dumps({"kind": "Status", "message": message, "code": status})
    return error


@pytest.mark.parametrize(
    ("error", "key", "says"),
    [
        (api_error(401, "Unauthorized", "Unauthorized"), "401",
         "refuses fleetgate's credentials (401 Unauthorized) to list x: check the kubeconfig"),
        (api_error(403, "Forbidden", 'User "sa" cannot list resource "leases"'), "403 list x",
         'RBAC forbids fleetgate to list x (403): User "sa" cannot list resource "leases"'),
        (api_error(404, "Not Found", 'namespaces "nope" not found'), "404 namespace nope",
         "namespace nope does not exist; create it with kubectl create namespace nope"),
        (urllib3.exceptions.MaxRetryError(None, "/", "refused"), "unreachable",
         "the API server at https://k is unreachable (MaxRetryError)"),
        (ConnectionRefusedError(111, "refused"), "unreachable", "is unreachable"),
    ],
    ids=["401", "403", "missing namespace", "urllib3", "socket"],
)  # fmt: skip
def test_each_problem_is_said_with_what_to_do(error, key, says):
    found, line = describe(error, "list x", "https://k")
    assert found == key and says in line, line


def test_informers_that_cannot_reach_the_api_server_say_so_once(caplog):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    configuration = kubernetes.client.Configuration()
    configuration.host = f"http://127.0.0.1:{port}"
    configuration.retries = 0
    caplog.set_level(logging.INFO, "fleetgate.reconciler")
    PROBLEMS.over("unreachable", "")  # a test before may have left it reported
    caplog.clear()
    api = kubernetes.client.ApiClient(configuration)
    informers = [
        Informer(api, RESOURCE_BINDINGS, backoff_base=0.001, backoff_max=0.002).start()
        for _ in range(3)
    ]
    try:
        eventually(lambda: all(i.errors >= 20 for i in informers), 30)
    finally:
        for informer in informers:
            informer.stop(5)
        api.close()
    said = [r.getMessage() for r in caplog.records if r.name == "fleetgate.reconciler"]
    unreachable = [m for m in said if "unreachable" in m]
    assert len(unreachable) == 1, said  # 60 failures, one line
    assert f"at http://127.0.0.1:{port}" in unreachable[0]


def test_serve_against_a_stopped_api_server_says_each_problem_once(tmp_path):
    # catches: a warning per retry of every informer and of the lease (401 lines in 12 s)
    from sandbox.server import Sandbox
    from tests.reconciler.serveproc import ServeProcess

    with Sandbox() as server:
        kubeconfig = server.write_kubeconfig(tmp_path / "kubeconfig")
    log = tmp_path / "serve.log"
    served = ServeProcess(kubeconfig, "replica-x", log, "--log-level", "DEBUG")
    try:
        retries = lambda: log.read_text().count("retrying in")  # noqa: E731
        eventually(lambda: retries() >= 40, 60)  # 40 failed attempts, counted
        lines = log.read_text().splitlines()
        said = [line for line in lines if " WARNING " in line or " ERROR " in line]
        assert len(said) <= 5, "\n".join(said)
        assert sum("is unreachable" in line for line in said) == 1, "\n".join(said)
    finally:
        served.stop()
