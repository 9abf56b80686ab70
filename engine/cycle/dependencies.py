"""Step 3b of the cycle: job dependencies across clusters (docs/pipelines.md).

A job template may say which jobs must end first (``fleetgate.io/after``) and whose cluster it
must run on (``fleetgate.io/same-cluster-as``); the SchedulingPolicy's ``spec.dependencies``
adds references derived by CEL. References are ``[condition:][Kind/][namespace/]name``: the
condition ``succeeded`` (the default), ``finished`` (succeeded or failed) or ``failed``; no
namespace means the job's own; the first of two parts is a kind when it starts with a capital
letter (namespaces are lower-case DNS labels). A kind matches its short name, ``Kind.group`` and
the form decisions print (``engine.workloads.names``).

A predecessor is found by its template's namespace and name among the snapshot's bindings (any
binding, managed or not) and templates. Its state comes from its binding: Pending (no
``spec.clusters``, or no binding yet), Running (placed, some cluster not finished), Succeeded
or Failed (every cluster it was placed on reports a terminal state; one failure makes it
Failed), as ``engine.fleet.bindings.job_outcome`` reads each kind. A job the reconciler gave up
(``fleetgate.io/gave-up``, after ``maxAttempts`` failures) is Failed. A predecessor that is not in
the snapshot (never created, or deleted after it ended, by a TTL controller say) is not found:
the job waits with ``DependencyNotFound`` until it appears or the reference is removed. A
reference to another namespace's job is ``InvalidDependency`` unless the SchedulingPolicy says
``spec.dependencies.crossNamespace: Allow``: following it would tell one tenant whether another
tenant's job exists, its state and its cluster.

Only jobs that declare dependencies are looked at (``PendingJob.depends``); the rest pay one
attribute read. A job whose dependencies are unmet gets its decision here and takes no turn in
fair share: it is not yet eligible, so it neither holds a place in its queue nor blocks a
StrictFIFO queue.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from engine import annotations as ann
from engine import untrusted
from engine.cycle.jobs.model import PendingJob
from engine.cycle.jobs.reading import binding_ref
from engine.cycle.placement.memo import Candidates
from engine.cycle.reasons import Reason
from engine.fleet.bindings import FAILED, SUCCEEDED
from engine.fleet.model import BindingView, ObjectRef, Snapshot
from engine.workloads.model import Workload
from engine.workloads.names import group_of, qualified_name

CONDITIONS = ("succeeded", "finished", "failed")
PENDING, RUNNING = "Pending", "Running"
_KIND = re.compile(r"[A-Z][A-Za-z0-9]{0,62}(\.[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?)?")
_NEVER = {"succeeded": FAILED, "failed": SUCCEEDED}  # condition → the state that rules it out
_MET = {
    "succeeded": frozenset({SUCCEEDED}),
    "failed": frozenset({FAILED}),
    "finished": frozenset({SUCCEEDED, FAILED}),
}


@dataclass(frozen=True, slots=True)
class Ref:
    condition: str  # one of CONDITIONS; "placed" for same-cluster-as
    kind: str  # "" when not given
    namespace: str
    name: str

    @property
    def target(self) -> str:
        return "/".join(p for p in (self.kind, self.namespace, self.name) if p)


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the dependencies say about one job: a reason (None: all met) and, for
    ``same-cluster-as``, the clusters it may use and the job that holds them."""

    reason: Reason | None
    message: str
    pin: tuple[str, ...] = ()
    pinned_to: str = ""


@dataclass(frozen=True, slots=True)
class _Job:
    ref: str  # Kind/namespace/name, as decisions name it
    kinds: frozenset[str]
    binding: BindingView | None


def parse(text: str, namespace: str, *, condition: bool = True) -> Ref | str:
    """One reference, or why it cannot be read (its parts must be a kind, a namespace and a
    name as Kubernetes writes them; what the tenant wrote is echoed escaped and capped)."""
    item, when = text.strip(), "succeeded"
    said = f"'{untrusted.echo(item)}'"
    if condition and ":" in item:
        when, _, item = item.partition(":")
        when = when.strip()
        if when not in CONDITIONS:
            known = ", ".join(CONDITIONS)
            return f"{said}: unknown condition '{untrusted.echo(when, 20)}' ({known})"
    parts = [p.strip() for p in item.split("/")]
    if not all(parts) or len(parts) > 3 or (not condition and ":" in item):
        return f"{said}: not [condition:][Kind/][namespace/]name"
    if len(parts) == 3:
        found = Ref(when, parts[0], parts[1], parts[2])
    elif len(parts) == 2:
        first, name = parts
        found = Ref(when, first, namespace, name) if first[0].isupper() else Ref(when, "", *parts)
    else:
        found = Ref(when, "", namespace, parts[0])
    if found.kind and _KIND.fullmatch(found.kind) is None:
        return f"{said}: the kind is not a Kind or Kind.group"
    for part, bad in (
        ("namespace", untrusted.name_problem(found.namespace, label=True)),
        ("name", untrusted.name_problem(found.name)),
    ):
        if bad is not None:
            return f"{said}: the {part} {bad}"
    return found


