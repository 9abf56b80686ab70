"""How a reconciler runs: the settings ``fleetgate serve``'s flags give it."""

from __future__ import annotations

from dataclasses import dataclass

from engine.enforce import Mode
from reconciler.writers import DEFAULT_WRITE_WORKERS


@dataclass(frozen=True, slots=True)
class ReconcilerSettings:
    mode: Mode | str = Mode.BIND  # bind: fleetgate writes spec.clusters; release: Karmada's
    debounce: float = 0.2  # seconds a burst of events settles before a pass
    resync: float = 30.0  # seconds between passes when no event comes
    request_timeout: float = 30.0  # seconds per API call: a hung server is an error
    write_workers: int = DEFAULT_WRITE_WORKERS  # threads a pass's writes go out on
