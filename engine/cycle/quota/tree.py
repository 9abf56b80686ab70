"""Hierarchical quota with borrowing and lending, after Kueue's hierarchical cohorts.

The queue tree hangs under a virtual root, the fleet. For each resource any queue names:

- A queue's ``guarantee`` includes its children's. What a node contributes to sharing is its
  *subtree quota*: its own guarantee not handed to children, plus what each child shares.
- A node with a ``lendingLimit`` keeps ``subtree − lendingLimit`` for itself (its *guaranteed*
  part, invisible to others); without one, all of its idle quota can be borrowed by others.
- The root's own quota is the fleet's Ready capacity not promised to any top-level queue, so
  capacity nobody is guaranteed is shared too.
- ``available(q)`` = q's unused guaranteed part + what its parent can still give, capped by q's
  ``borrowingLimit`` (Kueue's ``available``). Usage beyond a node's guaranteed part is stored in
  its parent, recursively.
- Independently, a queue's and every ancestor's raw usage + demand must stay ≤ ``max``.

Resources no queue names are not limited by quota (placement still checks capacity).

Past 400 lines: checks, updates and the two looks at another state (``trial``, ``apart``)
share the version that keeps every cache of the quota right.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from engine import vectors
from engine.cycle.quota import misses
from engine.cycle.quota.misses import QuotaMiss
from engine.policy.model import Queue
from engine.vectors import Vec

ROOT = ""


@dataclass(slots=True, eq=False)
class QuotaNode:
    name: str
    parent: QuotaNode | None
    children: list[QuotaNode]
    guarantee: Vec
    max: Vec  # only the resources the queue caps
    lending_limit: Vec | None
    borrowing_limit: Vec | None
    weight: float
    priority: int
    subtree: Vec
    guaranteed: Vec
    usage: Vec  # Kueue usage: a leaf's jobs; a parent's children's usage beyond their guaranteed
    total: Vec  # raw usage of every job in the subtree, all resources
    up: tuple[QuotaNode, ...] = ()  # ``path``, once the tree is linked
    changes: int = 0  # how many times ``total`` or ``usage`` changed (only ever grows)

    @property
    def path(self) -> Sequence[QuotaNode]:
        """This queue and its ancestors, up to (not including) the root."""
        if self.up or self.name == ROOT:
            return self.up
        found = []
        node: QuotaNode | None = self
        while node is not None and node.name != ROOT:
            found.append(node)
            node = node.parent
        return tuple(found)


class QuotaTree:
    def __init__(self, queues: Sequence[Queue], capacity: Mapping[str, int]) -> None:
        names: set[str] = set()
        for q in queues:
            for amounts in (q.guarantee, q.max, q.lending_limit or {}, q.borrowing_limit or {}):
                names.update(amounts)
        self.resources = tuple(sorted(names))
        self.fleet_capacity = dict(capacity)
        self.capacity = {r: capacity.get(r, 0) for r in self.resources}
        root = QuotaNode(ROOT, None, [], {}, {}, None, None, 1.0, 0, {}, {}, {}, {})
        self.nodes: dict[str, QuotaNode] = {ROOT: root}
        for q in queues:
            self.nodes[q.name] = QuotaNode(
                q.name,
                None,
                [],
                self._milli(q.guarantee, fill=True),
                vectors.capacity_milli(q.max),
                None if q.lending_limit is None else self._milli(q.lending_limit),
                None if q.borrowing_limit is None else self._milli(q.borrowing_limit),
                q.weight,
                q.priority,
                {},
                {},
                {},
                {},
            )
        for q in sorted(queues, key=lambda q: q.name):
            node = self.nodes[q.name]
            node.parent = self.nodes.get(q.parent, root)
            node.parent.children.append(node)
        root.guarantee = {
            r: max(0, cap - sum(c.guarantee.get(r, 0) for c in root.children))
            + sum(c.guarantee.get(r, 0) for c in root.children)
            for r, cap in self.capacity.items()
        }
        self._sum_quota(root)
        for node in self.nodes.values():
            node.up = node.path
        self.version = 0  # a new value on every add and remove, back after a ``trial``
        self._clock = 0
        # ``apart``'s last state: ((version, key), its version, its nodes' total and usage)
        self._apart: tuple[tuple[int, object], int, list[tuple[QuotaNode, Vec, Vec]]] | None = None
        self._potential: dict[tuple[str, str], int] = {}
        self.touched: list[str] = []  # the queue of every add and remove (not undone), in order
        self._checked: dict[tuple[str, tuple], tuple[int, QuotaMiss | None]] = {}
        self.root = root
        self._rooms: dict[str, tuple[int, Vec]] = {}  # leaf → (its stamp, ``room`` then)

    def _milli(self, amounts: Mapping, fill: bool = False) -> Vec:
        vec = vectors.capacity_milli(amounts)
        if fill:
            for r in self.resources:
                vec.setdefault(r, 0)
        return vec

    def _sum_quota(self, node: QuotaNode) -> None:
        for child in node.children:
            self._sum_quota(child)
        for r in self.resources:
            handed = sum(c.guarantee.get(r, 0) for c in node.children)
            shared = sum(c.subtree[r] - c.guaranteed[r] for c in node.children)
            node.subtree[r] = max(0, node.guarantee.get(r, 0) - handed) + shared
            limit = None if node.lending_limit is None else node.lending_limit.get(r)
            node.guaranteed[r] = 0 if limit is None else max(0, node.subtree[r] - limit)
            node.usage[r] = 0

    # --- queries -----------------------------------------------------------------------------
    def capacity_of(self, resource: str) -> int:
        """The fleet's Ready allocatable of ``resource``: the denominator of shares."""
        return self.fleet_capacity.get(resource, 0)

    def node(self, name: str) -> QuotaNode | None:
        return self.nodes.get(name) if name != ROOT else None

    def available(self, node: QuotaNode, r: str, drop: Mapping[str, int] | None = None) -> int:
        """``drop``: queue name → how much less of ``r`` its usage would be (``room_without``)."""
        usage = node.usage[r] - drop.get(node.name, 0) if drop else node.usage[r]
        if node.parent is None:
            return node.subtree[r] - usage
        from_parent = self.available(node.parent, r, drop)
        limit = None if node.borrowing_limit is None else node.borrowing_limit.get(r)
        if limit is not None:
            stored = node.subtree[r] - node.guaranteed[r]
            used = max(0, usage - node.guaranteed[r])
            from_parent = min(stored - used + limit, from_parent)
        return max(0, node.guaranteed[r] - usage) + from_parent

    def potential(self, node: QuotaNode, r: str) -> int:
        """The most ``node`` could use with every other queue idle (Kueue potentialAvailable)."""
        key = (node.name, r)
        found = self._potential.get(key)
        if found is None:
            found = self._potential[key] = self._potential_of(node, r)
        return found

    def _potential_of(self, node: QuotaNode, r: str) -> int:
        if node.parent is None:
            return node.subtree[r]
        most = node.guaranteed[r] + self.potential(node.parent, r)
        limit = None if node.borrowing_limit is None else node.borrowing_limit.get(r)
        if limit is not None:
            most = min(node.subtree[r] + limit, most)
        return most

    def check(self, leaf: QuotaNode, demand: Mapping[str, int]) -> QuotaMiss | None:
        """None when ``demand`` can be admitted into ``leaf`` now. A demand within ``room``
        passes every test of ``_check`` (room is at most ``available`` and each ``max`` minus a
        usage never negative). Room, and a miss per demand, are kept while the usage of the
        leaf's path and the root is unchanged: their ``changes``, which only grow, sum alike."""
        stamp = self.root.changes
        for node in leaf.up:
            stamp += node.changes
        kept_room = self._rooms.get(leaf.name)
        if kept_room is None or kept_room[0] != stamp:
            kept_room = self._rooms[leaf.name] = (stamp, self.room(leaf, self.resources))
        for r, most in kept_room[1].items():
            if demand.get(r, 0) > most:
                break
        else:
            return None
        key = (leaf.name, tuple(demand.items()))
        kept = self._checked.get(key)
        if kept is not None and kept[0] == stamp:
            return kept[1]
        found = self._check(leaf, demand)
        self._checked[key] = (stamp, found)
        return found

    def _check(self, leaf: QuotaNode, demand: Mapping[str, int]) -> QuotaMiss | None:
        for node in leaf.path:
            for r, cap in node.max.items():
                need = demand.get(r, 0)
                if need > cap:
                    return misses.above_max(node.name, r, need, cap)
        for r in self.resources:
            need = demand.get(r, 0)
            if need and need > self.potential(leaf, r):
                return misses.beyond_reach(leaf.name, r, need, self.potential(leaf, r))
        for node in leaf.path:
            for r, cap in node.max.items():
                need = demand.get(r, 0)
                if need and node.total.get(r, 0) + need > cap:
                    return misses.at_max(node.name, r, need, cap, node.total.get(r, 0))
        short: Vec = {}
        for r in self.resources:
            need = demand.get(r, 0)
            if need:
                free = self.available(leaf, r)
                if need > free:
                    short[r] = need - free
        if short:
            r = min(short)
            need = demand[r]
            used, guarantee = leaf.total.get(r, 0), leaf.guarantee.get(r, 0)
            return misses.short_of(
                leaf.name, r, short, need=need, free=need - short[r], guarantee=guarantee, used=used
            )
        return None

    def room(self, leaf: QuotaNode, resources: Iterable[str]) -> Vec:
        """Per resource, the most ``leaf`` could take now: ``available``, and no more than the
        ``max`` of any queue on its path allows. Taking usage away from any queue never lowers
        it, and raises it by at most the amount taken."""
        return {r: self._room(leaf, r, None, None) for r in resources}

    def room_without(
        self,
        leaf: QuotaNode,
        removed: Iterable[tuple[QuotaNode, Mapping[str, int]]],
        resources: Iterable[str],
    ) -> Vec:
        """``room(leaf, resources)`` as it would be once each amount is ``remove``d from its
        queue, without changing anything. A queue whose usage drops by d passes on to its
        parent min(d, what it stores there), in whatever order the amounts are removed."""
        removed = list(removed)
        out: Vec = {}
        for r in resources:
            drop: dict[str, int] = {}
            raw: dict[str, int] = {}
            levels: dict[int, dict[str, QuotaNode]] = {}
            for queue, amount in removed:
                value = amount.get(r, 0)
                for node in queue.up:
                    raw[node.name] = raw.get(node.name, 0) + value
                if value > 0:
                    drop[queue.name] = drop.get(queue.name, 0) + value
                    levels.setdefault(len(queue.up), {})[queue.name] = queue
            for depth in range(max(levels, default=0), 0, -1):  # children before parents
                for node in levels.get(depth, {}).values():
                    parent = node.parent
                    passed = min(drop[node.name], node.usage[r] - node.guaranteed[r])
                    if parent is not None and passed > 0:
                        drop[parent.name] = drop.get(parent.name, 0) + passed
                        levels.setdefault(depth - 1, {})[parent.name] = parent
            out[r] = self._room(leaf, r, drop, raw)
        return out

    def _room(
        self, leaf: QuotaNode, r: str, drop: Mapping[str, int] | None, raw: Mapping[str, int] | None
    ) -> int:
        """``room`` of one resource, with usage lower by ``drop`` and totals by ``raw`` (queue
        name → amount) when given."""
        room = self.available(leaf, r, drop)
        for node in leaf.path:
            cap = node.max.get(r)
            if cap is not None:
                used = node.total.get(r, 0) - (raw.get(node.name, 0) if raw else 0)
                room = min(room, cap - used)
        return room

    def headroom(self, leaf: QuotaNode, demand: Mapping[str, int]) -> Vec:
        """Per quota resource ``demand`` holds, ``room`` minus it (negative: that much short)."""
        needs = [r for r in self.resources if demand.get(r, 0)]
        return {r: v - demand[r] for r, v in self.room(leaf, needs).items()}

    def deficit(self, leaf: QuotaNode, demand: Mapping[str, int]) -> Vec:
        """Per resource, how much of ``demand`` does not fit ``leaf`` now: empty exactly when
        ``check`` passes, the demand being within ``potential`` and every ``max``."""
        return {r: -v for r, v in self.headroom(leaf, demand).items() if v < 0}

    def within_guarantee(self, leaf: QuotaNode, demand: Mapping[str, int]) -> bool:
        return all(
            leaf.total.get(r, 0) + demand.get(r, 0) <= leaf.guarantee[r]
            for r in self.resources
            if demand.get(r, 0)
        )

    def borrowing(self, node: QuotaNode, resources: Iterable[str]) -> bool:
        return any(node.total.get(r, 0) > node.guarantee.get(r, 0) for r in resources)

    # --- updates -----------------------------------------------------------------------------
    @contextmanager
    def trial(self) -> Iterator[None]:
        """For changes the caller undoes before the block ends: the version is kept. If the
        block raises, its changes may not be undone, so the version is a new one."""
        version, touched = self.version, len(self.touched)
        try:
            yield
        except BaseException:
            self.version = self._clock = self._clock + 1
            raise
        self.version = version
        del self.touched[touched:]  # the same state: nothing was touched

    @contextmanager
    def apart(
        self, entries: Sequence[tuple[QuotaNode, Mapping[str, int]]], key: object
    ) -> Iterator[None]:
        """The quota with ``entries`` (leaf, amount) removed during the block, then the state
        and version before (unless it changed the quota). The same ``key`` from the same version
        swaps in the last block's nodes and version (callers keep by version); ``touched`` too."""
        before, memo = self.version, (self.version, key)
        names = [leaf.name for leaf, _ in entries]
        if self._apart is not None and self._apart[0] == memo:
            version, states = self._apart[1], self._apart[2]
            originals = [(n, n.total, n.usage) for n, _, _ in states]
            self._swap(states, names)
        else:
            nodes = {self.root.name: self.root}
            for leaf, _ in entries:
                nodes.update((n.name, n) for n in leaf.path)
            originals = [(n, n.total, n.usage) for n in nodes.values()]
            for n in nodes.values():
                n.total, n.usage = dict(n.total), dict(n.usage)
            for leaf, amount in entries:
                self.remove(leaf, amount)
            version, states = self.version, [(n, n.total, n.usage) for n in nodes.values()]
        self._apart = None  # until the block ends as it began
        self.version = version
        kept = False  # the block raised or made a change of its own: that change stays
        try:
            yield
            kept = self.version == version
        finally:
            if kept:
                self._swap(originals, names)
                self.version = before
                self._apart = (memo, version, states)
            else:  # as after a ``trial`` that raised: the state with it, a new version
                for leaf, amount in entries:
                    self.add(leaf, amount)

    def _swap(self, states: Sequence[tuple[QuotaNode, Vec, Vec]], names: Iterable[str]) -> None:
        for node, total, usage in states:
            node.total, node.usage = total, usage
            node.changes += 1
        self.touched.extend(names)

    def add(self, leaf: QuotaNode, amount: Mapping[str, int]) -> None:
        self._clock += 1
        self.version = self._clock
        self.touched.append(leaf.name)
        for node in leaf.path:
            vectors.add_into(node.total, amount)
            node.changes += 1
        for r in self.resources:
            value = amount.get(r, 0)
            node: QuotaNode | None = leaf
            while value > 0 and node is not None:
                local = max(0, node.guaranteed[r] - node.usage[r])
                node.usage[r] += value
                if node.parent is None:  # the root: outside every path
                    node.changes += 1
                value = value - local if node.parent is not None else 0
                node = node.parent

    def add_sums(
        self,
        kinds: Iterable[tuple[QuotaNode, Iterable[str]]],
        sums: Mapping[str, Mapping[str, int]],
    ) -> None:
        """``add`` of amounts given summed per leaf, in one ``add`` per leaf: the state depends
        only on each leaf's usage (see ``remove``). ``sums``: leaf name → its amounts' sum;
        ``kinds``: in the order the amounts came, each leaf with the resources one of its
        amounts names (each pair once is enough). Each ``total`` then names its resources in
        the order the amounts first name them, as one ``add`` each would; a resource of a sum
        that no kind of its leaf names is left out."""
        named: dict[str, tuple[QuotaNode, dict[str, None]]] = {}
        for leaf, resources in kinds:
            entry = named.get(leaf.name)
            if entry is None:
                entry = named[leaf.name] = (leaf, {})
            for r in resources:
                if r not in entry[1]:
                    entry[1][r] = None
                    for node in leaf.path:
                        node.total.setdefault(r, 0)
        for name, (leaf, resources) in named.items():
            summed = sums[name]
            self.add(leaf, {r: summed[r] for r in resources})

    def remove(self, leaf: QuotaNode, amount: Mapping[str, int]) -> None:
        """The inverse of ``add``: the state depends only on each leaf's usage, so any amount
        added before, alone or summed with others, may be removed in any order."""
        self._clock += 1
        self.version = self._clock
        self.touched.append(leaf.name)
        for node in leaf.path:
            vectors.add_into(node.total, amount, -1)
            node.changes += 1
        for r in self.resources:
            value = amount.get(r, 0)
            node: QuotaNode | None = leaf
            while value > 0 and node is not None:
                stored = node.usage[r] - node.guaranteed[r]
                node.usage[r] -= value
                if node.parent is None:
                    node.changes += 1
                if stored <= 0 or node.parent is None:
                    break
                value = min(value, stored)
                node = node.parent
