"""Exponential backoff with full jitter, bounded, from an injected random generator."""

from __future__ import annotations

import random


class Backoff:
    """``next()``: the delay after one more consecutive failure; ``reset()`` after a success.

    The n-th delay is drawn uniformly from [cap/2, cap] with cap = min(maximum, base·2ⁿ⁻¹)
    ("equal jitter": never zero, so a flapping server is not hammered, and replicas spread).
    """

    def __init__(
        self, base: float = 0.5, maximum: float = 30.0, rng: random.Random | None = None
    ) -> None:
        if base <= 0 or maximum < base:
            raise ValueError(f"backoff needs 0 < base <= maximum, got {base}, {maximum}")
        self.base = base
        self.maximum = maximum
        self._rng = rng or random.Random()
        self.failures = 0

    def next(self) -> float:
        self.failures += 1
        cap = min(self.maximum, self.base * 2 ** min(self.failures - 1, 62))
        return self._rng.uniform(cap / 2, cap)

    def reset(self) -> None:
        self.failures = 0
