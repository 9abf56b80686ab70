"""Kubernetes quantities: exact parsing, formatting that round-trips, sums without drift."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.errors import QuantityError
from engine.quantity import format_quantity, parse_quantity
from engine.resources import Resources


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("500m", Fraction(1, 2)),
        ("2", 2),
        ("0.1", Fraction(1, 10)),
        (".5", Fraction(1, 2)),
        ("1e3", 1000),
        ("1E-2", Fraction(1, 100)),
        ("100M", 100 * 10**6),
        ("100Mi", 100 * 2**20),
        ("1.5Gi", 1536 * 2**20),
        ("8Ki", 8192),
        ("2k", 2000),
        ("3T", 3 * 10**12),
        ("1P", 10**15),
        ("1Ei", 2**60),
        ("250u", Fraction(1, 4000)),
        ("7n", Fraction(7, 10**9)),
        ("+4", 4),
        ("1E", 10**18),
        (4, 4),
        (0.25, Fraction(1, 4)),
    ],
    ids=lambda v: repr(v),
)
def test_parses_every_suffix_exactly(text, value):
    assert parse_quantity(text) == value


def test_decimal_mega_is_not_binary_mebi():
    assert parse_quantity("128M") == 128_000_000
    assert parse_quantity("128Mi") == 134_217_728


@pytest.mark.parametrize(
    "text", ["", " 1", "1 Gi", "1KB", "1.2.3", "Gi", "e3", "1e", "--1", "1gi", "0x10", "1.5e3Mi"]
)
def test_rejects_malformed(text):
    with pytest.raises(QuantityError):
        parse_quantity(text)


def test_no_float_drift_in_sums():
    # as floats, 0.1 + 0.1 + 0.1 == 0.30000000000000004
    total = Resources.sum(Resources({"cpu": parse_quantity("100m")}) for _ in range(3))
    assert total["cpu"] == parse_quantity("300m")


suffix = st.sampled_from(["", "m", "k", "M", "G", "T", "Ki", "Mi", "Gi", "Ti", "u", "n"])
# At most 999999.999999Ti (about 1.1e18): within the 2^63-1 cap on a quantity.
number = st.from_regex(r"\A(0|[1-9][0-9]{0,5})(\.[0-9]{1,6})?\Z")


@given(number, suffix)
def test_format_round_trips_every_parsed_quantity(num, unit):
    value = parse_quantity(num + unit)
    assert parse_quantity(format_quantity(value)) == value


@given(st.fractions(min_value=0, max_value=10**12, max_denominator=10**9))
def test_format_round_trips_or_refuses_fractions(value):
    try:
        text = format_quantity(value)
    except QuantityError:
        denominator = value.denominator
        for prime in (2, 5):
            while denominator % prime == 0:
                denominator //= prime
        assert denominator != 1
        return
    assert parse_quantity(text) == value


@given(st.lists(st.tuples(number, suffix), min_size=1, max_size=30))
def test_sums_are_exact_and_order_free(items):
    values = [parse_quantity(n + u) for n, u in items]
    forward = Resources.sum(Resources({"x": v}) for v in values)
    backward = Resources.sum(Resources({"x": v}) for v in reversed(values))
    assert forward == backward
    assert forward.get_amount("x") == sum(values, Fraction(0))


@given(st.text(max_size=12))
def test_arbitrary_text_parses_or_raises_quantity_error(text):
    try:
        value = parse_quantity(text)
    except QuantityError:
        return
    assert isinstance(value, Fraction)
