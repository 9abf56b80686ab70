"""How fleetgate names a job template everywhere: tables, JSON, reasons and webhook messages.

``Kind/namespace/name``, with the kind qualified by its API group as kubectl writes it
(``Kind.group``) when more than one API group that fleetgate reads has a kind of that name:
a Volcano Job is ``Job.batch.volcano.sh/ns/name`` and a batch/v1 Job ``Job.batch/ns/name``, so
the two can never be confused. A kind of another group that shares a name with a kind
fleetgate reads is qualified too. Every other kind stays short (``PyTorchJob/ns/name``).
"""

from __future__ import annotations

import functools

from engine.workloads.kinds import KINDS


def group_of(api_version: str) -> str:
    """The API group of ``group/version`` ("" for the core group's ``v1``)."""
    group, _, _ = api_version.rpartition("/")
    return group


@functools.cache
def _groups_by_kind() -> dict[str, frozenset[str]]:
    groups: dict[str, set[str]] = {}
    for api_version, kind in KINDS:
        groups.setdefault(kind, set()).add(group_of(api_version))
    return {kind: frozenset(found) for kind, found in groups.items()}


@functools.lru_cache(maxsize=1024)
def qualified_kind(api_version: str, kind: str) -> str:
    """``kind``, or ``kind.group`` where the kind's name alone is ambiguous."""
    groups = _groups_by_kind().get(kind)
    group = group_of(api_version)
    if groups and group and (len(groups) > 1 or group not in groups):
        return f"{kind}.{group}"
    return kind


def qualified_name(api_version: str, kind: str, namespace: str, name: str) -> str:
    """``Kind/namespace/name`` (``Kind/name`` without a namespace), the kind qualified where
    needed (``qualified_kind``)."""
    shown = qualified_kind(api_version, kind)
    return f"{shown}/{namespace}/{name}" if namespace else f"{shown}/{name}"
