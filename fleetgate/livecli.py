"""``fleetgate jobs``, ``queues``, ``clusters`` and ``describe job``: the live fleet, as the user's
own kubeconfig lets them see it. Also ``kubectl fleetgate …`` (the ``kubectl-fleetgate``
executable the package installs, found by kubectl's plugin lookup).

Everything is read from the visibility API (``visibility.fleetgate.io/v1alpha1``, served by
``fleetgate serve --visibility-port`` behind the karmada-apiserver's aggregation), so the API
server authenticates the user and RBAC decides what they see: a tenant allowed to read one
namespace's jobs sees those, and ``-A`` without leave to list every namespace shows the
namespace of the kubeconfig's context instead, saying so. The Events of ``describe job`` are
the core/v1 Events on the user's template, read with the same credentials.

"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from collections.abc import Callable, Mapping
from typing import Any

import yaml

from engine import annotations as ann
from engine import untrusted
from engine.quantity import parse_quantity
from fleetgate.liveapi import PREFIX, Forbidden, Live, LiveError

GPU = "nvidia.com/gpu"
EXIT_OK, EXIT_FAILED = 0, 1
STATES = ("pending", "admitted", "running", "rejected", "preempted")
Out = Callable[[str], None]


def add_parsers(commands: Any) -> None:
    """``jobs``, ``queues`` and ``describe`` on the ``fleetgate`` command's subparsers."""
    jobs = commands.add_parser(
        "jobs",
        help="list the live fleet's jobs you may see: state, queue position, reason, clusters",
        description="The jobs of a namespace (the context's, -n NS) or of every namespace (-A), "
        "as the live reconciler sees them, through the visibility API with your kubeconfig: "
        "RBAC decides what you see.",
    )
    _connection(jobs)
    where = jobs.add_mutually_exclusive_group()
    where.add_argument("-n", "--namespace", help="the namespace (the context's by default)")
    where.add_argument("-A", "--all-namespaces", action="store_true", help="every namespace")
    jobs.add_argument("--queue", help="only the jobs of this queue (and the queues below it)")
    jobs.add_argument("--state", choices=STATES, help="only the jobs in this state")
    _output(jobs)
    jobs.set_defaults(handler=run_jobs)

    queues = commands.add_parser(
        "queues",
        help="the live queue tree: usage against guarantee and max, borrowing, share, jobs",
        description="Every queue as the live reconciler sees it, through the visibility API.",
    )
    _connection(queues)
    _output(queues)
    queues.set_defaults(handler=run_queues)

    clusters = commands.add_parser(
        "clusters",
        help="the member clusters: Ready, GPUs allocatable, allocated and free, and what "
        "fleetgate admitted there",
        description="Karmada's Cluster objects (their status, as Karmada reports it) and, per "
        "cluster, the jobs fleetgate admitted there that you may see.",
    )
    _connection(clusters)
    _output(clusters)
    clusters.set_defaults(handler=run_clusters)

    describe = commands.add_parser(
        "describe",
        help="one live job in detail: why it waits or runs there, its position, its Events",
        description="describe job NAMESPACE/NAME (the template's or the binding's name): the "
        "dry-run --explain view of the live fleet, then the Events on the job.",
    )
    _connection(describe)
    describe.add_argument("kind", choices=("job",), help="what to describe")
    describe.add_argument("name", metavar="NAMESPACE/NAME")
    describe.set_defaults(handler=run_describe)


