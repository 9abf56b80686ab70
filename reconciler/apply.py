"""Enforce one scheduling decision on its binding: the I/O edge of :mod:`engine.enforce.plan`.

``Applier(api_client, mode, clock).apply(decision, binding)`` sends the plan's merge patch with
the resourceVersion the decision was made on, then (bind mode) the ``Scheduled`` condition on the
status subresource, then an Event (on the binding, and on the template the user applied:
``reconciler.recorder``). A 409 is ``Outcome.CONFLICT``: the caller re-reads the binding and
decides again; nothing is forced or retried blindly. A 404 is ``Outcome.GONE``.
``transition(change, binding)`` writes a lifecycle transition (:mod:`engine.enforce.lifecycle`: a
job started, requeued or given up) the same way.
"""

from __future__ import annotations

import datetime as dt
import logging
import uuid
from collections.abc import Callable, Mapping
from enum import StrEnum
from typing import Any

import kubernetes
import urllib3
from kubernetes.client.exceptions import ApiException

from engine import annotations as ann
from engine.cycle import Decision
from engine.enforce import (
    Confirm,
    GroupRollback,
    MemberPlan,
    Mode,
    Plan,
    PlanError,
    Reclaim,
    Started,
    StatusUpdate,
    Unplan,
    plan,
    plan_rollback,
    plan_transition,
    status_patch,
)
from engine.errors import FleetgateError
from reconciler.adopt import Adoption
from reconciler.events import event_body
from reconciler.recorder import TEMPLATE_REASONS, Recorder, template_of

log = logging.getLogger("fleetgate.reconciler")

GROUP, VERSION = "work.karmada.io", "v1alpha2"
STATUS_ATTEMPTS = 3  # re-reads of a binding whose status write met a 409 after our spec write
REQUEST_TIMEOUT = 30.0  # seconds per API call: a hung server is an error, not a hung reconciler


class Outcome(StrEnum):
    APPLIED = "Applied"
    """Every write of the plan went through."""
    UNCHANGED = "Unchanged"
    """The binding already says what the decision says: nothing was written."""
    CONFLICT = "Conflict"
    """The binding changed since it was read (409): re-read it and decide again."""
    GONE = "Gone"
    """The binding no longer exists (404)."""


class ApplyError(FleetgateError):
    """A write the API server refused for another reason than 409/404."""

    def __init__(self, binding: str, what: str, status: int, detail: str) -> None:
        super().__init__(f"{binding}: {what} failed: HTTP {status}: {detail}")
        self.binding = binding
        self.status = status


class NotLeader(FleetgateError):
    """The write gate (leader election: ``reconciler.leader``) is closed: nothing is sent."""


class _Conflict(Exception):
    pass


class _Gone(Exception):
    pass


def utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class Applier:
    def __init__(
        self,
        api_client: kubernetes.client.ApiClient,
        mode: Mode | str = Mode.BIND,
        clock: Callable[[], dt.datetime] = utc_now,
        request_timeout: float = REQUEST_TIMEOUT,
    ) -> None:
        self.mode = Mode(mode)
        self.clock = clock
        self.timeout = request_timeout
        self.custom = kubernetes.client.CustomObjectsApi(api_client)
        self.core = kubernetes.client.CoreV1Api(api_client)
        # asked right before every write; False: this replica must not write (not the leader)
        self.gate: Callable[[], bool] | None = None

        # what is left of the lease (reconciler.fence): a write's timeout ends inside it
        self.remaining: Callable[[], float] | None = None
        # the same Events on the template the user applied (reconciler.recorder)
        self.recorder = Recorder(self.core, self._timeout, self._open)

    def _open(self) -> bool:
        return self.gate is None or self.gate()

    def _timeout(self) -> float:
        if self.remaining is None:
            return self.timeout
        return max(0.001, min(self.timeout, self.remaining()))

    def apply(
        self,
        decision: Decision,
        binding: Mapping[str, Any],
        policy_version: str = "",
        resizable: bool | None = None,
    ) -> Outcome:
        """Enforce ``decision`` on ``binding``, the object (with its resourceVersion) it was
        made on. ``policy_version`` is the PolicySet version of the cycle (CycleResult)."""
        ref = _ref(binding)
        if decision.binding != ref:
            raise PlanError(f"decision for {decision.binding} applied to binding {ref}")
        now = self.clock()
        return self._send(
            binding, plan(decision, binding, self.mode, now, policy_version, resizable), now
        )

    def transition(
        self,
        change: Started | Reclaim | Confirm,
        binding: Mapping[str, Any],
        policy_version: str = "",
    ) -> Outcome:
        """Write a lifecycle transition (``engine.enforce.lifecycle``: the job started, or is
        requeued or given up) on ``binding``, the object it was found on."""
        ref = _ref(binding)
        if change.binding != ref:
            raise PlanError(f"transition for {change.binding} applied to binding {ref}")
        now = self.clock()
        return self._send(
            binding, plan_transition(change, binding, self.mode, now, policy_version), now
        )

    def rollback(
        self, change: GroupRollback | Unplan, binding: Mapping[str, Any], policy_version: str = ""
    ) -> Outcome:
        """Take a member of a group placed below its minimum (or of a group plan that cannot
        complete) off its clusters, or remove a rolled-back plan (``engine.enforce.groupplan``)."""
        if change.binding != _ref(binding):
            raise PlanError(f"rollback for {change.binding} applied to binding {_ref(binding)}")
        now = self.clock()
        return self._send(
            binding, plan_rollback(change, binding, self.mode, now, policy_version), now
        )

    def write_plan(
        self, member: MemberPlan, binding: Mapping[str, Any]
    ) -> tuple[Outcome, Mapping[str, Any]]:
        """Phase 1 of a group's binding (``engine.enforce.groupphase``): ``member`` written on
        ``binding`` with its resourceVersion; the outcome and the binding as it now is (the
        object the member's Admit patch is then made on)."""
        text = member.text()
        notes = (binding.get("metadata") or {}).get("annotations") or {}
        if notes.get(ann.GROUP_PLAN) == text:
            return Outcome.UNCHANGED, binding
        version = str((binding.get("metadata") or {}).get("resourceVersion", ""))
        body = {"metadata": {"resourceVersion": version, "annotations": {ann.GROUP_PLAN: text}}}
        try:
            return Outcome.APPLIED, self._patch(binding, body, status=False)
        except _Conflict:
            return Outcome.CONFLICT, binding
        except _Gone:
            return Outcome.GONE, binding

    def adopt(
        self, adoption: Adoption, binding: Mapping[str, Any]
    ) -> tuple[Outcome, Mapping[str, Any]]:
        """Record a placed binding fleetgate's webhook never saw as admitted where it runs
        (``reconciler.adopt``): the adoption's merge patch, then its Event. The outcome and the
        binding as the API server now holds it (the cycle of the same pass reads that)."""
        if adoption.binding != _ref(binding):
            raise PlanError(f"adoption of {adoption.binding} applied to binding {_ref(binding)}")
        try:
            written = self._patch(binding, adoption.patch, status=False)
        except _Conflict:
            return Outcome.CONFLICT, binding
        except _Gone:
            return Outcome.GONE, binding
        self._event(written, Plan(event=adoption.event), self.clock())
        return Outcome.APPLIED, written

    def _send(self, binding: Mapping[str, Any], writes: Plan, now: dt.datetime) -> Outcome:
        """The plan's spec patch, then its status, then its Event."""
        if writes.patch is None:
            return Outcome.UNCHANGED
        try:
            written = self._patch(binding, writes.patch, status=False)
            if writes.status is not None:
                written = self._write_status(binding, written, writes.status, now)
        except _Conflict:
            return Outcome.CONFLICT
        except _Gone:
            return Outcome.GONE
        self._event(written, writes, now)
        return Outcome.APPLIED

    def _write_status(
        self,
        original: Mapping[str, Any],
        written: dict[str, Any],
        update: StatusUpdate,
        now: dt.datetime,
    ) -> dict[str, Any]:
        """The condition, read-modify-write on the binding as our spec patch left it. On a 409
        (another writer touched the binding since), re-read it: while it still carries our
        write (same clusters and admission annotations), the status is ours to set."""
        current = written
        for _ in range(STATUS_ATTEMPTS):
            try:
                return self._patch(original, status_patch(current, update, now), status=True)
            except _Conflict:
                fresh = self._get(original)
                if not _same_write(fresh, written):
                    raise
                current = fresh
        raise _Conflict

    def _event(self, binding: Mapping[str, Any], writes: Plan, now: dt.datetime) -> None:
        if writes.event is None:
            return
        if self.gate is not None and not self.gate():
            return
        body = event_body(binding, writes.event, now, uuid.uuid4().hex[:16])
        namespace = body["metadata"]["namespace"]
        try:
            # the answer is not read into a V1Event model: nothing uses it, and building one
            # cost more CPU than the request itself (docs/performance.md)
            answer = self.core.create_namespaced_event(
                namespace, body, _request_timeout=self._timeout(), _preload_content=False
            )
            answer.read()
            answer.release_conn()
        except (ApiException, urllib3.exceptions.HTTPError, OSError) as error:
            log.warning("%s: Event %s not recorded: %s", _ref(binding), writes.event.reason, error)
        template = template_of(binding)
        if template is not None and writes.event.reason in TEMPLATE_REASONS:
            self.recorder.record(template, writes.event, now)

    def _patch(
        self, binding: Mapping[str, Any], body: dict[str, Any], status: bool
    ) -> dict[str, Any]:
        namespace, name, plural = _where(binding)
        what = "status patch" if status else "patch"
        if self.gate is not None and not self.gate():
            raise NotLeader(f"{_ref(binding)}: {what} not sent: this replica is not the leader")
        try:
            if namespace:
                call = (
                    self.custom.patch_namespaced_custom_object_status
                    if status
                    else self.custom.patch_namespaced_custom_object
                )
                result = call(
                    GROUP, VERSION, namespace, plural, name, body, _request_timeout=self._timeout()
                )
            else:
                call = (
                    self.custom.patch_cluster_custom_object_status
                    if status
                    else self.custom.patch_cluster_custom_object
                )
                result = call(GROUP, VERSION, plural, name, body, _request_timeout=self._timeout())
        except ApiException as error:
            raise _translate(binding, what, error) from error
        except urllib3.exceptions.HTTPError as error:
            raise ApplyError(_ref(binding), what, 0, str(error)) from error
        return dict(result)

    def server_version(self, binding: Mapping[str, Any]) -> str | None:
        """The binding's resourceVersion on the server now (a fresh GET, never cached); None
        when it cannot be read (gone, or the request failed: logged)."""
        try:
            fresh = self._get(binding)
        except (_Conflict, _Gone, ApplyError, OSError) as error:
            log.info("%s: re-read failed (%s)", _ref(binding), error or "not found")
            return None
        return str((fresh.get("metadata") or {}).get("resourceVersion") or "")

    def _get(self, binding: Mapping[str, Any]) -> dict[str, Any]:
        namespace, name, plural = _where(binding)
        try:
            if namespace:
                result = self.custom.get_namespaced_custom_object(
                    GROUP, VERSION, namespace, plural, name, _request_timeout=self.timeout
                )
            else:
                result = self.custom.get_cluster_custom_object(
                    GROUP, VERSION, plural, name, _request_timeout=self.timeout
                )
        except ApiException as error:
            raise _translate(binding, "get", error) from error
        except urllib3.exceptions.HTTPError as error:
            raise ApplyError(_ref(binding), "get", 0, str(error)) from error
        return dict(result)


def _translate(binding: Mapping[str, Any], what: str, error: ApiException) -> Exception:
    if error.status == 409:
        return _Conflict()
    if error.status == 404:
        return _Gone()
    return ApplyError(_ref(binding), what, int(error.status or 0), str(error.body or error.reason))


def _where(binding: Mapping[str, Any]) -> tuple[str, str, str]:
    meta = binding.get("metadata") or {}
    if binding.get("kind") == "ClusterResourceBinding":
        return "", str(meta.get("name", "")), "clusterresourcebindings"
    return str(meta.get("namespace", "")), str(meta.get("name", "")), "resourcebindings"


def _ref(binding: Mapping[str, Any]) -> str:
    namespace, name, _ = _where(binding)
    return f"{namespace}/{name}" if namespace else name


def _same_write(fresh: Mapping[str, Any], written: Mapping[str, Any]) -> bool:
    def mark(obj: Mapping[str, Any]) -> tuple[Any, ...]:
        notes = (obj.get("metadata") or {}).get("annotations") or {}
        spec = obj.get("spec") or {}
        return (spec.get("clusters"), notes.get(ann.ADMITTED_AT), notes.get(ann.ADMITTED_TO))

    return mark(fresh) == mark(written)
