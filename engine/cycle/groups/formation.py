"""Step 3c of the cycle: co-admission groups (docs/multi-cluster-training.md).

A group is a set of jobs admitted all together or not at all. Its members are recognised on
their templates:

* a Volcano HyperJob's children: the label ``volcano.sh/hyperjob-name`` (same namespace). The
  size is the sum of the HyperJob's ``replicatedJobs[].replicas`` when the snapshot holds the
  HyperJob, else its ``status.splitCount``, else the children seen (templates or bindings); the
  minimum is its ``spec.minAvailable`` (default: the size); ``fleetgate.io/group-spread`` on the
  HyperJob or on a child;
* any jobs: ``fleetgate.io/group: NAME`` with ``fleetgate.io/group-size: N`` and optionally
  ``fleetgate.io/group-min: M`` and ``fleetgate.io/group-spread: clusters``, in one namespace.

Here the members of each group are counted, and a group is either formed into one unit that
takes one turn in its queue (``Unit``: its pending members, behind one representative whose
demand is the group's), or its pending members get their decision now:

* ``InvalidGroup`` (Reject): members in different queues, annotations that disagree or cannot
  be read, more members than the size;
* ``WaitingForGroup`` (Pending, no position, no turn): fewer members than the size exist, or
  too few of them can be considered now (in backoff, held back by a dependency, unreadable).

Members already placed count towards the minimum; a group that runs its minimum admits later
members as they fit. ``engine.cycle.groups.place`` places a unit. Only cycles in which some
eligible job is in a group do more than one dictionary lookup per job.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from engine import annotations as ann
from engine import untrusted, vectors
from engine.cycle.jobs.model import AdmittedJob, Mapped, PendingJob
from engine.cycle.jobs.reading import binding_ref
from engine.cycle.model import Decision, GroupState
from engine.cycle.reasons import Reason
from engine.fleet.model import BindingView, Snapshot
from engine.policy.model import AdmitOn
from engine.workloads import hyperjob
from engine.workloads.model import Workload

HYPERJOB = "HyperJob"
ANNOTATED = "group"
SPREAD_CLUSTERS = "clusters"

WAITING, INVALID, PENDING, ADMITTED, RUNNING = (
    "Waiting",
    "Invalid",
    "Pending",
    "Admitted",
    "Running",
)

Key = tuple[str, str, str]  # (HYPERJOB or ANNOTATED, namespace, name)


def key_of(workload: Workload | None, mapped: Mapped | None = None) -> Key | None:
    """The group of a job, if it is in one: the HyperJob label, else ``fleetgate.io/group``,
    else the SchedulingPolicy's ``spec.groups`` (``mapped``)."""
    if workload is None:
        return None
    name = workload.labels.get(hyperjob.NAME_LABEL)
    if name:
        return (HYPERJOB, workload.namespace, name)
    name = workload.annotations.get(ann.GROUP)
    if name and name.strip():
        return (ANNOTATED, workload.namespace, _named(name.strip()))
    if mapped is not None and mapped.group is not None:
        return (ANNOTATED, workload.namespace, _named(mapped.group[0]))
    return None


def group_label(workload: Workload | None) -> str | None:
    """The group its template names (the HyperJob label, else ``fleetgate.io/group``), as
    :func:`label` writes it; None when it names none. A group named by the SchedulingPolicy
    alone needs the job's mapping: ``CycleResult.jobs`` has it."""
    key = key_of(workload)
    return label(key) if key is not None else None


def _named(name: str) -> str:
    """A group's name as fleetgate keeps it: as written when it is a Kubernetes name, else
    escaped and capped (``spec_of`` makes the group InvalidGroup: such a name is never used)."""
    return name if untrusted.name_problem(name) is None else untrusted.echo(name, 63)


