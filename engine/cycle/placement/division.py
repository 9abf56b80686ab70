"""How the pods of a splittable job are divided among the clusters that have room for them.

``order`` is the clusters ranked best first (``scoring``), ``room`` how many of the job's pods
each can hold; the total room is at least ``count``.

- BinPack fills the clusters in rank order: the fewest, best clusters.
- Spread gives each cluster ``count × its room / total room`` pods, rounded down.
- Spread by region gives each region ``count × its room / total room`` pods, rounded down,
  and fills the clusters of a region in rank order (so a region's share lands on as few of its
  clusters as it can). A cluster without a region is a region of its own.

The pods left over by rounding go to the clusters in rank order, as far as their room allows.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence


def divide(
    order: Sequence[str],
    room: Mapping[str, int],
    count: int,
    spread: bool,
    region: Callable[[str], str] | None = None,
) -> dict[str, int]:
    """Cluster → pods; ``region`` (spread by region) names each cluster's region."""
    counts: dict[str, int] = {}
    total = sum(room[n] for n in order)
    if spread and region is not None:
        regions: dict[str, list[str]] = {}
        for n in order:
            regions.setdefault(region(n) or f"cluster/{n}", []).append(n)
        for members in regions.values():
            share = count * sum(room[n] for n in members) // total
            for n in members:
                counts[n] = min(room[n], share)
                share -= counts[n]
    elif spread:
        for n in order:
            counts[n] = min(room[n], count * room[n] // total)
    left = count - sum(counts.values())
    for n in order:
        extra = min(left, room[n] - counts.get(n, 0))
        if extra > 0:
            counts[n] = counts.get(n, 0) + extra
            left -= extra
    return {n: c for n, c in counts.items() if c > 0}
