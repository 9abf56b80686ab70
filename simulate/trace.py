"""Job traces: CSV or JSON lines → :class:`TraceJob` values, every problem named by place.

A row is one job: when it is submitted, how long it runs, its queue and tenant, its kind, its
pods (roles with replicas and per-pod requests, or a GPU count shaped into pods), priority, an
optional cluster hint, a pipeline stage and the jobs it runs after. Columns are mapped and units
converted by :mod:`simulate.columns`; docs/simulator.md lists every field.

Problems are collected, all of them, as ``FILE:LINE:COLUMN: column 'x' (field): message``
(JSON lines: ``FILE:LINE: key 'x' (field): message``) and raised together as
:class:`TraceError`, unless ``skip_bad_rows`` drops those rows (they are returned as
``Trace.skipped``).
"""

from __future__ import annotations

import csv
import json
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

from engine.errors import FleetgateError, QuantityError
from engine.quantity import parse_quantity
from engine.resources import Resources
from simulate import columns as col
from simulate.results import GPU

KINDS: dict[str, tuple[str, str]] = {
    "PyTorchJob": ("kubeflow.org/v1", "PyTorchJob"),
    "TFJob": ("kubeflow.org/v1", "TFJob"),
    "MPIJob": ("kubeflow.org/v2beta1", "MPIJob"),
    "VolcanoJob": ("batch.volcano.sh/v1alpha1", "Job"),
    "RayJob": ("ray.io/v1", "RayJob"),
    "JobSet": ("jobset.x-k8s.io/v1alpha2", "JobSet"),
    "SparkApplication": ("sparkoperator.k8s.io/v1beta2", "SparkApplication"),
    "Job": ("batch/v1", "Job"),
}
"""Short kind names a trace may use; ``apiVersion/Kind`` names any other."""
RESIZABLE = frozenset({("batch/v1", "Job"), ("apps/v1", "Deployment")})
SHORT_RESOURCES = {"cpu": "cpu", "memory": "memory", "gpu": GPU, "gpus": GPU}
CPU_ONLY_POD = {"cpu": Fraction(1), "memory": Fraction(4 * 2**30)}
_NAME = re.compile(r"[^a-z0-9.-]+")


