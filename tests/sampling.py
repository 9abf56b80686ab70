"""Drawing a sample of a property's examples to check that the property checks something.

Hypothesis also draws numbers and strings it finds in the project's modules loaded so far, so
a derandomized (or seeded) run draws other examples after other tests have run: a single run
of a fixed size may miss a rare case in one process and see it in the next. ``until_covered``
draws seeded runs until the sample covers what it must, a bounded number of them.
"""

from __future__ import annotations

from collections.abc import Callable

BATCHES = 8  # seeded runs at most


def until_covered(
    batch: Callable[[int], None], covered: Callable[[], bool], batches: int = BATCHES
) -> None:
    """Call ``batch(seed)`` for seeds 0, 1, … until ``covered()`` or ``batches`` calls;
    the caller then asserts what the sample must cover, saying what it saw."""
    for number in range(batches):
        batch(number)
        if covered():
            return