class Fleet:
    """The snapshot's jobs by template namespace and name, indexed on first use."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self._index: dict[tuple[str, str], list[_Job]] | None = None
        self.clusters = {c.name: c for c in snapshot.clusters}

    def find(self, ref: Ref) -> list[_Job]:
        if self._index is None:
            self._index = _index(self.snapshot)
        found = self._index.get((ref.namespace, ref.name), [])
        return [j for j in found if not ref.kind or ref.kind in j.kinds]


def _index(snapshot: Snapshot) -> dict[tuple[str, str], list[_Job]]:
    index: dict[tuple[str, str], list[_Job]] = {}
    bound = set()
    for binding in snapshot.bindings:
        r = binding.resource
        bound.add(r.key)
        job = _Job(qualified_name(r.api_version, r.kind, r.namespace, r.name), _kinds(r), binding)
        index.setdefault((r.namespace, r.name), []).append(job)
    for key, workload in snapshot.workloads.items():
        if key not in bound:  # a template Karmada has not bound yet: Pending
            job = _Job(workload.ref, _kinds(workload), None)
            index.setdefault((workload.namespace, workload.name), []).append(job)
    return index


def _kinds(obj: ObjectRef | Workload) -> frozenset[str]:
    api_version, kind = obj.api_version, obj.kind
    shown = qualified_name(api_version, kind, "", "x").rpartition("/")[0]
    return frozenset({kind, f"{kind}.{group_of(api_version)}".rstrip("."), shown})


def state(job: _Job) -> str:
    """Pending, Running, Succeeded or Failed (see the module docstring)."""
    b = job.binding
    if b is not None and not b.clusters and ann.GAVE_UP in b.annotations:
        return FAILED  # the reconciler gave it up after maxAttempts: it never runs again
    if b is None or not b.clusters:
        return PENDING
    placed = {name for name, _ in b.clusters}
    if not placed <= b.finished:
        return RUNNING
    return FAILED if placed & b.failed else SUCCEEDED


def check(
    jobs: Iterable[PendingJob], fleet: Fleet, cross_namespace: bool = False
) -> dict[str, Verdict]:
    """A verdict for each job (by binding ref) that declares dependencies; a reference to
    another namespace's job is invalid unless ``cross_namespace`` (``spec.dependencies.
    crossNamespace: Allow``)."""
    wanted: dict[str, tuple[PendingJob, list[Ref], Ref | None, list[str]]] = {}
    for job in jobs:
        if job.depends:
            wanted[job.ref] = (job, *_references(job, cross_namespace))
    if not wanted:
        return {}
    edges: dict[str, list[str]] = {}
    for ref, (_, after, same, _errors) in wanted.items():
        targets = [*after, *([same] if same else [])]
        edges[ref] = sorted(
            {
                binding_ref(j.binding)
                for t in targets
                for j in fleet.find(t)
                if j.binding is not None and binding_ref(j.binding) in wanted
            }
        )
    on_cycles = _cycles(edges)
    verdicts: dict[str, Verdict] = {}
    for ref, members in on_cycles.items():
        names = ", ".join(wanted[m][0].workload_ref for m in members)
        verdicts[ref] = Verdict(Reason.DEPENDENCY_CYCLE, f"dependency cycle among {names}")
    for ref, (_job, after, same, errors) in wanted.items():
        if ref not in verdicts:
            verdicts[ref] = _verdict(after, same, errors, fleet)
    return verdicts


def written(job: PendingJob) -> tuple[str, ...]:
    """The job's dependencies as they read (``condition Kind/namespace/name``; a reference
    that cannot be read is left out: its job is rejected, and says why)."""
    annotations = job.workload.annotations if job.workload else {}
    if not (
        job.mapped.after
        or job.mapped.same_cluster_as
        or ann.AFTER in annotations
        or ann.SAME_CLUSTER_AS in annotations
    ):
        return ()  # most jobs: nothing to read
    after, same, _ = _references(job, cross_namespace=True)
    return tuple(f"{r.condition} {r.target}" for r in (*after, *([same] if same else [])))


def _references(
    job: PendingJob, cross_namespace: bool = False
) -> tuple[list[Ref], Ref | None, list[str]]:
    annotations: Mapping[str, str] = job.workload.annotations if job.workload else {}
    namespace = job.binding.resource.namespace
    texts = [t for t in annotations.get(ann.AFTER, "").split(",") if t.strip()]
    texts += [t for item in job.mapped.after for t in item.split(",") if t.strip()]
    after: list[Ref] = []
    errors: list[str] = []
    for text in texts:
        found = _allowed(text, parse(text, namespace), namespace, cross_namespace)
        (after if isinstance(found, Ref) else errors).append(found)  # type: ignore[arg-type]
    same_text = annotations.get(ann.SAME_CLUSTER_AS) or job.mapped.same_cluster_as
    same: Ref | None = None
    if same_text.strip():
        found = parse(same_text, namespace, condition=False)
        found = _allowed(same_text, found, namespace, cross_namespace)
        if isinstance(found, Ref):
            same = Ref("placed", found.kind, found.namespace, found.name)
        else:
            errors.append(f"same-cluster-as {found}")
    return after, same, errors


def _allowed(text: str, found: Ref | str, namespace: str, cross_namespace: bool) -> Ref | str:
    """``found`` (a reference read from ``text``, or why it could not be), unless it names
    another namespace's job and ``cross_namespace`` is off: then why it is not followed (it
    would tell this job's owner whether that job exists, its state and its cluster)."""
    if not isinstance(found, Ref) or cross_namespace or found.namespace == namespace:
        return found
    return (
        f"'{untrusted.echo(text.strip())}': a job of namespace {found.namespace}, not "
        "this job's (spec.dependencies.crossNamespace: Deny)"
    )


