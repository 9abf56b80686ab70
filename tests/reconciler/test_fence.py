"""Issue 29, finding 3: a paused leader wrote after losing its Lease. In 4 of 6 SIGSTOPs longer
than the lease, the woken replica sent 1–6 binding patches while another replica held the
Lease: the gate was asked before a write thread that was then frozen. Now (``reconciler.fence``)
the lease deadline is checked again, on the monotonic clock, as each piece of a write leaves.

The freeze is made exact here: the Applier's gate says yes, then the write thread is held (as a
SIGSTOP would hold it) while the lease deadline passes, then let go. The real ``kubernetes``
client against the sandbox over HTTPS; the sandbox's record of writes says what arrived."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import kubernetes
import pytest
from kubernetes.client.rest import ApiException

from engine.cycle.model import Decision
from engine.cycle.reasons import Action, Reason
from reconciler import fence
from reconciler.apply import Applier, ApplyError, Outcome
from sandbox.faults import Faults
from sandbox.server import Sandbox
from sandbox.writelog import WriteLog
from tests.reconciler.test_apply import create, read
from tests.sandbox.test_deadline import stall_past_the_deadline

RB_KEY = "resourcebindings.work.karmada.io"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def waiting(reason: Reason = Reason.WAITING_FOR_QUOTA) -> Decision:
    return Decision(
        "default/train-pytorchjob", "PyTorchJob/default/train", "q", "t", 0, Action.PENDING,
        reason, "8 gpu more needed",
    )  # fmt: skip


@pytest.fixture
def writes(sandbox: Sandbox) -> WriteLog:
    return WriteLog().attach(sandbox)


def fenced_applier(
    api_client: kubernetes.client.ApiClient, deadline: Callable[[], float | None], clock: Clock
) -> tuple[Applier, fence.Fence]:
    guard = fence.Fence(deadline, clock)
    fence.install(api_client, guard)
    applier = Applier(api_client)
    applier.gate = lambda: (until := deadline()) is not None and clock() < until
    applier.remaining = guard.remaining
    return applier, guard


def frozen_after_the_gate(applier: Applier, release: threading.Event) -> threading.Event:
    """Hold the write thread right after the gate said yes (a SIGSTOP at that instant)."""
    passed = threading.Event()
    gate = applier.gate
    assert gate is not None

    def gate_then_freeze() -> bool:
        open_now = gate()
        passed.set()
        release.wait(30)
        return open_now

    applier.gate = gate_then_freeze
    return passed


def test_a_write_frozen_past_the_lease_deadline_is_not_sent(
    api_client: kubernetes.client.ApiClient, writes: WriteLog
) -> None:
    custom = kubernetes.client.CustomObjectsApi(api_client)
    create(custom)
    clock = Clock()
    applier, guard = fenced_applier(api_client, lambda: 105.0, clock)
    binding = read(custom)
    release = threading.Event()
    passed = frozen_after_the_gate(applier, release)
    outcome: list[Any] = []
    thread = threading.Thread(target=lambda: outcome.append(_try(applier, binding)))
    thread.start()
    assert passed.wait(10)
    clock.now = 106.0  # the lease deadline passes while the thread is frozen; then it wakes
    release.set()
    thread.join(10)
    assert isinstance(outcome[0], ApplyError) and "lease deadline" in str(outcome[0])
    assert guard.refused == 1
    assert [w for w in writes.entries(RB_KEY) if w.verb != "create"] == []  # nothing arrived
    assert read(custom)["metadata"]["resourceVersion"] == binding["metadata"]["resourceVersion"]


def test_within_the_lease_writes_leave_and_reads_and_lease_writes_are_never_fenced(
    api_client: kubernetes.client.ApiClient, writes: WriteLog
) -> None:
    custom = kubernetes.client.CustomObjectsApi(api_client)
    create(custom)
    clock = Clock()
    deadline: list[float | None] = [105.0]
    applier, guard = fenced_applier(api_client, lambda: deadline[0], clock)
    assert applier.apply(waiting(), read(custom)) == Outcome.APPLIED
    assert guard.remaining() == 5.0
    deadline[0] = None  # not the leader any more
    assert read(custom)["metadata"]["annotations"]  # a read still goes
    coordination = kubernetes.client.CoordinationV1Api(api_client)
    lease = {"metadata": {"name": "l"}, "spec": {"holderIdentity": "me"}}
    coordination.create_namespaced_lease("default", lease)  # the election must renew
    with pytest.raises(fence.Fenced):
        custom.patch_namespaced_custom_object(
            "work.karmada.io", "v1alpha2", "default", "resourcebindings", "train-pytorchjob",
            {"metadata": {"labels": {"x": "y"}}},
        )  # fmt: skip
    patches = [w for w in writes.entries(RB_KEY) if w.verb == "patch"]
    assert len(patches) == 1  # the one inside the lease


def test_a_request_whose_body_would_leave_after_the_deadline_is_cut_off(
    api_client: kubernetes.client.ApiClient, writes: WriteLog
) -> None:
    # the headers leave in time, the deadline passes before the body: the server never gets a
    # whole request, and the connection is not reused half-written
    custom = kubernetes.client.CustomObjectsApi(api_client)
    create(custom)
    # remaining() here and for the URL's timeout, the headers' check, the body's check
    ticks = iter([100.0, 100.0, 100.0, 200.0])
    clock = Clock()
    guard = fence.Fence(lambda: 105.0, lambda: next(ticks, 200.0))
    fence.install(api_client, guard)
    with pytest.raises(fence.Fenced):
        custom.patch_namespaced_custom_object(
            "work.karmada.io", "v1alpha2", "default", "resourcebindings", "train-pytorchjob",
            {"metadata": {"labels": {"x": "y"}}}, _request_timeout=guard.remaining() or 5,
        )  # fmt: skip
    assert [w for w in writes.entries(RB_KEY) if w.verb == "patch"] == []
    clock.now = 100.0
    assert read(custom)["metadata"]["name"] == "train-pytorchjob"  # the client still works


def test_the_api_server_is_told_to_drop_a_write_it_cannot_store_within_the_lease(
    api_client: kubernetes.client.ApiClient,
    sandbox: Sandbox,
    writes: WriteLog,
) -> None:
    # Seen on 2026-11-29 (test_kill.py on an overloaded machine): six patches sent inside the
    # lease were committed 4 s later, after another replica had taken the Lease. Each fenced
    # request now carries ``timeout=`` what is left of the lease, which kube-apiserver turns
    # into its deadline; the sandbox stalls the patch until that deadline has passed.
    custom = kubernetes.client.CustomObjectsApi(api_client)
    create(custom)
    asked: list[tuple[str, str, str | None]] = []
    sandbox.request_hooks.append(lambda method, path, query: asked.append(
        (method, path.rsplit("/", 2)[-2], query.get("timeout"))
    ))  # fmt: skip
    clock = Clock()
    lease_ends = [105.0]
    applier, _ = fenced_applier(api_client, lambda: lease_ends[0], clock)
    assert applier.apply(waiting(), read(custom)) == Outcome.APPLIED
    assert ("PATCH", "resourcebindings", "5000ms") in asked  # 5 s of the lease left
    coordination = kubernetes.client.CoordinationV1Api(api_client)
    lease = {"metadata": {"name": "l"}, "spec": {"holderIdentity": "me"}}
    coordination.create_namespaced_lease("default", lease)
    assert ("POST", "default", None) in asked  # the Lease: renewing it is what fences
    assert [t for method, _, t in asked if method == "GET"] == [None]  # a read: unbounded

    committed = [w for w in writes.entries(RB_KEY) if w.verb == "patch"]
    lease_ends[0] = 100.0025  # 2.5 ms of the lease left (sent as 2ms); the server stalls longer
    Faults(seed=1, sleep=stall_past_the_deadline).attach(sandbox).delay_requests(
        1, method="PATCH", path="/resourcebindings/", count=1
    )
    with pytest.raises(ApiException) as raised:  # the client waits for the server's answer
        custom.patch_namespaced_custom_object(
            "work.karmada.io", "v1alpha2", "default", "resourcebindings", "train-pytorchjob",
            {"metadata": {"labels": {"late": "yes"}}}, _request_timeout=30,
        )  # fmt: skip
    assert (raised.value.status, raised.value.reason) == (504, "Gateway Timeout")
    assert ("PATCH", "resourcebindings", "2ms") in asked
    assert [w for w in writes.entries(RB_KEY) if w.verb == "patch"] == committed  # not stored
    assert "late" not in (read(custom)["metadata"].get("labels") or {})


def _try(applier: Applier, binding: dict[str, Any]) -> Any:
    try:
        return applier.apply(waiting(), binding)
    except ApplyError as error:
        return error