def _sizes(workload: Workload, mapped: Mapped | None) -> tuple[str, str]:
    """(size, min) as written: the annotations, else what ``spec.groups`` gave."""
    if ann.GROUP in workload.annotations or mapped is None or mapped.group is None:
        found = workload.annotations
        return found.get(ann.GROUP_SIZE, "").strip(), found.get(ann.GROUP_MIN, "").strip()
    _, size, minimum = mapped.group
    return str(size), str(minimum) if minimum else ""


def label(key: Key) -> str:
    kind, namespace, name = key
    return f"{kind}/{namespace}/{name}" if namespace else f"{kind}/{name}"


@dataclass(frozen=True, slots=True)
class Spec:
    """What a group says about itself: its size, minimum, spread; or why it cannot be read."""

    size: int
    min: int
    spread: bool
    error: str = ""


@dataclass(frozen=True, slots=True)
class Unit:
    """A group's pending members, considered together at their queue's turn."""

    key: Key
    spec: Spec
    members: tuple[PendingJob, ...]  # in queue order
    placed: int  # members already placed (they count towards the minimum)
    taken: frozenset[str]  # clusters the placed members hold (spread keeps off them)
    present: int
    representative: PendingJob  # the first member, with the demand its quota counts

    @property
    def needed(self) -> int:
        """Members of this unit that must be admitted at once (at least one)."""
        return max(self.spec.min - self.placed, 1)

    def state(self, state: str) -> GroupState:
        return GroupState(label(self.key), self.spec.size, self.spec.min, self.present, state)


@dataclass
class Formation:
    queued: list[PendingJob]  # eligible jobs in no group, and one representative per unit
    units: dict[str, Unit]  # representative's binding ref → its unit
    decisions: list[tuple[PendingJob, Reason, str]]
    states: dict[str, GroupState] = field(default_factory=dict)  # binding ref → its group


@dataclass
class Members:
    bindings: dict[str, BindingView] = field(default_factory=dict)  # binding ref → binding
    workloads: list[Workload] = field(default_factory=list)  # their templates
    sizes: set[tuple[str, str]] = field(default_factory=set)  # (size, min) the members say
    seen: set[str] = field(default_factory=set)  # template names, with or without a binding


def form(
    eligible: Sequence[PendingJob],
    pending: Sequence[PendingJob],
    admitted: Sequence[AdmittedJob],
    snapshot: Snapshot,
    admit_on: AdmitOn,
) -> Formation | None:
    """Units and decisions for the groups of ``eligible`` jobs (None: no job is in a group).
    ``pending`` are all pending jobs (some failed screening or wait for a dependency)."""
    keys = {
        job.ref: key
        for job in eligible
        if job.grouped and (key := key_of(job.workload, job.mapped)) is not None
    }
    if not keys:
        return None
    grouped = [job for job in pending if job.grouped]
    mapped = {job.ref: job.mapped for job in [*grouped, *admitted]}
    ungrouped = {id(job.binding) for job in pending if not job.grouped}  # not members
    members = members_of(snapshot, set(keys.values()), mapped, ungrouped)
    by_group: dict[Key, list[PendingJob]] = {}
    for job in eligible:
        if job.grouped and job.ref in keys:
            by_group.setdefault(keys[job.ref], []).append(job)
    formed = Formation([j for j in eligible if not j.grouped or j.ref not in keys], {}, [])
    pending_refs = {job.ref: job for job in grouped}
    for key in sorted(by_group):
        jobs = sorted(by_group[key], key=lambda j: (j.order_key, j.ref))
        found = members[key]
        spec = spec_of(key, found, snapshot)
        present = len(found.bindings)
        state = GroupState(label(key), spec.size, spec.min, present, WAITING)
        placed = {ref: b for ref, b in found.bindings.items() if _placed(b)}
        problem = _problem(key, spec, present, jobs, pending_refs, found)
        if problem is None:
            unavailable = sorted(set(found.bindings) - set(placed) - {j.ref for j in jobs})
            if len(jobs) < max(spec.min - len(placed), 1):
                problem = (Reason.WAITING_FOR_GROUP, _unavailable(spec, present, unavailable))
        if problem is not None:
            state = state._replace(state=INVALID if problem[0] == Reason.INVALID_GROUP else WAITING)
            message = f"group {label(key)}: {problem[1]}"
            formed.decisions += [(job, problem[0], message) for job in jobs]
        else:
            taken = frozenset(name for b in placed.values() for name, _ in b.clusters)
            counted = jobs if admit_on == AdmitOn.ALL else smallest(jobs, spec.min - len(placed))
            demand = vectors.total((j.demand, 1) for j in counted)
            representative = replace(jobs[0], demand=demand)
            unit = Unit(key, spec, tuple(jobs), len(placed), taken, present, representative)
            formed.units[representative.ref] = unit
            formed.queued.append(representative)
            state = state._replace(state=PENDING)
        for ref in found.bindings:
            formed.states[ref] = state._replace(state=RUNNING) if ref in placed else state
    return formed


