"""The hand-written protobuf codec of karmada-scheduler-estimator's MaxAvailableReplicas messages
(reconciler.estimatorwire): bytes derived by hand from the proto field numbers, round trips of
any message (hypothesis), unknown fields skipped, malformed bytes refused with WireError."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.fleet.frozen import FrozenDict
from reconciler import estimatorwire as wire
from reconciler.estimatorwire import (
    MaxAvailableReplicasRequest,
    MaxAvailableReplicasResponse,
    NodeClaim,
    ReplicaRequirements,
    WireError,
)


def test_a_request_is_the_bytes_its_field_numbers_give():
    request = MaxAvailableReplicasRequest(
        cluster="c1",
        replica_requirements=ReplicaRequirements(
            resource_request=FrozenDict({"cpu": "500m"}), namespace="ns"
        ),
    )
    quantity = bytes([0x0A, 4]) + b"500m"  # Quantity.string = 1, length-delimited (1 << 3 | 2)
    entry = bytes([0x0A, 3]) + b"cpu" + bytes([0x12, len(quantity)]) + quantity  # key 1, value 2
    requirements = (
        bytes([0x1A, 2]) + b"ns"  # namespace = 3: 3 << 3 | 2
        + bytes([0x2A, len(entry)]) + entry  # resourceRequestBytes = 5: 5 << 3 | 2
    )  # fmt: skip
    expected = (
        bytes([0x0A, 2]) + b"c1"  # cluster = 1
        + bytes([0x12, len(requirements)]) + requirements  # replicaRequirements = 2
    )  # fmt: skip
    assert expected.hex() == "0a02633112131a026e732a0d0a0363707512060a043530306d"
    assert wire.encode_request(request) == expected
    assert wire.decode_request(expected) == request


def test_a_node_claim_and_a_priority_class_by_hand():
    requirements = ReplicaRequirements(
        node_claim=NodeClaim(FrozenDict({"zone": "a"}), b"\x01", (b"\x02", b"")),
        priority_class_name="hi",
    )
    entry = bytes([0x0A, 4]) + b"zone" + bytes([0x12, 1]) + b"a"
    claim = (
        bytes([0x12, len(entry)]) + entry  # nodeSelector = 2
        + bytes([0x22, 1, 1])  # nodeAffinityBytes = 4
        + bytes([0x2A, 1, 2]) + bytes([0x2A, 0])  # tolerationsBytes = 5, repeated
    )  # fmt: skip
    expected = bytes([0x0A, len(claim)]) + claim + bytes([0x22, 2]) + b"hi"  # 1, then 4
    assert wire.encode_replica_requirements(requirements) == expected
    assert wire.decode_replica_requirements(expected) == requirements


def test_an_empty_node_claim_is_present_and_empty_strings_are_left_out():
    assert wire.encode_replica_requirements(ReplicaRequirements(node_claim=NodeClaim())) == (
        b"\x0a\x00"
    )
    assert wire.encode_request(MaxAvailableReplicasRequest("")) == b""
    assert wire.decode_request(b"") == MaxAvailableReplicasRequest("")


@pytest.mark.parametrize(
    ("replicas", "encoded"),
    [
        (0, ""),  # proto3: the default is not written
        (1, "0801"),
        (300, "08ac02"),
        (2**31 - 1, "08ffffffff07"),
        (-1, "08ffffffffffffffffff01"),  # a negative int32 is ten bytes, as int64
    ],
)
def test_a_response_by_hand(replicas: int, encoded: str):
    response = MaxAvailableReplicasResponse(replicas)
    assert wire.encode_response(response).hex() == encoded
    assert wire.decode_response(bytes.fromhex(encoded)) == response


def test_a_quantity_is_apimachinery_s_message():
    assert wire.encode_quantity("8Gi") == b"\x0a\x038Gi"
    assert wire.encode_quantity("") == b"\x0a\x00"  # proto2 optional: written when set
    assert wire.decode_quantity(b"\x0a\x038Gi") == "8Gi"


def test_out_of_range_responses_are_refused():
    with pytest.raises(WireError, match="int32"):
        wire.encode_response(MaxAvailableReplicasResponse(2**31))


# -- round trips -------------------------------------------------------------------------------

texts = st.text(max_size=12)
node_claims = st.builds(
    NodeClaim,
    st.dictionaries(texts, texts, max_size=4).map(FrozenDict),
    st.binary(max_size=8),
    st.lists(st.binary(max_size=8), max_size=3).map(tuple),
)
requirements = st.builds(
    ReplicaRequirements,
    st.dictionaries(texts, texts, max_size=5).map(FrozenDict),
    st.none() | node_claims,
    texts,
    texts,
)
requests = st.builds(MaxAvailableReplicasRequest, texts, st.none() | requirements)


@given(requests)
def test_any_request_round_trips(request: MaxAvailableReplicasRequest):
    assert wire.decode_request(wire.encode_request(request)) == request


@given(st.integers(wire.INT32_MIN, wire.INT32_MAX))
def test_any_int32_response_round_trips(replicas: int):
    response = MaxAvailableReplicasResponse(replicas)
    assert wire.decode_response(wire.encode_response(response)) == response


@given(st.integers(0, 2**64 - 1))
def test_any_varint_round_trips(value: int):
    encoded = wire.varint(value)
    assert wire.read_varint(encoded + b"\xff", 0) == (value, len(encoded))


unknown_fields = st.sampled_from(
    [
        b"\x18\x05",  # 3: varint (assumedWorkloads' number, as a client of another version)
        b"\x1a\x03abc",  # 3: length-delimited
        b"\x79" + bytes(8),  # 15: fixed64
        b"\x7d" + bytes(4),  # 15: fixed32
        b"\xf8\x07\x01",  # 127: varint
    ]
)


@given(requests, st.lists(unknown_fields, max_size=3))
def test_unknown_fields_are_skipped(request: MaxAvailableReplicasRequest, extra: list[bytes]):
    encoded = wire.encode_request(request)
    assert wire.decode_request(b"".join(extra) + encoded + b"".join(extra)) == request


@given(st.binary(max_size=64))
def test_any_bytes_decode_or_raise_wire_error(data: bytes):
    for decode in (wire.decode_request, wire.decode_response, wire.decode_replica_requirements):
        with contextlib.suppress(WireError):
            decode(data)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"\x0a\x05ab", "5 bytes announced"),
        (b"\x0a\x02\xff\xfe", "not UTF-8"),
        (b"\x08", "truncated varint"),
        (b"\x08" + b"\xff" * 10 + b"\x01", "longer than 10 bytes"),
        (b"\x0b", "wire type 3"),
        (b"\x00\x01", "field number 0"),
        (b"\x08\x01", "expected length-delimited"),  # cluster as a varint
    ],
)
def test_malformed_requests_are_refused(data: bytes, message: str):
    with pytest.raises(WireError, match=message):
        wire.decode_request(data)
