"""How a trace file's columns and units map onto fleetgate's trace fields.

``--columns submit=start_time,duration=runtime,gpus=num_gpu`` names, for a canonical field, the
column of the file that holds it; ``--units submit=datetime,duration=min,memory=Gi`` says in
which unit a bare number (or a time) is written. Every field and unit is in docs/simulator.md.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction

from engine.errors import FleetgateError, QuantityError
from engine.quantity import parse_quantity

FIELDS = (
    "name",
    "submit",
    "start",
    "end",
    "duration",
    "queue",
    "tenant",
    "kind",
    "priority",
    "cluster",
    "stage",
    "after",
    "roles",
    "replicas",
    "pod_gpus",
    "pod_cpu",
    "pod_memory",
    "gpus",
    "cpu",
    "memory",
)
"""The canonical trace fields; a file column of the same name maps to it unless --columns says
otherwise."""

TIME_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "min": 60.0, "h": 3600.0}
CPU_UNITS = {"cores": Fraction(1), "m": Fraction(1, 1000), "percent": Fraction(1, 100)}
MEMORY_UNITS = {
    "B": Fraction(1),
    "Ki": Fraction(2**10),
    "Mi": Fraction(2**20),
    "Gi": Fraction(2**30),
    "Ti": Fraction(2**40),
    "KB": Fraction(10**3),
    "MB": Fraction(10**6),
    "GB": Fraction(10**9),
    "TB": Fraction(10**12),
}
PER_GPU = {"cpu": Fraction(4), "memory": Fraction(32 * 2**30)}
"""The default pod shape per GPU (``--per-gpu``): within the default node grades of a GPU node
with 8 cores and 64Gi or more per GPU (``engine.members.grades``: half of it is graded)."""
GPU_UNITS = {"devices": Fraction(1), "percent": Fraction(1, 100)}
UNITS: dict[str, tuple[str, ...]] = {
    "submit": ("auto", "datetime", *TIME_UNITS),
    "start": ("auto", "datetime", *TIME_UNITS),
    "end": ("auto", "datetime", *TIME_UNITS),
    "duration": tuple(TIME_UNITS),
    "cpu": tuple(CPU_UNITS),
    "pod_cpu": tuple(CPU_UNITS),
    "memory": tuple(MEMORY_UNITS),
    "pod_memory": tuple(MEMORY_UNITS),
    "gpus": tuple(GPU_UNITS),
    "pod_gpus": tuple(GPU_UNITS),
}
DEFAULT_UNITS = {
    "submit": "auto",
    "start": "auto",
    "end": "auto",
    "duration": "s",
    "cpu": "cores",
    "pod_cpu": "cores",
    "memory": "B",
    "pod_memory": "B",
    "gpus": "devices",
    "pod_gpus": "devices",
}


class OptionError(FleetgateError, ValueError):
    """A --columns, --units or --per-gpu value that cannot be read."""


class ValueProblem(FleetgateError, ValueError):
    """One cell that cannot be read (the reader adds file, line and column)."""


@dataclass(frozen=True, slots=True)
class ColumnMapping:
    """What ``--columns``, ``--units``, ``--per-gpu`` and ``--gpus-per-pod`` say."""

    columns: Mapping[str, str] = field(default_factory=dict)  # field → file column
    units: Mapping[str, str] = field(default_factory=dict)
    per_gpu: Mapping[str, Fraction] = field(default_factory=lambda: dict(PER_GPU))
    gpus_per_pod: int = 8
    defaults: Mapping[str, str] = field(default_factory=dict)  # field → value when absent

    def column(self, name: str) -> str:
        return self.columns.get(name, name)

    def unit(self, name: str) -> str:
        return self.units.get(name, DEFAULT_UNITS.get(name, ""))


def parse_pairs(text: str, option: str) -> dict[str, str]:
    """``a=b,c=d`` → {a: b, c: d}; an entry without ``=`` is an OptionError."""
    pairs: dict[str, str] = {}
    for item in (i.strip() for i in text.split(",")):
        if not item:
            continue
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise OptionError(f"{option} {text!r}: {item!r} is not FIELD=VALUE")
        pairs[key.strip()] = value.strip()
    return pairs


def build_mapping(
    columns: str = "",
    units: str = "",
    per_gpu: str = "",
    gpus_per_pod: int = 8,
    defaults: str = "",
) -> ColumnMapping:
    """The mapping from the command-line texts; OptionError names the option and the entry."""
    cols = parse_pairs(columns, "--columns")
    for name in cols:
        if name not in FIELDS:
            raise OptionError(f"--columns: unknown field {name!r}; fields: {', '.join(FIELDS)}")
    unit_map = parse_pairs(units, "--units")
    for name, unit in unit_map.items():
        if name not in UNITS:
            raise OptionError(f"--units: no unit for field {name!r}; fields: {', '.join(UNITS)}")
        if unit not in UNITS[name]:
            raise OptionError(f"--units {name}={unit}: expected one of {', '.join(UNITS[name])}")
    shape = dict(PER_GPU)
    for name, value in parse_pairs(per_gpu, "--per-gpu").items():
        if name not in ("cpu", "memory"):
            raise OptionError(f"--per-gpu: {name!r} is not cpu or memory")
        try:
            shape[name] = parse_quantity(value)
        except QuantityError as err:
            raise OptionError(f"--per-gpu {name}={value}: {err}") from None
    if gpus_per_pod < 1:
        raise OptionError(f"--gpus-per-pod must be at least 1, got {gpus_per_pod}")
    fixed = parse_pairs(defaults, "--set")
    for name in fixed:
        if name not in FIELDS:
            raise OptionError(f"--set: unknown field {name!r}; fields: {', '.join(FIELDS)}")
    return ColumnMapping(cols, unit_map, shape, gpus_per_pod, fixed)


# -- cells --------------------------------------------------------------------------------------


def time_value(text: str, unit: str) -> float:
    """Seconds: a number in ``unit``, or (``auto``/``datetime``) an ISO 8601 date-time as seconds
    since the Unix epoch (UTC when no offset is written)."""
    if unit != "datetime":
        try:
            return _number(text) * TIME_UNITS.get(unit, 1.0)
        except ValueProblem:
            if unit != "auto":
                raise
    try:
        moment = dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ValueProblem(f"{text!r} is neither a number nor an ISO 8601 date-time") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return moment.timestamp()


def duration_value(text: str, unit: str) -> float:
    value = _number(text) * TIME_UNITS[unit]
    if value < 0:
        raise ValueProblem(f"{text!r}: a duration cannot be negative")
    return value


def amount(text: str, unit: str, units: Mapping[str, Fraction]) -> Fraction:
    """A bare number in ``unit``; a Kubernetes quantity with a suffix (``8Gi``, ``500m``) as
    written. Negative amounts are refused."""
    text = text.strip()
    try:
        value = Fraction(text) * units[unit]
    except (ValueError, ZeroDivisionError):
        try:
            value = parse_quantity(text)
        except QuantityError as err:
            raise ValueProblem(str(err)) from None
    if value < 0:
        raise ValueProblem(f"{text!r} is negative")
    return value


def gpu_amount(text: str, unit: str) -> int:
    """Whole devices: a fraction of a GPU (``percent`` units) is rounded up."""
    return math.ceil(amount(text, unit, GPU_UNITS))


def integer(text: str, what: str, minimum: int = 0) -> int:
    try:
        value = int(_number(text))
    except ValueProblem:
        raise ValueProblem(f"{text!r}: {what} must be an integer") from None
    if value != _number(text) or value < minimum:
        raise ValueProblem(f"{text!r}: {what} must be an integer ≥ {minimum}")
    return value


def _number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueProblem(f"{text.strip()!r} is not a number") from None
    if not math.isfinite(value):
        raise ValueProblem(f"{text.strip()!r} is not a finite number")
    return value
