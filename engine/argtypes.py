"""``type=`` converters shared by the command lines (argparse only: cheap to import)."""

from __future__ import annotations

import argparse
import datetime as dt


def port(text: str) -> int:
    """A TCP port, 0 (any free port) to 65535."""
    value = int(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be 0…65535, got {value}")
    return value


def more_than_zero(text: str, unit: str = "") -> float:
    """A finite float above 0; ``unit`` (e.g. " seconds") follows the 0 in the error."""
    value = float(text)
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be more than 0{unit}, got {text}")
    return value


def workers(text: str) -> int:
    """A count of concurrent workers, 1 to 64."""
    value = int(text)
    if not 1 <= value <= 64:
        raise argparse.ArgumentTypeError(f"must be 1…64, got {value}")
    return value


def positive_int(text: str) -> int:
    """An integer of 1 or more."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"must be an integer of at least 1, got {text!r}"
        ) from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def rfc3339(text: str) -> dt.datetime:
    """An RFC 3339 time, e.g. 2026-01-01T00:00:00Z."""
    from engine.annotations import parse_time

    value = parse_time(text)
    if value is None:
        raise argparse.ArgumentTypeError(f"not an RFC 3339 time: {text!r}")
    return value
