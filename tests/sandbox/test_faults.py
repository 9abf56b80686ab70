"""Faults on demand, seen through the ``kubernetes`` client: injected 409/429/500, latency, watch
disconnects (resumed from the last resourceVersion), and the cluster/job faults and clocks that
Karmada's controllers read."""

from __future__ import annotations

import datetime as dt
import json
import queue
import threading
import time
from typing import Any

import kubernetes
import pytest
import urllib3
from kubernetes.client.rest import ApiException

import sandbox.clock as sandbox_clock
from sandbox.clock import ManualClock, ScaledClock
from sandbox.errors import StatusError
from sandbox.faultclient import FaultClient, FaultClientError
from sandbox.faults import NOT_READY, UNREACHABLE, Faults
from sandbox.server import Sandbox
from tests.waiting import PATIENCE_S


@pytest.fixture
def faults(sandbox: Sandbox) -> Faults:
    return Faults(seed=7).attach(sandbox)


def configmap(name: str, **data: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "data": data}


def test_an_injected_409_answers_once_then_the_write_goes_through(core, faults):
    core.create_namespaced_config_map("default", configmap("settings", a="1"))
    faults.fail_requests(409, method="PUT", path="/configmaps/settings$", count=1)
    current = core.read_namespaced_config_map("settings", "default")  # GETs are not matched
    current.data = {"a": "2"}
    with pytest.raises(ApiException) as raised:
        core.replace_namespaced_config_map("settings", "default", current)
    assert raised.value.status == 409
    assert json.loads(raised.value.body)["reason"] == "Conflict"
    assert core.replace_namespaced_config_map("settings", "default", current).data == {"a": "2"}
    assert faults.describe()["rules"] == []  # used up


def test_an_injected_429_carries_retry_after(kubeconfig, faults):
    configuration = kubernetes.client.Configuration()
    kubernetes.config.load_kube_config(str(kubeconfig), client_configuration=configuration)
    configuration.retries = False  # urllib3 would honour Retry-After itself: see below
    with kubernetes.client.ApiClient(configuration) as api:
        core = kubernetes.client.CoreV1Api(api)
        faults.fail_requests(429, path="/configmaps", retry_after=3, count=1)
        with pytest.raises(ApiException) as raised:
            core.list_namespaced_config_map("default")
        assert raised.value.status == 429
        assert raised.value.headers["Retry-After"] == "3"
        status = json.loads(raised.value.body)
        assert (status["reason"], status["details"]["retryAfterSeconds"]) == ("TooManyRequests", 3)
        core.list_namespaced_config_map("default")


class RecordedSleeps:
    """The ``time`` module as one module sees it, its sleeps recorded and not slept: its
    clocks move on by what was asked instead, so the test waits for nothing."""

    def __init__(self) -> None:
        self.slept: list[float] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)

    def _ahead(self) -> float:
        return sum(self.slept)

    def monotonic(self) -> float:
        return time.monotonic() + self._ahead()

    def time(self) -> float:
        return time.time() + self._ahead()

    def perf_counter(self) -> float:
        return time.perf_counter() + self._ahead()


def test_the_default_client_waits_retry_after_and_tries_again(core, faults, monkeypatch):
    recorded = RecordedSleeps()
    monkeypatch.setattr(urllib3.util.retry, "time", recorded)
    rule = faults.fail_requests(429, path="/configmaps", retry_after=1, count=1)
    core.list_namespaced_config_map("default")  # 429, then (urllib3's retry) 200
    assert recorded.slept == [1]  # the seconds Retry-After asked for
    assert rule not in {r["id"] for r in faults.describe()["rules"]}


def test_an_injected_500_until_cleared(core, faults):
    rule = faults.fail_requests(500, method="POST", message="etcd is on fire")
    for _ in range(2):
        with pytest.raises(ApiException) as raised:
            core.create_namespaced_config_map("default", configmap("settings"))
        assert raised.value.status == 500
        assert json.loads(raised.value.body)["message"] == "etcd is on fire"
    assert faults.clear(rule) == 1
    core.create_namespaced_config_map("default", configmap("settings"))


