"""``scheduling.k8s.io/v1 PriorityClass`` → PriorityClassView."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.fleet.fields import expect_bool, expect_int, metadata
from engine.fleet.model import PriorityClassView

# Kubernetes allows user classes up to 1e9; system classes (system-*) go to 2e9.
HIGHEST_SYSTEM_PRIORITY = 2_000_001_000


def read_priority_class(obj: Mapping[str, Any]) -> PriorityClassView:
    meta = metadata(obj)
    return PriorityClassView(
        name=meta.name,
        value=expect_int(obj.get("value"), "value", minimum=-HIGHEST_SYSTEM_PRIORITY),
        global_default=expect_bool(obj.get("globalDefault"), "globalDefault"),
    )
