"""``fleetgate bench -o text``: the numbers of ``engine.bench.runner.run`` as aligned lines.

The keys are the JSON keys, so what the docs say about a field holds for both outputs; nested
objects are indented sections. Durations (keys ending in ``_seconds``, and the values of such a
section) are shown in ms below one second, else in s; counts get thousands separators.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

INDENT = "  "
COLD_NOTE = "--repeats 1 runs no warm cycle, so the p50 is the cold cycle"


def text(numbers: Mapping[str, Any]) -> str:
    rows = list(_rows(numbers, depth=0, seconds=False))
    width = max(len(label) for label, _ in rows) + 1
    return "\n".join(
        f"{label:{width}}{value}".rstrip() if value else label for label, value in rows
    )


def _rows(numbers: Mapping[str, Any], depth: int, seconds: bool) -> Iterator[tuple[str, str]]:
    for key, value in numbers.items():
        label = f"{INDENT * depth}{key}:"
        timed = seconds or key.endswith("_seconds")
        if isinstance(value, Mapping):
            yield label, ""
            yield from _rows(value, depth + 1, timed)
        elif key == "p50_of" and value == "cold":
            yield label, f"cold ({COLD_NOTE})"
        else:
            yield label, _value(value, timed)


def _value(value: Any, seconds: bool) -> str:
    if isinstance(value, list | tuple):
        return ", ".join(_value(v, seconds) for v in value) or "none"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    if seconds:
        return f"{value * 1000:.1f} ms" if value < 1 else f"{value:.2f} s"
    return f"{value:,}"
