"""Job kind → demand reader. Each job family's module lists its readers in ``READERS``; this
module puts them together, one reader for each kind ``engine.workloads.kinds`` declares."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

from engine.workloads import jobset, kubeflow, mpi, native, ray, spark, volcano
from engine.workloads.kinds import KINDS
from engine.workloads.model import Workload

Reader = Callable[[Mapping[str, Any]], Workload]


def _readers(*families: ModuleType) -> dict[tuple[str, str], Reader]:
    readers: dict[tuple[str, str], Reader] = {}
    for family in families:
        for (api_version, kind), reader in family.READERS.items():
            if (api_version, kind) in readers:
                raise ValueError(f"two readers for {api_version} {kind}")
            readers[api_version, kind] = reader
    if readers.keys() != KINDS:
        undeclared = sorted(readers.keys() - KINDS)
        unread = sorted(KINDS - readers.keys())
        raise ValueError(f"engine.workloads.kinds: undeclared {undeclared}, no reader {unread}")
    return readers


# (apiVersion, kind) → reader
READERS: Mapping[tuple[str, str], Reader] = _readers(
    volcano, kubeflow, mpi, spark, ray, jobset, native
)


def reader_for(obj: Mapping[str, Any]) -> Reader | None:
    """The reader for a Kubernetes object, or None when fleetgate does not read its kind."""
    return READERS.get((str(obj.get("apiVersion", "")), str(obj.get("kind", ""))))


def read_workload(obj: Mapping[str, Any]) -> Workload | None:
    """The object's demand; None when its kind is not a workload fleetgate reads.

    Raises DemandError (with the field path) when the object is a known kind but malformed.
    """
    reader = reader_for(obj)
    return reader(obj) if reader else None


def known_kinds() -> list[tuple[str, str]]:
    return sorted(READERS)
