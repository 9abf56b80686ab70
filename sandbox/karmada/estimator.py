"""karmada-scheduler-estimator for the sandbox's members: Karmada's gRPC API, answered from the
member model (``engine.members``), one server per member on 127.0.0.1 (an ephemeral port each).

``MaxAvailableReplicas`` answers as Karmada's estimator (``pkg/estimator/server``, its
noderesource plugin, ``util.Resource.MaxDivided``): for each node (matching the request's
``nodeSelector``, when one is given), the fewest ``floor(free / request)`` over the requested
resources with a positive request, capped by the node's free pod slots; summed over the nodes.
A resource the node does not have gives 0 on that node. A request naming another cluster is
refused, as Karmada's server refuses it. Node affinity and tolerations (opaque bytes here) are
not read: the model's nodes have neither.

Faults, per cluster, for tests of the client's timeout and fallback: :meth:`hang` (calls wait
until :meth:`heal`, until the caller gives up, or until :meth:`stop`: no clock involved) and
:meth:`fail` (calls end with an error status).

The member model is mutated by the controllers' thread; ``guard`` (the lock their passes hold)
keeps an answer from reading a node mid-pass.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import grpc

from engine.errors import QuantityError
from engine.members import MemberCluster
from engine.quantity import parse_quantity
from engine.resources import PODS
from reconciler.estimatorwire import (
    SERVICE,
    MaxAvailableReplicasRequest,
    MaxAvailableReplicasResponse,
    ReplicaRequirements,
    decode_request,
    encode_response,
)

if TYPE_CHECKING:
    from sandbox.karmada.controllers import KarmadaControllers

log = logging.getLogger("fleetgate.sandbox.estimator")
INT32_MAX = 2**31 - 1
Answer = Callable[[MaxAvailableReplicasRequest, grpc.ServicerContext], MaxAvailableReplicasResponse]
WORKERS = 4  # threads per member's server


def max_available_replicas(member: MemberCluster, requirements: ReplicaRequirements | None) -> int:
    """How many pods of ``requirements`` the member's nodes hold now (see the module doc).
    Raises QuantityError for a request that is not a quantity."""
    wanted: dict[str, Fraction] = {}
    selector: Mapping[str, str] = {}
    if requirements is not None:
        for name, text in requirements.resource_request.items():
            amount = parse_quantity(text)
            if amount > 0 and name != PODS:
                wanted[name] = amount
        if requirements.node_claim is not None:
            selector = requirements.node_claim.node_selector
    total = 0
    for node in member.nodes():
        if any(node.labels.get(k) != v for k, v in selector.items()):
            continue
        fits = max(0, int(node.free.get_amount(PODS)))
        for name, amount in wanted.items():
            fits = min(fits, max(0, int(node.free.get_amount(name) // amount)))
        total += fits
    return min(total, INT32_MAX)


@dataclass
class _Fault:
    kind: str  # "hang" or "error"
    message: str = ""
    waiting: set[threading.Event] = field(default_factory=set)


class MemberEstimators:
    """One karmada-scheduler-estimator per member; ``start()`` → cluster → ``host:port``."""

    def __init__(
        self,
        members: Mapping[str, MemberCluster],
        guard: contextlib.AbstractContextManager[Any] | None = None,
        *,
        tls: tuple[bytes, bytes] | None = None,  # (certificate chain PEM, private key PEM)
    ) -> None:
        self.members = dict(members)
        self.guard = guard if guard is not None else contextlib.nullcontext()
        self.tls = tls
        self.addresses: dict[str, str] = {}
        self.calls: dict[str, int] = dict.fromkeys(self.members, 0)  # answered or refused
        self._servers: list[grpc.Server] = []
        self._faults: dict[str, _Fault] = {}
        self._lock = threading.Lock()

    def start(self, host: str = "127.0.0.1") -> dict[str, str]:
        """Serve every member's estimator on ``host`` (ephemeral ports)."""
        if self._servers:
            return dict(self.addresses)
        try:
            for name in sorted(self.members):
                self.addresses[name] = self._serve(name, host)
        except (OSError, RuntimeError):
            self.stop()
            raise
        return dict(self.addresses)

    def stop(self) -> None:
        """Release every hanging call, then stop the servers; idempotent."""
        with self._lock:
            faults, self._faults = list(self._faults.values()), {}
        for fault in faults:
            _release(fault)
        servers, self._servers = self._servers, []
        for server in servers:
            server.stop(grace=None)
        self.addresses = {}

    def __enter__(self) -> MemberEstimators:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- faults ----------------------------------------------------------------------------

    def hang(self, cluster: str) -> None:
        """Calls to ``cluster``'s estimator get no answer until :meth:`heal` (or the caller's
        deadline, or :meth:`stop`)."""
        self._set(cluster, _Fault("hang"))

    def fail(self, cluster: str, message: str = "fault injected") -> None:
        """Calls to ``cluster``'s estimator end with status INTERNAL and ``message``."""
        self._set(cluster, _Fault("error", message))

    def heal(self, cluster: str) -> None:
        """``cluster``'s estimator answers again; hanging calls are released (and answer)."""
        with self._lock:
            fault = self._faults.pop(cluster, None)
        if fault is not None:
            _release(fault)

    def _set(self, cluster: str, fault: _Fault) -> None:
        if cluster not in self.members:
            raise KeyError(f"no member cluster {cluster!r}")
        with self._lock:
            previous, self._faults[cluster] = self._faults.get(cluster), fault
        if previous is not None:
            _release(previous)

    # -- serving ---------------------------------------------------------------------------

    def _serve(self, name: str, host: str) -> str:
        handler = grpc.method_handlers_generic_handler(
            SERVICE,
            {
                "MaxAvailableReplicas": grpc.unary_unary_rpc_method_handler(
                    self._answerer(name),
                    request_deserializer=decode_request,
                    response_serializer=encode_response,
                )
            },
        )
        server = grpc.server(
            ThreadPoolExecutor(WORKERS, thread_name_prefix=f"estimator-{name}"),
            handlers=[handler],
        )
        self._servers.append(server)
        bind = f"{host}:0"
        if self.tls is None:
            port = server.add_insecure_port(bind)
        else:
            chain, key = self.tls
            port = server.add_secure_port(bind, grpc.ssl_server_credentials([(key, chain)]))
        if port == 0:
            raise OSError(f"cannot bind the estimator of {name} on {host}")
        server.start()
        shown = f"[{host}]" if ":" in host else host
        return f"{shown}:{port}"

    def _answerer(self, name: str) -> Answer:
        def answer(
            request: MaxAvailableReplicasRequest, context: grpc.ServicerContext
        ) -> MaxAvailableReplicasResponse:
            with self._lock:
                self.calls[name] += 1
                fault = self._faults.get(name)
                waiter = threading.Event()
                if fault is not None and fault.kind == "hang":
                    fault.waiting.add(waiter)
            if fault is not None and fault.kind == "error":
                context.abort(grpc.StatusCode.INTERNAL, fault.message)
            if fault is not None and fault.kind == "hang" and context.add_callback(waiter.set):
                waiter.wait()  # released by heal() or stop(), or the call ended (its deadline)
            if request.cluster != name:
                context.abort(
                    grpc.StatusCode.UNKNOWN,
                    f"cluster name does not match, got: {request.cluster}, desire: {name}",
                )
            try:
                with self.guard:
                    replicas = max_available_replicas(
                        self.members[name], request.replica_requirements
                    )
            except QuantityError as error:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(error))
            return MaxAvailableReplicasResponse(replicas)

        return answer


def _release(fault: _Fault) -> None:
    for waiter in list(fault.waiting):
        waiter.set()


def for_controllers(controllers: KarmadaControllers, **kwargs: Any) -> MemberEstimators:
    """Estimators over the members of a ``KarmadaControllers``, answering between its passes."""
    return MemberEstimators(controllers.fleet, controllers.pass_lock, **kwargs)


__all__ = ["MemberEstimators", "for_controllers", "max_available_replicas"]