class TraceError(FleetgateError):
    """A trace that cannot be read: every problem found, each naming its place."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        shown = problems[:30]
        more = f"\n… and {len(problems) - len(shown)} more" if len(problems) > len(shown) else ""
        super().__init__("\n".join(shown) + more)


@dataclass(frozen=True, slots=True)
class TraceRole:
    name: str
    replicas: int
    requests: Resources  # per pod


@dataclass(frozen=True, slots=True)
class TraceJob:
    index: int  # row order in the file (0-based among kept rows)
    name: str  # a DNS-style name, unique in the trace
    submit: float  # seconds since the trace's first submit
    duration: float  # seconds it runs once started
    queue: str  # what the template says (label fleetgate.io/queue); the policy decides
    tenant: str
    namespace: str  # the tenant as a Kubernetes namespace name
    api_version: str
    kind: str
    roles: tuple[TraceRole, ...]
    priority: int = 0  # PriorityClass value
    cluster: str = ""  # hint: the only cluster it may use
    stage: str = ""
    after: tuple[str, ...] = ()  # references "[condition:]namespace/name" of other trace jobs
    source: str = ""  # FILE:LINE

    @property
    def gpus(self) -> int:
        return int(sum(r.requests.get_amount(GPU) * r.replicas for r in self.roles))


@dataclass(frozen=True, slots=True)
class Trace:
    jobs: tuple[TraceJob, ...]  # by submit time, then file order
    skipped: tuple[str, ...] = ()  # problems of the rows left out (skip_bad_rows)
    origin: float = 0.0  # the first submit time as read (seconds), subtracted from every time


def read_trace(
    path: Path | str, mapping: col.ColumnMapping | None = None, *, skip_bad_rows: bool = False
) -> Trace:
    """Read a ``.csv`` or ``.jsonl``/``.ndjson`` trace (by suffix; ``.json`` lines too)."""
    path = Path(path)
    mapping = mapping or col.ColumnMapping()
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise TraceError([f"{path}: {err.strerror or err}"]) from None
    except UnicodeDecodeError as err:
        raise TraceError([f"{path}: not UTF-8 text ({err.reason})"]) from None
    rows = _json_rows(path, text) if path.suffix in (".jsonl", ".ndjson", ".json") else None
    rows = rows if rows is not None else _csv_rows(path, text)
    drafts: list[dict[str, Any]] = []
    problems: list[str] = []
    skipped: list[str] = []
    for place, cells, where in rows:
        if isinstance(cells, str):  # the row itself is broken
            (skipped if skip_bad_rows else problems).append(f"{place}: {cells}")
            continue
        row_problems: list[str] = []
        draft = _read_row(cells, where, mapping, row_problems, place)
        if row_problems:
            (skipped if skip_bad_rows else problems).extend(row_problems)
        elif draft is not None:
            drafts.append(draft)
    if problems:
        raise TraceError(problems)
    return _finish(path, drafts, skipped)


# -- rows ---------------------------------------------------------------------------------------

Row = tuple[str, dict[str, str] | str, dict[str, str]]  # place, cells (or a problem), where


def _csv_rows(path: Path, text: str) -> Iterator[Row]:
    reader = csv.reader(text.splitlines())
    header: list[str] | None = None
    for record in reader:
        line = reader.line_num
        if not record or all(not c.strip() for c in record) or record[0].startswith("#"):
            continue
        if header is None:
            header = [c.strip() for c in record]
            continue
        place = f"{path}:{line}"
        if len(record) != len(header):
            yield place, f"{len(record)} cells, the header has {len(header)}", {}
            continue
        cells = {h: c.strip() for h, c in zip(header, record, strict=True)}
        where = {h: f"{place}:{i + 1}: column {h!r}" for i, h in enumerate(header)}
        yield place, cells, where
    if header is None:
        yield f"{path}", "no header row: the first line must name the columns", {}


def _json_rows(path: Path, text: str) -> Iterator[Row] | None:
    def rows() -> Iterator[Row]:
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            place = f"{path}:{number}"
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as err:
                yield place, f"not JSON: {err.msg} at column {err.colno}", {}
                continue
            if not isinstance(obj, dict):
                yield place, f"expected a JSON object, got {type(obj).__name__}", {}
                continue
            cells = {str(k): _cell(v) for k, v in obj.items() if v is not None}
            yield place, cells, {k: f"{place}: key {k!r}" for k in cells}

    return rows()


def _cell(value: Any) -> str:
    if isinstance(value, list | dict):
        return json.dumps(value)
    return str(value)


def _read_row(
    cells: Mapping[str, str],
    where: Mapping[str, str],
    mapping: col.ColumnMapping,
    problems: list[str],
    place: str,
) -> dict[str, Any] | None:
    def get(name: str) -> str:
        column = mapping.column(name)
        found = cells.get(column, "")
        return found if found != "" else mapping.defaults.get(name, "")

    def read(name: str, parse: Any, *args: Any) -> Any:
        text = get(name)
        if text == "":
            return None
        try:
            return parse(text, *args)
        except col.ValueProblem as err:
            column = mapping.column(name)
            at = where.get(column, f"{place}: (--set {name})")
            problems.append(f"{at} ({name}): {err}")
            return None

    submit = read("submit", col.time_value, mapping.unit("submit"))
    if submit is None and not problems:
        problems.append(f"{place}: no submit time (column {mapping.column('submit')!r})")
    start = read("start", col.time_value, mapping.unit("start"))
    end = read("end", col.time_value, mapping.unit("end"))
    duration = read("duration", col.duration_value, mapping.unit("duration"))
    if duration is None and end is not None and (start is not None or submit is not None):
        duration = end - (start if start is not None else submit)
        if duration < 0:
            problems.append(f"{place}: ends before it starts ({duration:g} s)")
    if duration is None and not problems:
        problems.append(f"{place}: no duration: map a duration column, or an end (and start) time")
    roles = _roles(get, read, mapping, problems, place)
    priority = read("priority", col.integer, "priority", -(2**31))
    kind = get("kind") or "PyTorchJob"
    api_kind = KINDS.get(kind) or (tuple(kind.rsplit("/", 1)) if "/" in kind else None)
    if api_kind is None:
        at = where.get(mapping.column("kind"), place)
        problems.append(
            f"{at} (kind): unknown kind {kind!r}; {', '.join(KINDS)} or apiVersion/Kind"
        )
    if problems:
        return None
    return {
        "place": place,
        "name": get("name"),
        "name_at": where.get(mapping.column("name"), place),
        "submit": submit,
        "duration": duration,
        "queue": get("queue") or "default",
        "tenant": get("tenant") or "default",
        "kind": api_kind,
        "roles": roles,
        "priority": priority or 0,
        "cluster": get("cluster"),
        "stage": get("stage"),
        "after": get("after"),
        "after_at": where.get(mapping.column("after"), place),
    }


def _roles(
    get: Any, read: Any, mapping: col.ColumnMapping, problems: list[str], place: str
) -> tuple[TraceRole, ...]:
    """Pods from ``roles``; else ``replicas`` × ``pod_*``; else ``gpus`` (and ``cpu``, ``memory``
    per job) shaped into pods of at most ``gpus_per_pod`` GPUs."""
    text = get("roles")
    if text:
        try:
            return parse_roles(text)
        except col.ValueProblem as err:
            problems.append(f"{place}: roles: {err}")
            return ()
    replicas = read("replicas", col.integer, "replicas", 1)
    pod_gpus = read("pod_gpus", col.gpu_amount, mapping.unit("pod_gpus"))
    pod_cpu = read("pod_cpu", col.amount, mapping.unit("pod_cpu"), col.CPU_UNITS)
    pod_memory = read("pod_memory", col.amount, mapping.unit("pod_memory"), col.MEMORY_UNITS)
    if replicas is not None or pod_gpus is not None or pod_cpu is not None:
        gpus = pod_gpus or 0
        shape = {
            "cpu": pod_cpu if pod_cpu is not None else mapping.per_gpu["cpu"] * max(gpus, 1),
            "memory": pod_memory
            if pod_memory is not None
            else mapping.per_gpu["memory"] * max(gpus, 1),
        }
        if gpus:
            shape[GPU] = Fraction(gpus)
        return (TraceRole("worker", replicas or 1, Resources(shape)),)
    gpus = read("gpus", col.gpu_amount, mapping.unit("gpus")) or 0
    cpu = read("cpu", col.amount, mapping.unit("cpu"), col.CPU_UNITS)
    memory = read("memory", col.amount, mapping.unit("memory"), col.MEMORY_UNITS)
    if gpus == 0:
        shape = {"cpu": cpu or CPU_ONLY_POD["cpu"], "memory": memory or CPU_ONLY_POD["memory"]}
        return (TraceRole("worker", 1, Resources(shape)),)
    pods = math.ceil(gpus / mapping.gpus_per_pod)
    per_pod = math.ceil(gpus / pods)
    shape = {
        "cpu": cpu / pods if cpu else mapping.per_gpu["cpu"] * per_pod,
        "memory": memory / pods if memory else mapping.per_gpu["memory"] * per_pod,
        GPU: Fraction(per_pod),
    }
    return (TraceRole("worker", pods, Resources(shape)),)


def parse_roles(text: str) -> tuple[TraceRole, ...]:
    """``NAME:REPLICAS:RES=QTY RES=QTY; …`` (JSON: a list of {name, replicas, requests}).
    Resources: ``cpu``, ``memory``, ``gpu`` or a full resource name; quantities as Kubernetes
    writes them (``8``, ``500m``, ``64Gi``)."""
    if text.lstrip().startswith("["):
        try:
            items = json.loads(text)
            entries = [(str(i["name"]), str(i["replicas"]), i.get("requests") or {}) for i in items]
        except (json.JSONDecodeError, KeyError, TypeError) as err:
            raise col.ValueProblem(f"not a list of {{name, replicas, requests}}: {err}") from None
    else:
        entries = []
        for part in (p.strip() for p in text.split(";")):
            if not part:
                continue
            pieces = part.split(":", 2)
            if len(pieces) != 3:
                raise col.ValueProblem(f"{part!r} is not NAME:REPLICAS:RES=QTY …")
            name, replicas, requests = pieces
            pairs = dict(p.partition("=")[::2] for p in requests.split())
            entries.append((name.strip(), replicas.strip(), pairs))
    roles = []
    for name, replicas, requests in entries:
        count = col.integer(replicas, f"replicas of role {name!r}", 1)
        amounts: dict[str, Fraction] = {}
        for resource, quantity in requests.items():
            key = SHORT_RESOURCES.get(resource, resource)
            try:
                amounts[key] = parse_quantity(quantity)
            except QuantityError as err:
                raise col.ValueProblem(f"role {name!r}: {resource}: {err}") from None
        if GPU in amounts:
            amounts[GPU] = Fraction(math.ceil(amounts[GPU]))
        roles.append(TraceRole(name or "worker", count, Resources(amounts)))
    if not roles:
        raise col.ValueProblem("no role")
    return tuple(roles)


# -- the whole trace ----------------------------------------------------------------------------


def dns_name(text: str) -> str:
    """A Kubernetes-style name: lower case, runs of other characters as ``-``."""
    return _NAME.sub("-", text.lower()).strip("-.") or "x"


def _finish(path: Path, drafts: list[dict[str, Any]], skipped: list[str]) -> Trace:
    problems: list[str] = []
    names: dict[str, str] = {}  # name as written → dns name
    seen: dict[str, str] = {}  # dns name → place
    for i, draft in enumerate(drafts):
        written = draft["name"] or f"job-{i:06d}"
        name = dns_name(written)
        if name in seen:
            problems.append(f"{draft['name_at']}: name {written!r} repeats {seen[name]}")
        seen[name] = draft["place"]
        names[written] = draft["dns"] = name
        draft["namespace"] = dns_name(draft["tenant"])
    namespaces = {d["dns"]: d["namespace"] for d in drafts}
    origin = min((d["submit"] for d in drafts), default=0.0)
    jobs = []
    for i, draft in enumerate(drafts):
        after = []
        for item in re.split(r"[;\s]+", draft["after"].strip()):
            if not item:
                continue
            condition, _, target = item.rpartition(":")
            found = names.get(target)
            if found is None:
                problems.append(
                    f"{draft['after_at']} (after): no job named {target!r} in the trace"
                )
                continue
            prefix = f"{condition}:" if condition else ""
            after.append(f"{prefix}{namespaces[found]}/{found}")
        jobs.append(
            TraceJob(
                index=i,
                name=draft["dns"],
                submit=draft["submit"] - origin,
                duration=draft["duration"],
                queue=draft["queue"],
                tenant=draft["tenant"],
                namespace=draft["namespace"],
                api_version=draft["kind"][0],
                kind=draft["kind"][1],
                roles=draft["roles"],
                priority=draft["priority"],
                cluster=draft["cluster"],
                stage=draft["stage"],
                after=tuple(after),
                source=draft["place"],
            )
        )
    if problems:
        raise TraceError(problems)
    jobs.sort(key=lambda j: (j.submit, j.index))
    return Trace(tuple(jobs), tuple(skipped), origin)
