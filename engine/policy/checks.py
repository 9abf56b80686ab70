"""Checks across documents: names, the queue tree, and quota arithmetic."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from fractions import Fraction

from engine.policy.model import Queue
from engine.quantity import to_number

# reports (queue name, JSON path, message)
Report = Callable[[str, tuple[str | int, ...], str], None]


def check_queues(queues: Sequence[Queue], report: Report) -> None:
    """Unknown or cyclic parents, guarantee above max, children guaranteed more than the parent,
    and limits that contradict the quotas they limit."""
    by_name = {q.name: q for q in queues}
    for queue in queues:
        _check_own_quota(queue, report)
        if queue.parent is not None and queue.parent not in by_name:
            known = ", ".join(sorted(by_name)) or "none"
            report(
                queue.name,
                ("spec", "parent"),
                f"unknown parent queue {queue.parent!r}; queues defined: {known}",
            )
    for cycle in _cycles(by_name):
        chain = " → ".join([*cycle, cycle[0]])
        for name in cycle:
            report(name, ("spec", "parent"), f"queue parents form a cycle: {chain}")
    children: dict[str, list[Queue]] = defaultdict(list)
    for queue in queues:
        if queue.parent in by_name:
            children[queue.parent].append(queue)
    for parent_name, kids in sorted(children.items()):
        parent = by_name[parent_name]
        for resource, total in sorted(_sum(q.guarantee for q in kids).items()):
            if resource in parent.guarantee and total > parent.guarantee[resource]:
                names = ", ".join(sorted(q.name for q in kids if resource in q.guarantee))
                report(
                    parent.name,
                    ("spec", "guarantee", resource),
                    f"children ({names}) are guaranteed {_n(total)} {resource} in all, "
                    f"more than this queue's guarantee of {_n(parent.guarantee[resource])}",
                )


def _check_own_quota(queue: Queue, report: Report) -> None:
    for resource, amount in sorted(queue.guarantee.items()):
        ceiling = queue.max.get(resource)
        if ceiling is not None and amount > ceiling:
            report(
                queue.name,
                ("spec", "guarantee", resource),
                f"guarantee {_n(amount)} {resource} exceeds max {_n(ceiling)}",
            )
    for resource, amount in sorted((queue.lending_limit or {}).items()):
        own = queue.guarantee.get(resource, Fraction(0))
        if amount > own:
            report(
                queue.name,
                ("spec", "lendingLimit", resource),
                f"lendingLimit {_n(amount)} {resource} exceeds the guarantee {_n(own)}: "
                "a queue can lend only what it is guaranteed",
            )


def _cycles(by_name: Mapping[str, Queue]) -> list[list[str]]:
    """Each parent cycle once, as names in parent order starting from the smallest name."""
    found: dict[tuple[str, ...], list[str]] = {}
    for start in sorted(by_name):
        path: list[str] = []
        seen: set[str] = set()
        current: str | None = start
        while current is not None and current in by_name and current not in seen:
            seen.add(current)
            path.append(current)
            current = by_name[current].parent
        if current is not None and current in seen:
            cycle = path[path.index(current) :]
            pivot = cycle.index(min(cycle))
            ordered = cycle[pivot:] + cycle[:pivot]
            found.setdefault(tuple(ordered), ordered)
    return list(found.values())


def _sum(amounts: Iterable[Mapping[str, Fraction]]) -> dict[str, Fraction]:
    total: dict[str, Fraction] = defaultdict(Fraction)
    for amount in amounts:
        for resource, value in amount.items():
            total[resource] += value
    return dict(total)


def _n(value: Fraction) -> str:
    return str(to_number(value))