def test_added_latency_delays_the_matching_requests_count_times(core, sandbox):
    """Each matching request sleeps the rule's seconds before it is served, ``count`` times:
    the sleeps are counted through ``Faults(sleep=…)``, not timed."""
    slept: list[float] = []
    faults = Faults(seed=7, sleep=slept.append).attach(sandbox)
    faults.delay_requests(0.05, method="GET", path="/configmaps", count=2)
    core.create_namespaced_config_map("default", configmap("untouched"))  # a POST: no delay
    assert slept == []
    for _ in range(3):
        core.list_namespaced_config_map("default")
    assert slept == [0.05, 0.05]  # count used up: the third request is not delayed


def test_probability_is_drawn_from_a_seeded_random():
    def outcomes(seed: int) -> list[bool]:
        faults = Faults(seed=seed)
        faults.fail_requests(500, probability=0.5)
        results = []
        for _ in range(40):
            try:
                faults.on_request("GET", "/api/v1/configmaps", {})
                results.append(False)
            except StatusError:
                results.append(True)
        return results

    first = outcomes(3)
    assert first == outcomes(3)
    assert 5 < sum(first) < 35


def test_bad_fault_definitions_are_refused():
    faults = Faults()
    with pytest.raises(ValueError, match="4xx or 5xx"):
        faults.fail_requests(200)
    with pytest.raises(ValueError, match="probability"):
        faults.delay_requests(1, probability=2)
    with pytest.raises(ValueError, match="regular expression"):
        faults.fail_requests(500, path="(")
    with pytest.raises(StatusError) as raised:
        faults.handle_http("POST", {}, b'{"type": "earthquake"}')
    assert raised.value.code == 400


# -- watch disconnects --------------------------------------------------------------------


def watch_requests(sandbox: Sandbox) -> list[str]:
    """The resourceVersion of each watch request on configmaps, recorded as they arrive."""
    seen: list[str] = []

    def record(method: str, path: str, query: dict[str, str]) -> None:
        if path.endswith("/configmaps") and query.get("watch") in ("true", "True", "1"):
            seen.append(query.get("resourceVersion", ""))

    sandbox.request_hooks.insert(0, record)
    return seen


def stream_into(core: kubernetes.client.CoreV1Api, rv: str) -> tuple[queue.Queue, Any]:
    events: queue.Queue = queue.Queue()
    watch = kubernetes.watch.Watch()

    def consume() -> None:
        try:
            for event in watch.stream(
                core.list_namespaced_config_map, "default", resource_version=rv
            ):
                events.put((event["type"], event["object"].metadata.name))
        except (urllib3.exceptions.HTTPError, ApiException) as error:
            events.put(("raised", error))

    threading.Thread(target=consume, daemon=True).start()
    return events, watch


def wait_for(condition, what: str) -> None:
    deadline = time.monotonic() + PATIENCE_S
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"gave up waiting for {what}")
        time.sleep(0.02)


def test_a_dropped_watch_resumes_from_its_last_resource_version(sandbox, core, faults):
    seen = watch_requests(sandbox)
    start_rv = core.list_namespaced_config_map("default").metadata.resource_version
    events, watch = stream_into(core, start_rv)
    try:
        core.create_namespaced_config_map("default", configmap("a"))
        assert events.get(timeout=PATIENCE_S) == ("ADDED", "a")
        last_rv = core.read_namespaced_config_map("a", "default").metadata.resource_version
        # the re-watch waits 0.5 s: "c" is written while no watch is open, and is replayed
        faults.delay_requests(0.5, method="GET", path="/configmaps$", count=1)
        assert faults.drop_watches("/configmaps") == 1
        sandbox.store.create("configmaps", configmap("c"), namespace="default")
        assert events.get(timeout=PATIENCE_S) == ("ADDED", "c")
        assert seen == [start_rv, last_rv]
        core.create_namespaced_config_map("default", configmap("d"))
        assert events.get(timeout=PATIENCE_S) == ("ADDED", "d")
        assert events.empty()  # nothing twice
    finally:
        watch.stop()
        sandbox.drop_watches()