def _verdict(
    after: Sequence[Ref], same: Ref | None, errors: Sequence[str], fleet: Fleet
) -> Verdict:
    if errors:
        return Verdict(Reason.INVALID_DEPENDENCY, "; ".join(errors))
    never: list[str] = []
    missing: list[str] = []
    waiting: list[str] = []
    for ref in after:
        found = _one(ref, fleet, missing)
        if found is None:
            continue
        now = state(found)
        if now in _MET[ref.condition]:
            continue
        text = f"{ref.condition}:{found.ref} ({now})"
        (never if now == _NEVER.get(ref.condition) else waiting).append(text)
    pin: tuple[str, ...] = ()
    pinned_to = ""
    if same is not None and (found := _one(same, fleet, missing)) is not None:
        if found.binding is not None and found.binding.clusters:
            pin, pinned_to = tuple(sorted(n for n, _ in found.binding.clusters)), found.ref
        else:
            waiting.append(f"same-cluster-as {found.ref} (Pending: not placed yet)")
    if never:
        return Verdict(Reason.DEPENDENCY_FAILED, f"can never be met: {', '.join(never)}")
    if missing:
        return Verdict(Reason.DEPENDENCY_NOT_FOUND, "; ".join(missing))
    if waiting:
        return Verdict(Reason.WAITING_FOR_DEPENDENCY, f"waits for {', '.join(waiting)}")
    gone = [name for name in pin if name not in fleet.clusters]
    if pin and len(gone) == len(pin):
        where = ", ".join(gone)
        return Verdict(
            Reason.NO_CANDIDATE_CLUSTER,
            f"same-cluster-as {pinned_to}: its cluster {where} is no longer in the fleet",
        )
    return Verdict(None, "", pin, pinned_to)


def _one(ref: Ref, fleet: Fleet, missing: list[str]) -> _Job | None:
    found = fleet.find(ref)
    if len(found) == 1:
        return found[0]
    if not found:
        missing.append(f"no job {ref.target} (it may be created later)")
    else:
        jobs = ", ".join(sorted(j.ref for j in found))
        missing.append(f"{ref.target} matches {jobs}: name its kind")
    return None


def _cycles(edges: Mapping[str, Sequence[str]]) -> dict[str, list[str]]:
    """Each node on a cycle → the (sorted) members of its strongly connected component:
    Tarjan's algorithm, iterative, visiting nodes and edges in sorted order."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    result: dict[str, list[str]] = {}
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = len(index)
                stack.append(node)
                on_stack.add(node)
            successors = edges.get(node, ())
            if i < len(successors):
                work.append((node, i + 1))
                nxt = successors[i]
                if nxt not in index:
                    work.append((nxt, 0))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            if low[node] == index[node]:
                members = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    members.append(member)
                    if member == node:
                        break
                if len(members) > 1 or node in successors:
                    for member in members:
                        result[member] = sorted(members)
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return result


def pinned(candidates: Candidates, pin: tuple[str, ...], holder: str) -> Candidates:
    """``candidates`` restricted to ``pin``, the clusters of the job ``holder``."""
    reasons = dict(candidates.reasons)
    for name in candidates.names:
        if name not in pin:
            reasons[name] = f"not where {holder} runs (same-cluster-as)"
    return Candidates(
        tuple(n for n in candidates.names if n in pin),
        candidates.preference,
        reasons,
        candidates.error,
        tuple(n for n in candidates.later if n in pin),
    )


def pinned_note(pin: tuple[str, ...], holder: str, reasons: Iterable[tuple[str, str]]) -> str:
    """Why the clusters of ``holder`` could not take the job, for its decision's message."""
    said = dict(reasons)
    why = ", ".join(f"{n}: {said[n]}" if n in said else n for n in pin)
    return f"same-cluster-as {holder} allows only {why}"
