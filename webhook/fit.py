"""The built-in "can this gang ever run?" check, from fleet snapshot files.

Conservative by construction: a job is refused only when it could not start even on an empty
fleet. Each cluster offers its ``status.resourceSummary.allocatable`` (the sum over its nodes,
Ready or not); free capacity, queues and node shapes are the scheduling cycle's business.
Karmada's ``allocatableModelings`` count nodes by their *currently free* resources, so they bound
what fits now, not what could ever fit, and are not used here. A cluster that reports no
allocatable at all (not yet collected) might offer anything, and then nothing is refused. Only
resources some cluster reports are compared: a request for a resource no cluster lists may be
one the member schedulers ignore.

Node shape (``larger_than_every_node``, a warning, not a refusal): a cluster that declares its
kinds of node (annotation ``fleetgate.io/node-shapes``) holds a pod only when one of its node
shapes does (resources no shape names are bounded by the totals alone); a cluster that declares
none, by its allocatable as above. A pod no cluster could hold that way is warned of at
creation; the scheduling cycle rejects it with ``NeverFits`` until the fleet changes (the
annotation is written by hand and may lag a new node pool, so the template is not refused).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

from engine.fleet.files import read_objects
from engine.fleet.model import Snapshot, SnapshotIssue
from engine.fleet.snapshot import build_snapshot
from engine.resources import PODS, Resources
from engine.workloads.model import Workload


@dataclass(frozen=True, slots=True)
class Fleet:
    """What the webhook knows about the fleet: capacity per cluster and PriorityClass values."""

    clusters: tuple[tuple[str, Resources], ...]  # (name, allocatable), sorted by name
    unknown: tuple[str, ...]  # clusters that report no allocatable
    priorities: Mapping[str, int]
    default_priority: int = 0
    # (name, the node shapes it declares) of the clusters in ``clusters`` that declare some
    node_shapes: tuple[tuple[str, tuple[Resources, ...]], ...] = ()

    @classmethod
    def from_snapshot(cls, snapshot: Snapshot) -> Fleet:
        default = snapshot.default_priority_class()
        return cls(
            clusters=tuple((c.name, c.allocatable) for c in snapshot.clusters if c.allocatable),
            unknown=tuple(c.name for c in snapshot.clusters if not c.allocatable),
            priorities={p.name: p.value for p in snapshot.priority_classes},
            default_priority=default.value if default else 0,
            node_shapes=tuple(
                (c.name, c.node_shapes)
                for c in snapshot.clusters
                if c.allocatable and c.node_shapes
            ),
        )

    @classmethod
    def from_files(cls, paths: Iterable[str | Path]) -> tuple[Fleet, list[SnapshotIssue]]:
        objects, issues = read_objects(paths)
        snapshot = build_snapshot(objects)
        return cls.from_snapshot(snapshot), [*issues, *snapshot.errors]

    def priority_value(self, name: str | None) -> int:
        """The PriorityClass value; 0 for a class the snapshot does not have."""
        if not name:
            return self.default_priority
        return self.priorities.get(name, 0)

    def never_fits(self, workload: Workload, min_member: int, allow_split: bool) -> str | None:
        """Why the job can never start on this fleet, with numbers; None when it might."""
        if not self.clusters or self.unknown:
            return None
        offered = {name for _, allocatable in self.clusters for name in allocatable}
        for role in workload.roles:
            if role.replicas <= 0:
                continue
            pod = _only(role.requests, offered)
            if pod and not any(_covers(a, pod) for _, a in self.clusters):
                return (
                    f"one {role.name} pod needs {_describe(pod)}; no cluster has that much "
                    f"allocatable: {self._shortfalls(pod)}"
                )
        gang = _only(_gang_floor(workload, min_member), offered)
        if not gang:
            return None
        what = (
            f"all {workload.pods} pods"
            if min_member >= workload.pods
            else f"at least {min_member} of {workload.pods} pods"
        )
        if allow_split:
            fleet = Resources.sum(a for _, a in self.clusters)
            if not _covers(fleet, gang):
                return (
                    f"the gang ({what}) needs {_describe(gang)}; the whole fleet has "
                    f"{_describe(_only(fleet, set(gang)))} allocatable"
                )
            return None
        if not any(_covers(a, gang) for _, a in self.clusters):
            return (
                f"the gang ({what}) must start on one cluster and needs {_describe(gang)}; "
                f"no cluster has that much allocatable: {self._shortfalls(gang)}"
            )
        return None

    def larger_than_every_node(self, workload: Workload) -> str | None:
        """Why one pod of the job fits no node of any cluster (see the module doc), naming its
        role, the resource, what it asks and the most any node offers; None when one might."""
        if not self.node_shapes or not self.clusters or self.unknown:
            return None
        declared = dict(self.node_shapes)
        offered = {name for _, allocatable in self.clusters for name in allocatable}
        for role in workload.roles:
            pod = _only(role.requests, offered - {PODS})
            if role.replicas <= 0 or not pod:
                continue
            nodes = [
                node
                for name, allocatable in self.clusters
                for node in _nodes(declared.get(name), allocatable)
            ]
            if any(_covers(node, pod) for node in nodes):
                continue
            for resource, asked in pod.items():
                largest = max(node.get_amount(resource) for node in nodes)
                if asked > largest:
                    return (
                        f"one {role.name} pod asks {resource} {_amount(resource, asked)}; the "
                        f"largest node of any cluster offers {_amount(resource, largest)}"
                    )
            return (
                f"one {role.name} pod asks {_describe(pod)}; no node of any cluster offers all "
                "of that at once"
            )
        return None

    def _shortfalls(self, need: Resources, limit: int = 4) -> str:
        parts = []
        for name, allocatable in self.clusters[:limit]:
            short = [
                f"{r} {_amount(r, allocatable.get_amount(r))} < {_amount(r, v)}"
                for r, v in need.items()
                if allocatable.get_amount(r) < v
            ]
            parts.append(f"{name} has {', '.join(short)}")
        more = len(self.clusters) - limit
        return "; ".join(parts) + (f"; and {more} more cluster(s)" if more > 0 else "")


def _gang_floor(workload: Workload, min_member: int) -> Resources:
    """A lower bound of what any ``min_member`` pods of the job need, per resource.

    With ``min_member`` ≥ all pods this is the job's total. Otherwise, per resource, the
    ``min_member`` smallest pods' amounts (pods may differ per role).
    """
    if min_member <= 0:
        return Resources()
    if min_member >= workload.pods:
        return workload.total
    names = {name for role in workload.roles for name in role.requests}
    floor: dict[str, Fraction] = {PODS: Fraction(min_member)}
    for name in names:
        left, total = min_member, Fraction(0)
        for role in sorted(workload.roles, key=lambda r: r.requests.get_amount(name)):
            take = min(left, role.replicas)
            total += role.requests.get_amount(name) * take
            left -= take
            if left == 0:
                break
        floor[name] = total
    return Resources(floor)


def _nodes(shapes: tuple[Resources, ...] | None, allocatable: Resources) -> list[Resources]:
    """The most one node of a cluster may offer: each declared shape, bounded by the
    cluster's allocatable, with the allocatable for resources no shape names; else the whole
    allocatable."""
    if not shapes:
        return [allocatable]
    named = {r for shape in shapes for r in shape}
    rest = {r: v for r, v in allocatable.items() if r not in named}
    return [
        Resources({**rest, **{r: min(v, allocatable.get_amount(r)) for r, v in s.items()}})
        for s in shapes
    ]


def _only(amounts: Resources, names: set[str]) -> Resources:
    return Resources({k: v for k, v in amounts.items() if k in names})


def _covers(allocatable: Resources, need: Resources) -> bool:
    return all(allocatable.get_amount(name) >= amount for name, amount in need.items())


def _describe(amounts: Resources, names: Sequence[str] | None = None) -> str:
    keys = names if names is not None else list(amounts)
    return ", ".join(f"{name} {_amount(name, amounts.get_amount(name))}" for name in keys)


_BINARY = (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))


def _amount(name: str, value: Fraction) -> str:
    """A quantity as people write it: cores for cpu, Gi/Mi for bytes, else a plain number."""
    if name == "memory" or name.endswith(("-memory", "storage")) or name.startswith("hugepages-"):
        for suffix, size in _BINARY:
            if value >= size:
                scaled = value / size
                return f"{_plain(scaled)}{suffix}"
    return _plain(value)


def _plain(value: Fraction) -> str:
    if value.denominator == 1:
        return str(value.numerator)
    return f"{float(value):.4g}"