def test_an_abrupt_disconnect_breaks_the_stream_mid_response(sandbox, core, faults):
    start_rv = core.list_namespaced_config_map("default").metadata.resource_version
    events, watch = stream_into(core, start_rv)
    try:
        core.create_namespaced_config_map("default", configmap("a"))
        assert events.get(timeout=PATIENCE_S) == ("ADDED", "a")
        wait_for(lambda: faults.drop_watches(abrupt=True) == 1, "the open watch")
        kind, error = events.get(timeout=PATIENCE_S)
        assert kind == "raised"
        assert isinstance(error, urllib3.exceptions.ProtocolError)
        core.list_namespaced_config_map("default")  # the server itself is fine
    finally:
        watch.stop()


def test_faults_over_http(kubeconfig, faults):
    call = FaultClient.from_kubeconfig(kubeconfig).call

    assert call("POST", {"type": "error", "code": 429, "path": "/leases", "count": 2}) == {
        "id": "error-1"
    }
    call("POST", {"type": "clusterDown", "cluster": "gpu-east", "unreachable": True})
    call("POST", {"type": "failJob", "namespace": "research", "name": "train"})
    listed = call("GET")
    assert [rule["code"] for rule in listed["rules"]] == [429]
    assert listed["clusters"] == {"gpu-east": UNREACHABLE}
    assert faults.job_failure("research", "train") == "injected job failure"
    with pytest.raises(FaultClientError, match="unknown fault type"):
        call("POST", {"type": "earthquake"})
    assert call("DELETE") == {"cleared": 3}
    assert faults.cluster_state("gpu-east") is None


# -- what the controllers read ----------------------------------------------------------------


def test_cluster_and_job_faults_notify_subscribers():
    faults = Faults()
    heard: list[tuple[str, Any]] = []
    faults.subscribe(lambda kind, detail: heard.append((kind, detail)))
    faults.cluster_down("gpu-west")
    assert faults.cluster_state("gpu-west") == NOT_READY
    faults.cluster_up("gpu-west")
    faults.fail_job("research", "train", "OOMKilled")
    assert faults.job_failure("research", "train") == "OOMKilled"
    faults.clear_job("research", "train")
    assert faults.job_failure("research", "train") is None
    assert [kind for kind, _ in heard] == ["cluster", "cluster", "job"]
    assert heard[1][1] == {"cluster": "gpu-west", "state": None}


def test_a_scaled_clock_runs_faster_than_real_time(monkeypatch):
    recorded = RecordedSleeps()
    monkeypatch.setattr(sandbox_clock, "time", recorded)
    clock = ScaledClock(speed=100)
    before = clock.now()
    clock.sleep(5)  # 5 clock seconds: 0.05 s of real time
    assert recorded.slept == [0.05]
    assert clock.now() - before >= dt.timedelta(seconds=5)
    stop = threading.Event()
    stop.set()
    assert clock.sleep(3600, stop) is True
    with pytest.raises(ValueError):
        ScaledClock(speed=0)


def test_a_manual_clock_wakes_sleepers_when_advanced() -> None:
    clock = ManualClock(dt.datetime(2025, 3, 10, tzinfo=dt.UTC))
    woke = threading.Event()

    def sleeper() -> None:
        clock.sleep(10)
        woke.set()

    threading.Thread(target=sleeper, daemon=True).start()
    clock.advance(9)
    assert not woke.wait(0.1)
    clock.advance(1)
    assert woke.wait(PATIENCE_S)
    assert clock.now() == dt.datetime(2025, 3, 10, 0, 0, 10, tzinfo=dt.UTC)
    stop = threading.Event()
    stop.set()
    assert clock.sleep(60, stop) is True
