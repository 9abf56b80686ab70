"""Kubernetes resource quantities, parsed exactly.

Follows ``k8s.io/apimachinery/pkg/api/resource``: a signed decimal number followed by a binary-SI
suffix (Ki … Ei), a decimal-SI suffix (n u m "" k M G T P E) or a decimal exponent (e3, E-2).
Values are ``fractions.Fraction`` so sums never drift.
"""

from __future__ import annotations

import re
from fractions import Fraction

from engine.errors import QuantityError

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_QUANTITY = re.compile(
    r"(?P<sign>[+-]?)(?P<number>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
    r"(?:(?P<exp>[eE][+-]?[0-9]+)|(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)"
)


def parse_quantity(value: str | int | float) -> Fraction:
    """Parse a quantity (``"500m"``, ``"8Gi"``, ``"1e3"``, ``4``) into an exact Fraction.

    Raises QuantityError with the reason when ``value`` is not a Kubernetes quantity.
    """
    if isinstance(value, bool):
        raise QuantityError(f"{value!r} is a boolean, not a quantity")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        # YAML gives floats for plain 0.5; repr() is the shortest text that round-trips.
        text = repr(value)
    elif isinstance(value, str):
        text = value
    else:
        raise QuantityError(f"{type(value).__name__} is not a quantity")
    match = _QUANTITY.fullmatch(text)
    if match is None:
        raise QuantityError(
            f"{text!r} is not a quantity: expected a number with an optional suffix "
            "(n u m k M G T P E, Ki Mi Gi Ti Pi Ei, or an exponent like e3)"
        )
    number = Fraction(match["number"])
    if match["exp"]:
        number *= Fraction(10) ** int(match["exp"][1:])
    elif match["suffix"] in _BINARY:
        number *= _BINARY[match["suffix"]]
    else:
        number *= _DECIMAL[match["suffix"] or ""]
    return -number if match["sign"] == "-" else number


def to_number(value: Fraction) -> int | float:
    """A Fraction as the plain number JSON and CEL show: int when whole, float otherwise."""
    if value.denominator == 1:
        return int(value)
    return float(value)


_FRACTIONAL_SUFFIXES = ((3, "m"), (6, "u"), (9, "n"))


def format_quantity(value: Fraction) -> str:
    """An exact Kubernetes quantity string for ``value`` (``parse_quantity`` gives it back).

    Whole numbers are written plainly; fractions with the smallest of m, u, n that makes them
    whole, else as digits with a negative exponent. Raises QuantityError for a value with no
    finite decimal form (such as 1/3), which no quantity string can express.
    """
    sign = "-" if value < 0 else ""
    magnitude = abs(value)
    if magnitude.denominator == 1:
        return f"{sign}{magnitude.numerator}"
    for digits, suffix in _FRACTIONAL_SUFFIXES:
        scaled = magnitude * 10**digits
        if scaled.denominator == 1:
            return f"{sign}{scaled.numerator}{suffix}"
    denominator = magnitude.denominator
    twos = fives = 0
    while denominator % 2 == 0:
        denominator //= 2
        twos += 1
    while denominator % 5 == 0:
        denominator //= 5
        fives += 1
    if denominator != 1:
        raise QuantityError(f"{value} has no exact decimal form")
    digits = max(twos, fives)
    return f"{sign}{(magnitude * 10**digits).numerator}e-{digits}"
