"""Kubernetes resource quantities, parsed exactly.

Follows ``k8s.io/apimachinery/pkg/api/resource``: a signed decimal number followed by a binary-SI
suffix (Ki … Ei), a decimal-SI suffix (n u m "" k M G T P E) or a decimal exponent (e3, E-2).
Values are ``fractions.Fraction`` so sums never drift.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

from engine.errors import QuantityError

MAX_QUANTITY = 2**63 - 1
"""The largest magnitude of a quantity, in base units: Kubernetes' cap (int64's largest value)."""
MAX_DECIMAL_PLACES = 30
"""The finest a quantity may be written: 1e-30 of a base unit (Kubernetes itself keeps 1n)."""

_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}  # powers of two
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_QUANTITY = re.compile(
    r"(?P<sign>[+-]?)(?:(?P<whole>[0-9]+)(?:\.(?P<point>[0-9]*))?|\.(?P<fraction>[0-9]+))"
    r"(?:[eE](?P<exp>[+-]?[0-9]+)|(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)"
)
# Any non-zero value with a decimal exponent of more digits than this is out of both limits.
_EXPONENT_DIGITS = 6


def parse_quantity(value: str | int | float) -> Fraction:
    """Parse a quantity (``"500m"``, ``"8Gi"``, ``"1e3"``, ``4``) into an exact Fraction.

    Raises QuantityError with the reason when ``value`` is not a Kubernetes quantity, or is
    larger in magnitude than MAX_QUANTITY or finer than MAX_DECIMAL_PLACES. Both limits are
    decided from the digit and exponent counts before any arithmetic, so hostile input such as
    ``"1e99999999"`` is refused in microseconds.
    """
    if isinstance(value, bool):
        raise QuantityError(f"{value!r} is a boolean, not a quantity")
    if isinstance(value, int):
        if abs(value) > MAX_QUANTITY:  # str() of a huge int is slow, or refused past 4300 digits
            bits = value.bit_length()
            raise _too_large(str(value) if bits <= 256 else f"(a {bits}-bit integer)")
        return Fraction(value)
    if isinstance(value, float):
        if math.isnan(value):
            raise QuantityError("NaN is not a quantity")
        if math.isinf(value) or abs(value) > MAX_QUANTITY:
            raise _too_large(repr(value) if math.isfinite(value) else "(a number beyond a float)")
        # YAML gives floats for plain 0.5; repr() is the shortest text that round-trips.
        text = repr(value)
    elif isinstance(value, str):
        text = value
    else:
        raise QuantityError(f"{type(value).__name__} is not a quantity")
    match = _QUANTITY.fullmatch(text)
    if match is None:
        raise QuantityError(
            f"{_shown(text)} is not a quantity: expected a number with an optional suffix "
            "(n u m k M G T P E, Ki Mi Gi Ti Pi Ei, or an exponent like e3)"
        )
    magnitude = _magnitude(match, text)
    return -magnitude if match["sign"] == "-" else magnitude


def _magnitude(match: re.Match[str], text: str) -> Fraction:
    """The absolute value of a matched quantity, its limits checked on lengths first."""
    decimals = match["point"] or match["fraction"] or ""
    significant = ((match["whole"] or "") + decimals).lstrip("0")
    if not significant:
        return Fraction(0)
    suffix = match["suffix"] or ""
    exponent = _exponent(match["exp"], text) if match["exp"] else _DECIMAL.get(suffix, 0)
    shift = _BINARY.get(suffix, 0)
    mantissa = significant.rstrip("0")
    # magnitude = int(mantissa) * 10**scale * 2**shift, and int(mantissa) >= 10**(len - 1)
    scale = exponent - len(decimals) + len(significant) - len(mantissa)
    if len(mantissa) - 1 + scale > 19:  # at least 10**20
        raise _too_large(_shown(text))
    if scale < -MAX_DECIMAL_PLACES:
        raise _too_precise(text)
    # Now mantissa has at most 50 digits and 10**-30 <= 10**scale <= 10**19: cheap.
    whole = int(mantissa) << shift
    magnitude = Fraction(whole * 10**scale) if scale >= 0 else Fraction(whole, 10**-scale)
    if magnitude > MAX_QUANTITY:
        raise _too_large(_shown(text))
    return magnitude


def _exponent(digits: str, text: str) -> int:
    """A decimal exponent; one too long to hold a non-zero quantity is refused unread."""
    sign = -1 if digits.startswith("-") else 1
    digits = digits.lstrip("+-").lstrip("0")
    if len(digits) > _EXPONENT_DIGITS:
        raise _too_precise(text) if sign < 0 else _too_large(_shown(text))
    return sign * int(digits or "0")


def _shown(text: str) -> str:
    """``text`` quoted for a message, long text cut to its start and its length."""
    if len(text) <= 40:
        return repr(text)
    return f"{text[:24]!r}… ({len(text)} characters)"


def _too_large(shown: str) -> QuantityError:
    return QuantityError(
        f"quantity {shown} is too large: the most is {MAX_QUANTITY} (2^63-1) in magnitude"
    )


def _too_precise(text: str) -> QuantityError:
    return QuantityError(
        f"quantity {_shown(text)} is too precise: the finest is 1e-{MAX_DECIMAL_PLACES}"
    )


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
