"""Leader election on a ``coordination.k8s.io/v1`` Lease, the shape of client-go's
``leaderelection`` (docs: CONVENTIONS.md, "Controllers").

Every ``retry_period`` each replica reads the Lease and writes it back with the resourceVersion
it read (a 409 means another replica wrote first: no harm, try again later):

- the holder renews it (``renewTime``); a replica may take it when it is free (no holder, or
  released) or when its record has not changed for ``leaseDurationSeconds`` of the replica's
  own clock since it first saw that record (clocks of different machines are never compared);
  a new holder sets ``acquireTime`` and increments ``leaseTransitions``;
- the holder counts as leader only until ``renew_deadline`` after the start of its last
  successful renew: :meth:`LeaderElector.is_leader` computes that at each call, so a replica
  whose renewals fail (or hang) stops writing at the deadline even if its renew thread is
  stuck, ``lease_duration - renew_deadline`` before anyone else may take the lease. A replica
  that reads the Lease and finds another holder stops at once.

Writers call :meth:`is_leader` right before every write (the reconciler's gate), and
``reconciler.fence`` checks :meth:`deadline` again as each write leaves. On a clean
stop the holder stops writing, then releases the Lease (empty ``holderIdentity``) so that a
follower takes over at its next try instead of waiting for the lease to expire.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import random
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import kubernetes
import urllib3
from kubernetes.client.exceptions import ApiException

from engine.errors import FleetgateError
from reconciler.problems import PROBLEMS, describe

log = logging.getLogger("fleetgate.reconciler.leader")

LEASE_DURATION, RENEW_DEADLINE, RETRY_PERIOD = 15.0, 10.0, 2.0  # client-go's defaults, seconds
JITTER = 1.2  # client-go's JitterFactor: a follower waits retry_period × (1 … 1.2)


class LeaderElectionError(FleetgateError):
    """Inconsistent settings of the leader election (the message names the setting)."""


@dataclass(frozen=True, slots=True)
class LeaseConfig:
    name: str
    namespace: str
    identity: str
    lease_duration: float = LEASE_DURATION
    renew_deadline: float = RENEW_DEADLINE
    retry_period: float = RETRY_PERIOD

    def __post_init__(self) -> None:
        for field in ("name", "namespace", "identity"):
            if not getattr(self, field):
                raise LeaderElectionError(f"leader election: the lease {field} is empty")
        if not self.lease_duration > self.renew_deadline:
            raise LeaderElectionError(
                f"leader election: the lease duration ({self.lease_duration:g}s) must be longer "
                f"than the renew deadline ({self.renew_deadline:g}s)"
            )
        if not self.renew_deadline > JITTER * self.retry_period > 0:
            raise LeaderElectionError(
                f"leader election: the renew deadline ({self.renew_deadline:g}s) must be longer "
                f"than {JITTER:g} × the retry period ({self.retry_period:g}s)"
            )


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    """What a Lease says about its holder (``spec``), as read."""

    holder: str
    duration: float
    acquire_time: str
    renew_time: str
    transitions: int

    @classmethod
    def of(cls, lease: Mapping[str, Any]) -> LeaseRecord:
        spec = lease.get("spec") or {}
        return cls(
            str(spec.get("holderIdentity") or ""),
            float(spec.get("leaseDurationSeconds") or 0),
            str(spec.get("acquireTime") or ""),
            str(spec.get("renewTime") or ""),
            int(spec.get("leaseTransitions") or 0),
        )


def micro_time(moment: dt.datetime) -> str:
    """A ``metav1.MicroTime``: RFC 3339 with microseconds, UTC."""
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    """Campaigns for the Lease of ``config`` on a thread (:meth:`start`), or one attempt at a
    time (:meth:`try_acquire_or_renew`). ``on_started`` / ``on_stopped`` are called (on the
    election thread, or the caller of :meth:`release`) when leadership begins and ends."""

    def __init__(
        self,
        api_client: kubernetes.client.ApiClient,
        config: LeaseConfig,
        *,
        on_started: Callable[[], None] | None = None,
        on_stopped: Callable[[], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
        rng: random.Random | None = None,
    ) -> None:
        self.config = config
        self.api = kubernetes.client.CoordinationV1Api(api_client)
        self.on_started = on_started
        self.on_stopped = on_stopped
        self.clock = clock
        self.wall_clock = wall_clock
        self.timeout = max(0.5, config.renew_deadline / 2)  # per Lease request
        self._rng = rng or random.Random()
        self._lock = threading.Lock()
        self._leading = False
        self._renewed = float("-inf")  # clock() at the start of the last successful write
        self._observed: LeaseRecord | None = None
        self._problem = ""  # the key of the problem last reported (reconciler.problems)
        self._observed_at = float("-inf")
        self._became_leader = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self.transitions_seen = 0  # times this replica became leader

    # -- the gate ----------------------------------------------------------------------------

    def is_leader(self) -> bool:
        """True while this replica holds the Lease and renewed it within the renew deadline."""
        with self._lock:
            return self._leading and self.clock() - self._renewed < self.config.renew_deadline

    def deadline(self) -> float | None:
        """The ``clock()`` time at which this replica stops being leader unless it renews
        (None: it does not lead); ``reconciler.fence`` refuses writes that would leave later."""
        with self._lock:
            return self._renewed + self.config.renew_deadline if self._leading else None

    def wait_leader(self, timeout: float) -> bool:
        return self._became_leader.wait(timeout) and self.is_leader()

    @property
    def observed_holder(self) -> str:
        """The holder of the Lease as this replica last read it ("" when free or unknown)."""
        with self._lock:
            return self._observed.holder if self._observed is not None else ""

    # -- one attempt -------------------------------------------------------------------------

    def try_acquire_or_renew(self) -> bool:
        """Read the Lease and write it as ours when we hold it or may take it. True when the
        write went through; API errors count as a failed attempt (logged)."""
        started = self.clock()
        try:
            taken = self._attempt(started)
        except (ApiException, urllib3.exceptions.HTTPError, OSError) as error:
            key, line = describe(error, f"take or renew lease {self._ref}")
            PROBLEMS.report(key, line)
            self._problem = key
            log.debug("lease %s: attempt failed: %s", self._ref, _short(error))
            taken = False
        else:
            if self._problem:
                PROBLEMS.over(self._problem, f"lease {self._ref}: the API server answers again")
                self._problem = ""
        lost = False
        with self._lock:
            if taken:
                self._renewed = started
                if not self._leading:
                    self._leading = True
                    self.transitions_seen += 1
                    self._became_leader.set()
                    began = True
                else:
                    began = False
            else:
                began = False
                other = self._observed is not None and self._observed.holder not in (
                    "",
                    self.config.identity,
                )
                expired = self.clock() - self._renewed >= self.config.renew_deadline
                if self._leading and (other or expired):
                    self._leading = False
                    self._became_leader.clear()
                    lost = True
        if began:
            log.info("lease %s: %s is the leader", self._ref, self.config.identity)
            if self.on_started is not None:
                self.on_started()
        if lost:
            log.warning(
                "lease %s: %s lost the lease (holder now %r); writes stopped",
                self._ref,
                self.config.identity,
                self.observed_holder,
            )
            if self.on_stopped is not None:
                self.on_stopped()
        return taken

    def _attempt(self, now: float) -> bool:
        cfg = self.config
        try:
            lease = self._read()
        except ApiException as error:
            if error.status != 404:
                raise
            return self._create(now)
        record = LeaseRecord.of(lease)
        with self._lock:
            if record != self._observed:
                self._observed, self._observed_at = record, now
            observed_at = self._observed_at
        mine = record.holder == cfg.identity
        if record.holder and not mine:
            duration = record.duration or cfg.lease_duration
            if now < observed_at + duration:
                return False  # held by another and not expired by our clock
        moment = micro_time(self.wall_clock())
        spec = {
            "holderIdentity": cfg.identity,
            "leaseDurationSeconds": round(cfg.lease_duration),
            "acquireTime": record.acquire_time if mine else moment,
            "renewTime": moment,
            "leaseTransitions": record.transitions if mine else record.transitions + 1,
        }
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": dict(lease.get("metadata") or {}),
            "spec": spec,
        }
        try:
            written = self._call(self.api.replace_namespaced_lease, cfg.name, cfg.namespace, body)
        except ApiException as error:
            if error.status == 409:  # another replica wrote first: look again next time
                return False
            raise
        with self._lock:
            self._observed, self._observed_at = LeaseRecord.of(written), now
        return True

    def _create(self, now: float) -> bool:
        cfg = self.config
        moment = micro_time(self.wall_clock())
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": cfg.name, "namespace": cfg.namespace},
            "spec": {
                "holderIdentity": cfg.identity,
                "leaseDurationSeconds": round(cfg.lease_duration),
                "acquireTime": moment,
                "renewTime": moment,
                "leaseTransitions": 0,
            },
        }
        try:
            written = self._call(self.api.create_namespaced_lease, cfg.namespace, body)
        except ApiException as error:
            if error.status == 409:  # created by another replica meanwhile
                return False
            raise
        with self._lock:
            self._observed, self._observed_at = LeaseRecord.of(written), now
        return True

    def _read(self) -> dict[str, Any]:
        return self._call(self.api.read_namespaced_lease, self.config.name, self.config.namespace)

    def _call(self, method: Callable[..., Any], *args: Any) -> dict[str, Any]:
        response = method(*args, _preload_content=False, _request_timeout=self.timeout)
        return dict(json.loads(response.data))

    @property
    def _ref(self) -> str:
        return f"{self.config.namespace}/{self.config.name}"

    # -- the campaign ------------------------------------------------------------------------

    def start(self) -> LeaderElector:
        if self._thread is None:
            self._stopping.clear()
            self._thread = threading.Thread(target=self._run, name="leader-election", daemon=True)
            self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stopping.is_set():
            self.try_acquire_or_renew()
            period = self.config.retry_period
            if not self.is_leader():
                period *= 1 + self._rng.random() * (JITTER - 1)
            self._stopping.wait(period)

    def stop(self, *, release: bool = True, timeout: float = 5.0) -> None:
        """Stop campaigning; with ``release``, give the Lease up if we hold it. The caller
        must have stopped its writers first (a release lets another replica write at once)."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
        if release:
            self.release()
        else:
            self._step_down()

    def _step_down(self) -> bool:
        with self._lock:
            was, self._leading = self._leading, False
            self._became_leader.clear()
        if was and self.on_stopped is not None:
            self.on_stopped()
        return was

    def release(self) -> bool:
        """Stop being leader, then write the Lease free (when it still names us). True when
        the Lease was released."""
        if not self._step_down():
            return False
        cfg = self.config
        try:
            lease = self._read()
            if LeaseRecord.of(lease).holder != cfg.identity:
                return False
            moment = micro_time(self.wall_clock())
            spec = dict(lease.get("spec") or {})
            spec.update(holderIdentity=None, leaseDurationSeconds=1, renewTime=moment)
            body = {**lease, "spec": spec}
            self._call(self.api.replace_namespaced_lease, cfg.name, cfg.namespace, body)
        except (ApiException, urllib3.exceptions.HTTPError, OSError) as error:
            log.warning("lease %s: not released (%s); it expires instead", self._ref, error)
            return False
        log.info("lease %s: released by %s", self._ref, cfg.identity)
        return True


def _short(error: BaseException) -> str:
    text = str(getattr(error, "reason", "") or error)
    return text.splitlines()[0][:200] if text else type(error).__name__
