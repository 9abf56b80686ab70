"""The jobs and co-admission groups of the kill test (tests/reconciler/test_kill.py), and
its check of the groups' history: what may happen to a group member's clusters under SIGKILLs
(bound once, or bound, rolled back by a GroupRolledBack write and bound again) and what not."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine import annotations as ann
from engine.cycle.reasons import Reason
from sandbox.karmada.names import DURATION_ANNOTATION
from tests.sandbox.test_webhooks import pytorchjob

NS = "research"
RECONCILER = "fleetgate-reconciler/"
# (size, min or None: the size, spread over clusters), cycled through
GROUP_SHAPES = (
    (2, None, False),
    (3, 2, False),
    (4, None, False),
    (2, None, True),
    (4, 2, False),
    (3, None, False),
)


@dataclass(frozen=True, slots=True)
class Move:
    """A change of a binding's ``spec.clusters``: from/to bound, and the pending annotation the
    same write left (a GroupRolledBack write says why the member waits for its group)."""

    binding: str
    was_bound: bool
    bound: bool
    resource_version: str
    pending: str | None


def small_job(name: str, gpus: int = 1, duration: str = "30s") -> dict[str, Any]:
    """A PyTorchJob of one master pod of ``gpus`` GPUs that runs ``duration`` (clock time)."""
    job = pytorchjob(0)
    job["metadata"]["name"] = name
    job["metadata"]["annotations"] = {DURATION_ANNOTATION: duration}
    specs = job["spec"]["pytorchReplicaSpecs"]
    del specs["Worker"]
    resources = specs["Master"]["template"]["spec"]["containers"][0]["resources"]
    memory = f"{max(8, 80 * gpus)}Gi"
    resources["requests"] = {"cpu": str(2 * gpus), "memory": memory, "nvidia.com/gpu": str(gpus)}
    resources["limits"] = {"memory": memory, "nvidia.com/gpu": str(gpus)}
    job["spec"]["runPolicy"]["schedulingPolicy"]["minAvailable"] = 1
    return job


def gang(name: str) -> dict[str, Any]:
    """A PyTorchJob of 3 pods of 8 GPUs (8 CPUs and 64Gi each) that runs for an hour."""
    job = pytorchjob(2)
    job["metadata"]["name"] = name
    job["metadata"]["annotations"] = {DURATION_ANNOTATION: "1h"}
    for spec in job["spec"]["pytorchReplicaSpecs"].values():
        resources = spec["template"]["spec"]["containers"][0]["resources"]
        resources["requests"] = {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "8"}
        resources["limits"] = {"memory": "64Gi", "nvidia.com/gpu": "8"}
    return job


def binding_name(job: str) -> str:
    return f"{job}-pytorchjob"


@dataclass(frozen=True, slots=True)
class Group:
    """A co-admission group of one-GPU PyTorchJobs (``fleetgate.io/group``)."""

    name: str
    members: tuple[str, ...]  # job names
    min: int
    spread: bool

    @property
    def label(self) -> str:
        return f"group/{NS}/{self.name}"

    def jobs(self) -> list[dict[str, Any]]:
        found = []
        for member in self.members:
            job = small_job(member)
            notes = job["metadata"]["annotations"]
            notes |= {ann.GROUP: self.name, ann.GROUP_SIZE: str(len(self.members))}
            if self.min < len(self.members):
                notes[ann.GROUP_MIN] = str(self.min)
            if self.spread:
                notes[ann.GROUP_SPREAD] = "clusters"
            found.append(job)
        return found


def groups_among(total: int, count: int) -> dict[int, Group]:
    """``count`` groups (shapes from GROUP_SHAPES, in turn), by the index of the job they are
    submitted before: spread evenly through the ``total`` jobs."""
    every = max(total // (count + 1), 1)
    found: dict[int, Group] = {}
    for number in range(count):
        size, minimum, spread = GROUP_SHAPES[number % len(GROUP_SHAPES)]
        name = f"grp-{number:02d}"
        members = tuple(f"{name}-{m}" for m in range(size))
        found[min((number + 1) * every, total - 1)] = Group(name, members, minimum or size, spread)
    return found


def group_violations(
    moves: list[Move], members: dict[str, Group], by_version: dict[str, Any]
) -> tuple[list[str], dict[str, int]]:
    """From the changes of the members' clusters in commit order: each member bound either
    stays bound until its group has its minimum placed at once, or is taken off its clusters
    by a GroupRolledBack write (the reconciler's, saying the member waits for its group) before
    the group got there; nothing else unbinds or rebinds a member. The problems found, and how
    many times each member was rolled back."""
    problems: list[str] = []
    rolled_back: dict[str, int] = {}
    placed: dict[str, set[str]] = {}  # group name → members bound now
    met: set[str] = set()  # members bound while their group had its minimum placed
    for move in moves:
        group = members.get(move.binding)
        if group is None:
            continue
        bound = placed.setdefault(group.name, set())
        if move.bound and not move.was_bound:
            bound.add(move.binding)
            if len(bound) >= group.min:
                met |= bound
        elif move.was_bound and not move.bound:
            bound.discard(move.binding)
            writer = by_version[move.resource_version].user
            waits = f"{Reason.WAITING_FOR_GROUP}: group {group.label}:"
            if not writer.startswith(RECONCILER) or not (move.pending or "").startswith(waits):
                problems.append(f"{move.binding} unbound by other than a rollback: {move}")
            elif move.binding in met:
                problems.append(f"{move.binding} rolled back with its group at its min: {move}")
            rolled_back[move.binding] = rolled_back.get(move.binding, 0) + 1
            met.discard(move.binding)
        else:
            problems.append(f"{move.binding}: its clusters rewritten while bound: {move}")
    for name, bound in sorted(placed.items()):
        problems += [f"{b} left bound with group {name} below its min" for b in bound - met]
    return problems, rolled_back
