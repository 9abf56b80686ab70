"""The null cycle of ``fleetgate bench`` (engine.bench.nullcycle): order, then first fit."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from engine.bench.nullcycle import null_cycle, prepare


def test_jobs_go_in_order_to_the_first_cluster_with_room() -> None:
    jobs = [
        ((2, "late"), {"gpu": 4}),
        ((1, "first"), {"gpu": 6, "cpu": 1}),
        ((3, "last"), {"gpu": 2}),
        ((0, "huge"), {"gpu": 9}),  # more than any cluster has: skipped at once
    ]
    clusters = [{"gpu": 8, "cpu": 4}, {"gpu": 4, "cpu": 4}]
    prepared = prepare(jobs, clusters)
    # first (6) on the first cluster, late (4) on the second, last (2) back on the first
    assert null_cycle(prepared) == 3
    assert prepared[1] == [[4, 8], [4, 4]]  # the clusters as read: cpu, gpu; not changed
    assert null_cycle(prepared) == 3  # so a repeat sees the same fleet


@given(
    st.lists(st.tuples(st.integers(0, 5), st.integers(0, 9), st.integers(0, 3)), max_size=30),
    st.lists(st.tuples(st.integers(0, 12), st.integers(0, 6)), max_size=4),
)
def test_it_admits_what_a_plain_first_fit_admits(jobs, clusters) -> None:
    keyed = [((key, i), {"gpu": gpu, "cpu": cpu}) for i, (key, gpu, cpu) in enumerate(jobs)]
    fleet = [{"gpu": gpu, "cpu": cpu} for gpu, cpu in clusters]
    rooms = [dict(room) for room in fleet]
    expected = 0
    for _, demand in sorted(keyed, key=lambda item: item[0]):
        for room in rooms:
            if all(room[name] >= amount for name, amount in demand.items()):
                for name, amount in demand.items():
                    room[name] -= amount
                expected += 1
                break
    assert null_cycle(prepare(keyed, fleet)) == expected
