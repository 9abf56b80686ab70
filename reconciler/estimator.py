"""Ask the members' karmada-scheduler-estimators how many pods of each shape they hold now.

karmada-scheduler can ask, per member cluster, a karmada-scheduler-estimator over gRPC
(``Estimator/MaxAvailableReplicas``) how many replicas of a pod's requests the member's real
nodes can start; fleetgate asks the same before each pass: for every Ready cluster with an
estimator (:mod:`reconciler.estimatorargs`) and every pod shape the pending jobs need
(``engine.cycle.estimates.shapes_wanted``), all calls at once (gRPC futures on one channel per
cluster: no thread per call), the pass waiting at most ``timeout`` for all of them together,
as Karmada's ``getClusterReplicasConcurrently`` waits at most its timeout for all clusters.

A cluster is trusted whole or not at all: when every one of its calls answered, its answers go
to ``Estimates.replicas``; when any failed, none do, and ``Estimates.failed`` says why (the
cycle then uses its resource models, as before). Every call is counted by its result, for
``fleetgate_estimator_requests_total{cluster,result}``: ``ok``, ``timeout`` (no answer within the
timeout), ``unavailable`` (gRPC UNAVAILABLE: refused, unresolvable, TLS handshake failed) or
``error`` (any other status, an undecodable or negative answer).

A request carries the shape's resources as Kubernetes quantities: cpu in millicores (``500m``),
any other resource in whole base units when whole (``8``, ``17179869184``), else in milli-units;
``pods`` is left out (Karmada's estimator caps every node by its free pod slots itself). It
carries no namespace, priority class or node claim: a shape is the same for every job.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import grpc

from engine.errors import FleetgateError
from engine.fleet.frozen import FrozenDict
from engine.fleet.model import Estimates, PodShape, Snapshot
from engine.resources import PODS
from reconciler.estimatorargs import EstimatorSettings
from reconciler.estimatorwire import (
    MAX_AVAILABLE_REPLICAS,
    MaxAvailableReplicasRequest,
    MaxAvailableReplicasResponse,
    decode_response,
    encode_request,
    requirements_of,
)

log = logging.getLogger("fleetgate.reconciler.estimator")

OK, TIMEOUT, ERROR, UNAVAILABLE = "ok", "timeout", "error", "unavailable"
RESULTS = (OK, TIMEOUT, ERROR, UNAVAILABLE)
_WORST_FIRST = (UNAVAILABLE, TIMEOUT, ERROR)  # which failure names a cluster's reason
DETAIL_CHARS = 160

Call = grpc.UnaryUnaryMultiCallable


class EstimatorError(FleetgateError):
    """The estimator client cannot be built (an unreadable TLS file)."""


@dataclass(frozen=True, slots=True)
class Asked:
    """What one round of questions gave: the estimates, and each call's result counted by
    (cluster, result)."""

    estimates: Estimates = field(default_factory=Estimates)
    requests: Mapping[tuple[str, str], int] = field(default_factory=dict)


def quantity_text(resource: str, milli: int) -> str:
    """The Kubernetes quantity of ``milli`` thousandths of ``resource``."""
    if resource == "cpu" or milli % 1000:
        return f"{milli}m"
    return str(milli // 1000)


def request_for(cluster: str, shape: PodShape) -> MaxAvailableReplicasRequest:
    request = {r: quantity_text(r, milli) for r, milli in shape if r != PODS and milli > 0}
    return MaxAvailableReplicasRequest(cluster, requirements_of(request))


def channel_credentials(settings: EstimatorSettings) -> grpc.ChannelCredentials | None:
    """TLS credentials when a CA file is set (None: a plain channel), read now."""
    if settings.ca_file is None:
        return None
    try:
        ca = settings.ca_file.read_bytes()
        cert = settings.cert_file.read_bytes() if settings.cert_file is not None else None
        key = settings.key_file.read_bytes() if settings.key_file is not None else None
    except OSError as error:
        raise EstimatorError(f"scheduler estimator TLS: {error}") from error
    return grpc.ssl_channel_credentials(ca, key, cert)


class EstimatorClient:
    """One channel per cluster, opened on first use and kept; :meth:`close` closes them."""

    def __init__(self, settings: EstimatorSettings) -> None:
        self.settings = settings
        self._credentials = channel_credentials(settings)
        self._channels: dict[str, tuple[str, grpc.Channel, Call]] = {}
        self._lock = threading.Lock()
        self._reported: dict[str, str] = {}  # cluster → the result last logged ("ok" or a failure)

    def clusters(self, snapshot: Snapshot) -> list[str]:
        """The Ready clusters whose estimator is asked."""
        return [c.name for c in snapshot.clusters if c.ready and self.settings.address(c.name)]

    def ask(self, snapshot: Snapshot, shapes: Sequence[PodShape]) -> Asked:
        """Every asked cluster for every shape; within ``settings.timeout`` in all."""
        clusters = self.clusters(snapshot)
        self._forget(set(clusters))
        if not clusters or not shapes:
            return Asked()
        timeout = self.settings.timeout
        deadline = time.monotonic() + timeout
        calls: list[tuple[str, PodShape, grpc.Future]] = []
        for cluster in clusters:
            method = self._method(cluster)
            for shape in shapes:
                calls.append((cluster, shape, method.future(request_for(cluster, shape), timeout)))
        replicas: dict[tuple[str, PodShape], int] = {}
        failures: dict[str, dict[str, str]] = {}  # cluster → result → its first detail
        counts: Counter[tuple[str, str]] = Counter()
        for cluster, shape, future in calls:
            result, value, detail = self._outcome(future, deadline, cluster)
            counts[cluster, result] += 1
            if result == OK:
                replicas[cluster, shape] = value
            else:
                failures.setdefault(cluster, {}).setdefault(result, detail)
        failed = {cluster: _reason(found) for cluster, found in failures.items()}
        kept = {key: n for key, n in replicas.items() if key[0] not in failed}
        self._report(clusters, failed)
        return Asked(Estimates(FrozenDict(kept), FrozenDict(failed)), dict(counts))

    def close(self) -> None:
        with self._lock:
            channels, self._channels = list(self._channels.values()), {}
        for _, channel, _ in channels:
            channel.close()

    def _method(self, cluster: str) -> Call:
        address = self.settings.address(cluster) or ""
        with self._lock:
            known = self._channels.get(cluster)
            if known is not None and known[0] == address:
                return known[2]
            if self._credentials is None:
                channel = grpc.insecure_channel(address)
            else:
                channel = grpc.secure_channel(address, self._credentials)
            method = channel.unary_unary(
                MAX_AVAILABLE_REPLICAS,
                request_serializer=encode_request,
                response_deserializer=decode_response,
            )
            self._channels[cluster] = (address, channel, method)
        if known is not None:
            known[1].close()
        return method

    def _forget(self, clusters: set[str]) -> None:
        """Close the channels of clusters no longer asked (gone, or not Ready)."""
        with self._lock:
            gone = [c for c in self._channels if c not in clusters]
            closing = [self._channels.pop(c)[1] for c in gone]
        for channel in closing:
            channel.close()

    def _outcome(self, future: grpc.Future, deadline: float, cluster: str) -> tuple[str, int, str]:
        """(result, replicas, detail) of one call, waiting no later than ``deadline``."""
        address = self.settings.address(cluster)
        try:
            response = future.result(timeout=max(0.0, deadline - time.monotonic()))
        except grpc.FutureTimeoutError:
            future.cancel()
            return TIMEOUT, 0, f"no answer from {address} within {self.settings.timeout:g}s"
        except grpc.FutureCancelledError:
            return ERROR, 0, f"{address}: cancelled (the client closed)"
        except grpc.RpcError as error:
            code = error.code() if isinstance(error, grpc.Call) else None
            details = (error.details() if isinstance(error, grpc.Call) else None) or str(error)
            if code == grpc.StatusCode.DEADLINE_EXCEEDED:
                return TIMEOUT, 0, f"no answer from {address} within {self.settings.timeout:g}s"
            if code == grpc.StatusCode.UNAVAILABLE:
                return UNAVAILABLE, 0, _short(f"{address}: {details}")
            name = code.name if code is not None else "UNKNOWN"
            return ERROR, 0, _short(f"{address}: {name}: {details}")
        if not isinstance(response, MaxAvailableReplicasResponse) or response.max_replicas < 0:
            return ERROR, 0, f"{address} answered {response!r}"
        return OK, response.max_replicas, ""

    def _report(self, clusters: Sequence[str], failed: Mapping[str, str]) -> None:
        """Log each cluster's change between answering and not (not every pass)."""
        for cluster in clusters:
            reason = failed.get(cluster)
            state = reason.split(":", 1)[0] if reason is not None else OK
            if self._reported.get(cluster, OK) == state:
                continue
            self._reported[cluster] = state
            if reason is None:
                log.info("scheduler estimator of %s answers again", cluster)
            else:
                log.warning(
                    "scheduler estimator of %s: %s; using its resource models", cluster, reason
                )


def _reason(found: Mapping[str, str]) -> str:
    """``result: detail`` of the worst failure of one cluster's calls."""
    result = next(r for r in _WORST_FIRST if r in found)
    return f"{result}: {found[result]}"


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= DETAIL_CHARS else text[: DETAIL_CHARS - 1] + "…"


__all__ = [
    "RESULTS",
    "Asked",
    "EstimatorClient",
    "EstimatorError",
    "channel_credentials",
    "quantity_text",
    "request_for",
]
