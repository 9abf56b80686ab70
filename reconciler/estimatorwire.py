"""The protobuf messages of Karmada's karmada-scheduler-estimator ``MaxAvailableReplicas`` call,
encoded and decoded by hand (no generated code, no ``protobuf`` package).

Written from Karmada's published API (``pkg/estimator/pb/estimator.proto``, package
``github.com.karmada_io.karmada.pkg.estimator.pb``; ``pkg/estimator/service/service.proto``)::

    MaxAvailableReplicasRequest  { string cluster = 1; ReplicaRequirements replicaRequirements = 2;
                                   repeated AssumedWorkload assumedWorkloads = 3; }
    ReplicaRequirements          { optional NodeClaim nodeClaim = 1; (2 reserved)
                                   string namespace = 3; string priorityClassName = 4;
                                   map<string, bytes> resourceRequestBytes = 5; }
    NodeClaim                    { (1 reserved) map<string, string> nodeSelector = 2;
                                   (3 reserved) bytes nodeAffinityBytes = 4;
                                   repeated bytes tolerationsBytes = 5; }
    MaxAvailableReplicasResponse { int32 maxReplicas = 1; }

Each value of ``resourceRequestBytes`` is a serialized Kubernetes ``resource.Quantity``
(apimachinery's ``generated.proto``: ``message Quantity { optional string string = 1; }``); here
it is the quantity's text (``"500m"``, ``"8"``). ``nodeAffinityBytes`` and ``tolerationsBytes``
(serialized ``corev1.NodeSelector`` / ``corev1.Toleration``) are carried as opaque bytes.
``assumedWorkloads`` is neither sent nor read (fleetgate sends none; a server skips it as an
unknown field, which proto3 allows).

The wire format (protobuf encoding): a field is a varint key ``number << 3 | wire type`` and a
value; wire type 0 is a varint, 2 a varint length and that many bytes (strings, bytes, embedded
messages, and each map entry: a message with key = 1 and value = 2). proto3 leaves fields at
their default out; ``nodeClaim`` has presence (``optional``) and is written when set, even empty.
Map entries are written sorted by key, so equal messages encode to equal bytes. Decoding skips
unknown fields of wire types 0, 1, 2 and 5; a repeated scalar field keeps its last value.

Pure: no I/O and no ``grpc`` (the client, :mod:`reconciler.estimator`, and the sandbox's server
both use it).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from engine.errors import FleetgateError
from engine.fleet.frozen import FrozenDict

SERVICE = "github.com.karmada_io.karmada.pkg.estimator.service.Estimator"
MAX_AVAILABLE_REPLICAS = f"/{SERVICE}/MaxAvailableReplicas"

VARINT, FIXED64, LENGTH, FIXED32 = 0, 1, 2, 5
_FIXED = {FIXED64: 8, FIXED32: 4}
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
_UINT64 = 2**64


class WireError(FleetgateError, ValueError):
    """Bytes that are not a valid encoding of the expected message."""


# -- messages ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class NodeClaim:
    node_selector: FrozenDict[str, str] = field(default_factory=FrozenDict)
    node_affinity: bytes = b""  # a serialized corev1.NodeSelector, opaque here
    tolerations: tuple[bytes, ...] = ()  # serialized corev1.Tolerations, opaque here


@dataclass(frozen=True, slots=True)
class ReplicaRequirements:
    # resource name → Kubernetes quantity text, each sent as a serialized resource.Quantity
    resource_request: FrozenDict[str, str] = field(default_factory=FrozenDict)
    node_claim: NodeClaim | None = None
    namespace: str = ""
    priority_class_name: str = ""


@dataclass(frozen=True, slots=True)
class MaxAvailableReplicasRequest:
    cluster: str
    replica_requirements: ReplicaRequirements | None = None


@dataclass(frozen=True, slots=True)
class MaxAvailableReplicasResponse:
    max_replicas: int  # int32


# -- primitives -------------------------------------------------------------------------------


def varint(value: int) -> bytes:
    """Base-128 varint of an unsigned value below 2^64 (a negative int32/int64 is first taken
    modulo 2^64, as protobuf does: ten bytes)."""
    if value < 0:
        value += _UINT64
    if not 0 <= value < _UINT64:
        raise WireError(f"{value} does not fit in 64 bits")
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def read_varint(data: bytes, at: int) -> tuple[int, int]:
    """(value, offset after it) of the varint at ``data[at:]``."""
    value = shift = 0
    while True:
        if at >= len(data):
            raise WireError("truncated varint")
        if shift >= 64:
            raise WireError("varint longer than 10 bytes")
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            if value >= _UINT64:
                raise WireError("varint above 2^64")
            return value, at
        shift += 7


def _key(number: int, wire_type: int) -> bytes:
    return varint(number << 3 | wire_type)


def _length_delimited(number: int, payload: bytes) -> bytes:
    return _key(number, LENGTH) + varint(len(payload)) + payload


def _string(number: int, text: str) -> bytes:
    return _length_delimited(number, text.encode()) if text else b""


def _map_entry(number: int, key: bytes, value: bytes) -> bytes:
    return _length_delimited(number, _length_delimited(1, key) + _length_delimited(2, value))


def fields(data: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """(field number, wire type, value) of each field: an int for varints and fixed-width
    fields (little-endian), the payload bytes for length-delimited ones."""
    at = 0
    while at < len(data):
        key, at = read_varint(data, at)
        number, wire_type = key >> 3, key & 7
        if number == 0:
            raise WireError("field number 0")
        if wire_type == VARINT:
            value, at = read_varint(data, at)
            yield number, wire_type, value
        elif wire_type == LENGTH:
            size, at = read_varint(data, at)
            if at + size > len(data):
                raise WireError(f"field {number}: {size} bytes announced, {len(data) - at} left")
            yield number, wire_type, data[at : at + size]
            at += size
        elif wire_type in _FIXED:
            width = _FIXED[wire_type]
            if at + width > len(data):
                raise WireError(f"field {number}: truncated fixed-width value")
            yield number, wire_type, int.from_bytes(data[at : at + width], "little")
            at += width
        else:
            raise WireError(f"field {number}: unsupported wire type {wire_type}")


def _payload(number: int, wire_type: int, value: int | bytes) -> bytes:
    if wire_type != LENGTH or not isinstance(value, bytes):
        raise WireError(f"field {number}: expected length-delimited, got wire type {wire_type}")
    return value


def _text(number: int, wire_type: int, value: int | bytes) -> str:
    try:
        return _payload(number, wire_type, value).decode()
    except UnicodeDecodeError as error:
        raise WireError(f"field {number}: not UTF-8: {error}") from None


def _int(number: int, wire_type: int, value: int | bytes) -> int:
    if wire_type != VARINT or not isinstance(value, int):
        raise WireError(f"field {number}: expected a varint, got wire type {wire_type}")
    return value


def _entry(data: bytes) -> tuple[bytes, bytes]:
    key = value = b""
    for number, wire_type, item in fields(data):
        if number == 1:
            key = _payload(number, wire_type, item)
        elif number == 2:
            value = _payload(number, wire_type, item)
    return key, value


def _utf8(raw: bytes, what: str) -> str:
    try:
        return raw.decode()
    except UnicodeDecodeError as error:
        raise WireError(f"{what}: not UTF-8: {error}") from None


# -- resource.Quantity ------------------------------------------------------------------------


def encode_quantity(text: str) -> bytes:
    """A ``resource.Quantity`` (proto2 ``optional string string = 1``: written even empty)."""
    return _length_delimited(1, text.encode())


def decode_quantity(data: bytes) -> str:
    text = ""
    for number, wire_type, value in fields(data):
        if number == 1:
            text = _text(number, wire_type, value)
    return text


# -- the messages -----------------------------------------------------------------------------


def encode_node_claim(claim: NodeClaim) -> bytes:
    out = bytearray()
    for key, value in sorted(claim.node_selector.items()):
        out += _map_entry(2, key.encode(), value.encode())
    if claim.node_affinity:
        out += _length_delimited(4, claim.node_affinity)
    for toleration in claim.tolerations:
        out += _length_delimited(5, toleration)
    return bytes(out)


def decode_node_claim(data: bytes) -> NodeClaim:
    selector: dict[str, str] = {}
    affinity = b""
    tolerations: list[bytes] = []
    for number, wire_type, value in fields(data):
        if number == 2:
            key, item = _entry(_payload(number, wire_type, value))
            selector[_utf8(key, "nodeSelector key")] = _utf8(item, "nodeSelector value")
        elif number == 4:
            affinity = _payload(number, wire_type, value)
        elif number == 5:
            tolerations.append(_payload(number, wire_type, value))
    return NodeClaim(FrozenDict(selector), affinity, tuple(tolerations))


def encode_replica_requirements(requirements: ReplicaRequirements) -> bytes:
    out = bytearray()
    if requirements.node_claim is not None:
        out += _length_delimited(1, encode_node_claim(requirements.node_claim))
    out += _string(3, requirements.namespace)
    out += _string(4, requirements.priority_class_name)
    for name, quantity in sorted(requirements.resource_request.items()):
        out += _map_entry(5, name.encode(), encode_quantity(quantity))
    return bytes(out)


def decode_replica_requirements(data: bytes) -> ReplicaRequirements:
    claim: NodeClaim | None = None
    namespace = priority_class = ""
    request: dict[str, str] = {}
    for number, wire_type, value in fields(data):
        if number == 1:
            claim = decode_node_claim(_payload(number, wire_type, value))
        elif number == 3:
            namespace = _text(number, wire_type, value)
        elif number == 4:
            priority_class = _text(number, wire_type, value)
        elif number == 5:
            key, item = _entry(_payload(number, wire_type, value))
            request[_utf8(key, "resourceRequestBytes key")] = decode_quantity(item)
    return ReplicaRequirements(FrozenDict(request), claim, namespace, priority_class)


def encode_request(request: MaxAvailableReplicasRequest) -> bytes:
    out = bytearray(_string(1, request.cluster))
    if request.replica_requirements is not None:
        out += _length_delimited(2, encode_replica_requirements(request.replica_requirements))
    return bytes(out)


def decode_request(data: bytes) -> MaxAvailableReplicasRequest:
    cluster = ""
    requirements: ReplicaRequirements | None = None
    for number, wire_type, value in fields(data):
        if number == 1:
            cluster = _text(number, wire_type, value)
        elif number == 2:
            requirements = decode_replica_requirements(_payload(number, wire_type, value))
    return MaxAvailableReplicasRequest(cluster, requirements)


def encode_response(response: MaxAvailableReplicasResponse) -> bytes:
    replicas = response.max_replicas
    if not INT32_MIN <= replicas <= INT32_MAX:
        raise WireError(f"maxReplicas {replicas} is not an int32")
    return _key(1, VARINT) + varint(replicas) if replicas else b""


def decode_response(data: bytes) -> MaxAvailableReplicasResponse:
    replicas = 0
    for number, wire_type, value in fields(data):
        if number == 1:
            raw = _int(number, wire_type, value) & 0xFFFFFFFF  # int32: the low 32 bits
            replicas = raw - 2**32 if raw > INT32_MAX else raw
    return MaxAvailableReplicasResponse(replicas)


def requirements_of(request: Mapping[str, str]) -> ReplicaRequirements:
    """Requirements asking for ``request`` (resource → quantity text) and nothing else."""
    return ReplicaRequirements(FrozenDict(request))


__all__ = [
    "MAX_AVAILABLE_REPLICAS",
    "SERVICE",
    "MaxAvailableReplicasRequest",
    "MaxAvailableReplicasResponse",
    "NodeClaim",
    "ReplicaRequirements",
    "WireError",
    "decode_quantity",
    "decode_request",
    "decode_response",
    "encode_quantity",
    "encode_request",
    "encode_response",
    "requirements_of",
]