def _connection(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kubeconfig", help="the kubeconfig (KUBECONFIG, ~/.kube/config)")
    parser.add_argument("--context", help="the kubeconfig context (its current one)")


def _output(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-o", "--output", choices=("table", "wide", "json", "yaml"), default="table"
    )


def _run(args: argparse.Namespace, body: Callable[[Live, Out], int]) -> int:
    try:
        live = Live(args.kubeconfig, args.context)
    except LiveError as error:
        print(f"fleetgate: {error}", file=sys.stderr)
        return EXIT_FAILED
    try:
        return body(live, print)
    except LiveError as error:
        print(f"fleetgate: {error}", file=sys.stderr)
        return EXIT_FAILED
    finally:
        live.close()


def run_jobs(args: argparse.Namespace) -> int:
    return _run(args, lambda live, out: _jobs(live, args, out))


def _jobs(live: Live, args: argparse.Namespace, out: Out) -> int:
    every = bool(args.all_namespaces)
    namespace = args.namespace or live.namespace
    if every:
        try:
            items = live.get(f"{PREFIX}/jobs")["items"]
        except Forbidden as error:
            print(
                f"fleetgate: you may not list the jobs of every namespace ({error}); "
                f"the jobs of namespace {namespace}:",
                file=sys.stderr,
            )
            every = False
    if not every:
        items = live.get(f"{PREFIX}/namespaces/{namespace}/jobs")["items"]
    items = [i for i in items if _wanted(i, args.queue, args.state)]
    if args.output in ("json", "yaml"):
        _dump({"kind": "JobList", "items": items}, args.output, out)
        return EXIT_OK
    now = dt.datetime.now(dt.UTC)
    columns = ["NAME", "QUEUE", "STATE", "POSITION", "REASON", "AGE", "CLUSTERS", "GPUS"]
    if every:
        columns.insert(0, "NAMESPACE")
    if args.output == "wide":
        columns += ["PRIORITY", "TENANT", "MESSAGE"]
    rows = [_job_row(item, now, every, args.output == "wide") for item in items]
    _table(columns, rows, out, "No jobs found.")
    return EXIT_OK


def _wanted(item: Mapping[str, Any], queue: str | None, state: str | None) -> bool:
    if queue and item.get("queue") != queue:
        return False
    return not state or _state(item) == state


def _state(item: Mapping[str, Any]) -> str:
    state = str(item.get("state") or "")
    return "running" if state == "admitted" and item.get("runningSince") else state


def _job_row(item: Mapping[str, Any], now: dt.datetime, every: bool, wide: bool) -> list[str]:
    namespace, _, name = str(item.get("workload", "")).partition("/")[2].partition("/")
    position = item.get("position")
    clusters = ",".join(c["name"] for c in item.get("clusters") or ()) or "-"
    gpus = (item.get("demand") or item.get("usage") or {}).get(GPU)
    row = [
        name or str(item.get("binding", "")),
        str(item.get("queue") or "-"),
        _state(item),
        str(position) if position is not None else "-",
        str(item.get("reason") or "-"),
        _age(item.get("queuedAt"), now),
        clusters,
        _number(gpus) if gpus is not None else "0",
    ]
    if every:
        row.insert(0, namespace)
    if wide:
        row += [str(item.get("priority", "")), str(item.get("tenant") or "-"), _one_line(item)]
    return row


def run_queues(args: argparse.Namespace) -> int:
    return _run(args, lambda live, out: _queues(live, args.output, out))


def _queues(live: Live, output: str, out: Out) -> int:
    items = live.get(f"{PREFIX}/queues")["items"]
    if output in ("json", "yaml"):
        _dump({"kind": "QueueList", "items": items}, output, out)
        return EXIT_OK
    children: dict[str, list[Mapping[str, Any]]] = {}
    for q in items:
        children.setdefault(q.get("parent") or "", []).append(q)
    rows: list[list[str]] = []

    def walk(parent: str, depth: int) -> None:
        for q in sorted(children.get(parent, ()), key=lambda q: _name(q)):
            usage, guarantee = q.get("usage") or {}, q.get("guarantee") or {}
            ceiling = q.get("max") or {}
            used, held = usage.get(GPU, 0), guarantee.get(GPU, 0)
            borrowed = max(0.0, float(used) - float(held))
            most = _number(ceiling[GPU]) if GPU in ceiling else "-"
            row = [
                "  " * depth + _name(q),
                f"{_number(used)}/{_number(held)}/{most}",
                _number(borrowed) if borrowed else "-",
                f"{float(q.get('share') or 0):.2f}",
                _number(q.get("weight")) if q.get("weight") is not None else "-",
                str(q.get("admitted", 0)),
                str(q.get("pending", 0)),
            ]
            if output == "wide":
                row += [str(q.get("priority", "-")), str(q.get("strategy") or "-")]
            rows.append(row)
            walk(_name(q), depth + 1)

    walk("", 0)
    columns = ["QUEUE", "GPUS USED/GUARANTEE/MAX", "BORROWED", "SHARE", "WEIGHT", "ADMITTED"]
    columns.append("PENDING")
    if output == "wide":
        columns += ["PRIORITY", "STRATEGY"]
    _table(columns, rows, out, "No queues found.")
    return EXIT_OK


def _name(queue: Mapping[str, Any]) -> str:
    return str(queue.get("name") or (queue.get("metadata") or {}).get("name") or "")


def run_clusters(args: argparse.Namespace) -> int:
    return _run(args, lambda live, out: _clusters(live, args.output, out))


def _clusters(live: Live, output: str, out: Out) -> int:
    items = live.get("/apis/cluster.karmada.io/v1alpha1/clusters")["items"]
    try:
        jobs = live.get(f"{PREFIX}/jobs")["items"]
    except Forbidden:  # the jobs of the context's namespace, then
        jobs = live.get(f"{PREFIX}/namespaces/{live.namespace}/jobs")["items"]
    admitted: dict[str, list[float]] = {}
    for job in jobs:
        if job.get("state") == "admitted":
            for placed in job.get("clusters") or ():
                found = admitted.setdefault(placed["name"], [0, 0.0])
                found[0] += 1
                gpus = (job.get("usage") or {}).get(GPU, 0) if len(job["clusters"]) == 1 else 0
                found[1] += float(gpus)
    if output in ("json", "yaml"):
        _dump({"kind": "ClusterList", "items": items}, output, out)
        return EXIT_OK
    rows = []
    for cluster in sorted(items, key=lambda c: c["metadata"]["name"]):
        name = cluster["metadata"]["name"]
        status = cluster.get("status") or {}
        summary = status.get("resourceSummary") or {}
        total = _amount(summary.get("allocatable"))
        used = _amount(summary.get("allocated")) + _amount(summary.get("allocating"))
        ready = next(
            (c.get("status") for c in status.get("conditions") or () if c.get("type") == "Ready"),
            "Unknown",
        )
        jobs_there, gpus_there = admitted.get(name, [0, 0.0])
        row = [name, str(ready), _number(total), _number(used), _number(max(0.0, total - used))]
        row += [str(jobs_there), _number(gpus_there)]
        if output == "wide":
            labels = sorted((cluster["metadata"].get("labels") or {}).items())
            row.append(",".join(f"{k}={v}" for k, v in labels) or "-")
        rows.append(row)
    columns = ["CLUSTER", "READY", "GPUS", "ALLOCATED", "FREE", "ADMITTED", "ADMITTED-GPUS"]
    if output == "wide":
        columns.append("LABELS")
    _table(columns, rows, out, "No clusters found.")
    return EXIT_OK


def _amount(resources: Any) -> float:
    """The GPUs of a ``resourceSummary`` resource list (a quantity: "32", "1k")."""
    text = (resources or {}).get(GPU) if isinstance(resources, Mapping) else None
    try:
        return float(parse_quantity(str(text))) if text is not None else 0.0
    except ValueError:
        return 0.0


def run_describe(args: argparse.Namespace) -> int:
    return _run(args, lambda live, out: _describe(live, args.name, out))


def _describe(live: Live, ref: str, out: Out) -> int:
    namespace, _, name = ref.partition("/")
    if not name:
        namespace, name = live.namespace, ref
    job = live.get(f"{PREFIX}/namespaces/{namespace}/jobs/{name}")
    now = dt.datetime.now(dt.UTC)
    kind, _, rest = str(job.get("workload", "")).partition("/")
    fields = [
        ("Name", rest.partition("/")[2] or name),
        ("Namespace", namespace),
        ("Kind", kind or "-"),
        ("Binding", str(job.get("binding", "-"))),
        ("Queue", str(job.get("queue") or "-")),
        ("Tenant", str(job.get("tenant") or "-")),
        ("Priority", str(job.get("priority", "-"))),
        ("State", _state(job)),
        ("Position", str(job["position"]) if job.get("position") is not None else "-"),
        ("Reason", str(job.get("reason") or "-")),
        ("Queued", f"{job.get('queuedAt', '-')} ({_age(job.get('queuedAt'), now)} ago)"),
    ]
    if job.get("admittedAt"):
        fields.append(("Admitted", str(job["admittedAt"])))
    if job.get("runningSince"):
        fields.append(("Running since", str(job["runningSince"])))
    clusters = ", ".join(f"{c['name']} ({c['replicas']} pods)" for c in job.get("clusters") or ())
    fields.append(("Clusters", clusters or "-"))
    group = job.get("group")
    if group:
        fields.append(("Group", f"{group['name']}: {group['present']} of {group['size']} "
                                f"present, min {group['min']}, {group['state']}"))  # fmt: skip
    width = max(len(k) for k, _ in fields) + 2
    for key, value in fields:
        out(f"{key + ':':<{width}}{untrusted.echo(value, 4096)}")
    out("Explanation:")
    for line in str(job.get("explanation") or job.get("message") or "").splitlines():
        out(f"  {untrusted.echo(line, 4096)}")
    out("Events:")
    events = _events(live, namespace, rest.partition("/")[2] or name, kind)
    if not events:
        out("  <none>")
    for event in events:
        when = _age(event.get("lastTimestamp") or event.get("eventTime"), now)
        count = int(event.get("count") or 1)
        seen = f"{when} (x{count})" if count > 1 else when
        message = untrusted.echo(str(event.get("message", "")), 1024)
        out(f"  {event.get('type', '')}\t{event.get('reason', '')}\t{seen}\t{message}")
    return EXIT_OK


def _events(live: Live, namespace: str, name: str, kind: str) -> list[dict[str, Any]]:
    """The Events on the job's template, oldest first; none when RBAC hides them."""
    selector = f"involvedObject.name={name},involvedObject.kind={kind}"
    try:
        found = live.get(f"/api/v1/namespaces/{namespace}/events", [("fieldSelector", selector)])
    except Forbidden:
        return []
    items = list(found.get("items") or ())
    return sorted(items, key=lambda e: str(e.get("lastTimestamp") or e.get("eventTime") or ""))


def _age(stamp: Any, now: dt.datetime) -> str:
    when = ann.parse_time(str(stamp or ""))
    if when is None:
        return "-"
    seconds = max(0, int((now - when).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _number(value: Any) -> str:
    number = float(value or 0)
    return f"{number:g}"


def _one_line(item: Mapping[str, Any]) -> str:
    return untrusted.echo(" ".join(str(item.get("message") or "").split()), 200)


def _dump(body: Mapping[str, Any], output: str, out: Out) -> None:
    if output == "json":
        out(json.dumps(body, indent=2))
    else:
        out(yaml.safe_dump(body, sort_keys=False).rstrip())


def _table(columns: list[str], rows: list[list[str]], out: Out, empty: str) -> None:
    if not rows:
        print(empty, file=sys.stderr)
        return
    cells = [columns, *([untrusted.echo(c, 256) for c in row] for row in rows)]
    widths = [max(len(r[i]) for r in cells) for i in range(len(columns))]
    for row in cells:
        out("   ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