def members_of(
    snapshot: Snapshot, wanted: set[Key], mapped: Mapping[str, Mapped], ungrouped: set[int]
) -> dict[Key, Members]:
    """The members of the ``wanted`` groups present in the snapshot: bindings and templates
    (``ungrouped``: ids of the bindings of pending jobs known to be in no group)."""
    found = {key: Members() for key in wanted}
    for binding in snapshot.bindings:
        if id(binding) in ungrouped:
            continue
        ref = binding_ref(binding)
        workload = snapshot.workload_for(binding)
        key = key_of(workload, mapped.get(ref))
        if key in found and workload is not None:
            found[key].bindings[ref] = binding
            found[key].workloads.append(workload)
            found[key].sizes.add(_sizes(workload, mapped.get(ref)))
    if any(kind == HYPERJOB for kind, _, _ in wanted):  # children seen, bound or not
        for workload in snapshot.workloads.values():
            name = workload.labels.get(hyperjob.NAME_LABEL)
            if name and (HYPERJOB, workload.namespace, name) in found:
                found[(HYPERJOB, workload.namespace, name)].seen.add(workload.name)
    return found


def _placed(binding: BindingView) -> bool:
    return bool(binding.clusters) and ann.READMIT not in binding.annotations


def spec_of(key: Key, found: Members, snapshot: Snapshot) -> Spec:
    if key[0] == ANNOTATED and (bad := untrusted.name_problem(key[2])) is not None:
        return Spec(0, 0, False, f"the group name {bad}")
    spreads = {w.annotations.get(ann.GROUP_SPREAD, "").strip() for w in found.workloads} - {""}
    if key[0] == HYPERJOB:
        owner = snapshot.hyperjobs.get((key[1], key[2]))
        if owner is not None and owner.spread:
            spreads.add(owner.spread.strip())
        size = (
            owner.size
            if owner is not None and owner.replicated_jobs
            else owner.split_count
            if owner is not None and owner.split_count
            else len(found.seen)
        )
        minimum = owner.min_available if owner is not None and owner.min_available else size
        return _with_spread(Spec(size, min(minimum, size), False), spreads)
    sizes = {size for size, _ in found.sizes}
    minimums = {minimum for _, minimum in found.sizes}
    if len(sizes) > 1:
        return Spec(0, 0, False, f"members disagree on {ann.GROUP_SIZE}: {_listed(sizes)}")
    if len(minimums) > 1:
        return Spec(0, 0, False, f"members disagree on {ann.GROUP_MIN}: {_listed(minimums)}")
    size_text, min_text = next(iter(sizes), ""), next(iter(minimums), "")
    size = _count(size_text)
    if size is None:
        said = untrusted.echo(size_text, 63)
        return Spec(0, 0, False, f"{ann.GROUP_SIZE} '{said}': not a positive integer")
    minimum = _count(min_text) if min_text else size
    if minimum is None or minimum > size:
        said = untrusted.echo(min_text, 63)
        why = f"{ann.GROUP_MIN} '{said}': not an integer from 1 to the size {size}"
        return Spec(size, size, False, why)
    return _with_spread(Spec(size, minimum, False), spreads)


