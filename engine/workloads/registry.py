"""Job kind → demand reader. One module per job family registers its readers here."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from engine.workloads.model import Workload

Reader = Callable[[Mapping[str, Any]], Workload]

# (apiVersion, kind) → reader. Filled by the family modules listed in _FAMILIES.
READERS: dict[tuple[str, str], Reader] = {}


def register(api_version: str, kind: str) -> Callable[[Reader], Reader]:
    def decorate(reader: Reader) -> Reader:
        key = (api_version, kind)
        if key in READERS:
            raise ValueError(f"two readers for {api_version} {kind}")
        READERS[key] = reader
        return reader

    return decorate


def reader_for(obj: Mapping[str, Any]) -> Reader | None:
    """The reader for a Kubernetes object, or None when fleetgate does not read its kind."""
    _load_families()
    return READERS.get((str(obj.get("apiVersion", "")), str(obj.get("kind", ""))))


def read_workload(obj: Mapping[str, Any]) -> Workload | None:
    """The object's demand; None when its kind is not a workload fleetgate reads.

    Raises DemandError (with the field path) when the object is a known kind but malformed.
    """
    reader = reader_for(obj)
    return reader(obj) if reader else None


def known_kinds() -> list[tuple[str, str]]:
    _load_families()
    return sorted(READERS)


_FAMILIES = (
    "engine.workloads.volcano",
    "engine.workloads.kubeflow",
    "engine.workloads.mpi",
    "engine.workloads.spark",
    "engine.workloads.ray",
    "engine.workloads.jobset",
    "engine.workloads.native",
)
_loaded = False


def _load_families() -> None:
    global _loaded
    if _loaded:
        return
    import importlib

    for module in _FAMILIES:
        importlib.import_module(module)
    _loaded = True