def _with_spread(spec: Spec, spreads: set[str]) -> Spec:
    if not spreads:
        return spec
    if spreads == {SPREAD_CLUSTERS}:
        return replace(spec, spread=True)
    return replace(spec, error=f"{ann.GROUP_SPREAD} {_listed(spreads)}: only 'clusters' is known")


def _problem(
    key: Key,
    spec: Spec,
    present: int,
    jobs: Sequence[PendingJob],
    pending: Mapping[str, PendingJob],
    found: Members,
) -> tuple[Reason, str] | None:
    if spec.error:
        return Reason.INVALID_GROUP, spec.error
    if present > spec.size:
        return Reason.INVALID_GROUP, f"{present} members for a group of {spec.size}"
    queues = {
        job.mapped.queue: job for ref in found.bindings if (job := pending.get(ref)) is not None
    }
    queues.pop("", None)  # a job not mapped to a queue has its own decision
    if len(queues) > 1:
        which = ", ".join(f"{_short(j)} → {q}" for q, j in sorted(queues.items()))
        return Reason.INVALID_GROUP, f"members map to different queues ({which})"
    if present < spec.size:
        missing = ""
        if key[0] == HYPERJOB:
            absent = sorted(found.seen - {w.name for w in found.workloads})
            missing = f"; no binding yet for {_listed(absent)}" if absent else ""
        return Reason.WAITING_FOR_GROUP, f"{present} of {spec.size} members present{missing}"
    return None


def _unavailable(spec: Spec, present: int, refs: Sequence[str]) -> str:
    return (
        f"{present} of {spec.size} members present, but {_listed(refs)} cannot be considered "
        f"now (see their decisions); {spec.min} needed at once"
    )


def smallest(jobs: Sequence[PendingJob], count: int) -> list[PendingJob]:
    """The ``count`` members of least demand (by the sum of their milli-amounts)."""
    ordered = sorted(jobs, key=lambda j: (sum(j.demand.values()), j.order_key, j.ref))
    return ordered[: max(count, 1)]


def _count(text: str) -> int | None:
    return int(text) if text.isdigit() and int(text) > 0 else None


def _listed(items: Iterable[str]) -> str:
    items = sorted(items)
    shown = ", ".join(_quoted(i) for i in items[:3])
    return shown + (f" and {len(items) - 3} more" if len(items) > 3 else "")


def _quoted(item: str) -> str:
    """An item a tenant wrote, escaped and capped; quoted when empty or not as written."""
    said = untrusted.echo(item, 63)
    return f"'{said}'" if not item or " " in item or said != item else item


def _short(job: PendingJob) -> str:
    return job.workload.name if job.workload is not None else job.ref


def preemptible(admitted: Sequence[AdmittedJob], snapshot: Snapshot) -> list[AdmittedJob]:
    """The admitted jobs a preemption may take: not a member of a group, which would leave the
    rest of its group running without it, perhaps below its minimum. A group is taken whole or
    not at all, and for now not at all (``groups_preempt`` keeps to these victims too)."""
    return [j for j in admitted if key_of(snapshot.workload_for(j.binding), j.mapped) is None]


def settle(states: dict[str, GroupState], unit: Unit, state: str) -> None:
    """Record the state ``unit``'s consideration left its group in (placed members run)."""
    name = label(unit.key)
    for ref, found in states.items():
        if found.name == name and found.state != RUNNING:
            states[ref] = found._replace(state=state)


def with_states(decisions: Sequence[Decision], states: Mapping[str, GroupState]) -> list[Decision]:
    """``decisions`` with the group state of each member (``Decision.group``)."""
    if not states:
        return list(decisions)
    return [d._replace(group=states[d.binding]) if d.binding in states else d for d in decisions]
