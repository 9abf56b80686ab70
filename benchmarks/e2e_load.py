"""End to end: N jobs submitted at once to the sandbox, until every one is decided.

    .venv/bin/python benchmarks/e2e_load.py [--jobs 10000] [--threads 4] [--timeout 900]
        [--profile FILE]

Three processes, as in a deployment: the sandbox (``fleetgate sandbox``: the API server over
HTTPS and Karmada's controllers over examples/fleet.yaml, real time), fleetgate's webhook
(``fleetgate webhook``, HTTPS, registered with deploy/karmada-apiserver's configurations), and
this one, which runs the reconciler (``reconciler.loop.Reconciler``: informers through the
``kubernetes`` client, passes on events) and the load: the tenants' namespaces, PriorityClasses
and PropagationPolicies of the example fleet, then ``--jobs`` job templates of the demo's mix
(``sandbox.demo.jobs``; each runs a day, so nothing finishes meanwhile) created from
``--threads`` client threads at once. Karmada's detector turns each template into a binding
through the webhook, which holds it; the reconciler decides it: admitted (``spec.clusters``) or
pending with its reason (annotation ``fleetgate.io/pending``).

Prints one JSON document: templates created per second; the time until the last binding
existed and until every binding was decided (from the first create, as the reconciler's watch
saw them); decisions per second (end to end, and over the reconciler's deciding window);
every reconciler pass with where its time went (snapshot, lifecycle review, cycle, writes,
counted by wrapping those calls in this process; ``writes.patch`` and ``writes.event`` are the
requests a write is made of); the webhook's requests and mean latency per endpoint from its
/metrics; and the CPU seconds each process spent meanwhile (this one also by thread group:
reconciler, informers, the load's client threads), with the machine's core count and load
average, since the three processes share its CPUs; and ``webhookCpuMsPerReview``, the webhook's
CPU over the mutating and validating requests it answered meanwhile (HTTPS included).
``--profile FILE`` also writes a cProfile of the reconciler's passes.

``--backlog``: every job is submitted first, and held by the webhook, before the reconciler
starts (fleetgate restarted, or installed, with a queue of N jobs); the clock, the decisions and
the CPU count start with the reconciler's start, cold caches and first list included.
``backlog`` in the output says how long the submission took and when the last binding existed.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import shutil
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from engine import annotations as ann  # noqa: E402
from engine.enforce import lifecycle  # noqa: E402
from engine.policy.reload import PolicyHolder  # noqa: E402
from reconciler.loop import Reconciler  # noqa: E402
from reconciler.settings import ReconcilerSettings  # noqa: E402
from reconciler.writers import DEFAULT_WRITE_WORKERS  # noqa: E402
from sandbox import tls  # noqa: E402
from sandbox.demo.jobs import plan  # noqa: E402
from sandbox.demo.submit import create  # noqa: E402
from sandbox.demo.world import client, register_webhook, seed_tenants  # noqa: E402
from sandbox.karmada.names import DURATION_ANNOTATION  # noqa: E402

RB_KEY = "resourcebindings.work.karmada.io"
WRITER = "fleetgate-reconciler"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
GROUPS = ("reconciler", "informer", "submit")


def start(command: list[str], ready: Callable[[str], bool]) -> subprocess.Popen[str]:
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    for line in process.stdout:
        if ready(line):
            threading.Thread(target=_drain, args=(process,), daemon=True).start()
            return process
    process.kill()
    raise SystemExit(f"{' '.join(command[:4])} did not start")


def _drain(process: subprocess.Popen[str]) -> None:
    assert process.stdout is not None
    for _ in process.stdout:
        pass


def start_sandbox(workdir: Path) -> tuple[subprocess.Popen[str], Path]:
    kubeconfig = workdir / "kubeconfig"
    command = [sys.executable, "-m", "fleetgate", "sandbox", "--port", "0"]
    command += ["--kubeconfig-out", str(kubeconfig), "--fleet", "examples/fleet.yaml"]
    command += ["--log-level", "WARNING"]
    return start(command, lambda line: line.startswith("  stop:")), kubeconfig


def start_webhook(workdir: Path) -> tuple[subprocess.Popen[str], str, str]:
    served = tls.generate()
    cert, key = workdir / "tls.crt", workdir / "tls.key"
    cert.write_bytes(served.cert_pem + served.ca_pem)
    key.write_bytes(served.key_pem)
    port = _free_port()
    command = [sys.executable, "-m", "fleetgate", "webhook", "--policies", "policies"]
    command += ["--tls-cert", str(cert), "--tls-key", str(key), "--host", "127.0.0.1"]
    command += ["--port", str(port), "--fleet", "examples/fleet-snapshot.yaml"]
    command += ["--log-level", "WARNING"]
    process = subprocess.Popen(command, cwd=REPO)
    url = f"https://127.0.0.1:{port}"
    context = ssl.create_default_context(cadata=served.ca_pem.decode())
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/readyz", context=context, timeout=2):
                import base64

                return process, url, base64.b64encode(served.ca_pem).decode()
        except OSError:
            time.sleep(0.2)
    process.kill()
    raise SystemExit("the webhook did not become ready")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def webhook_metrics(url: str, ca_bundle: str) -> dict[str, dict[str, float]]:
    """endpoint → {count, sum} of the webhook's request duration histogram."""
    import base64

    context = ssl.create_default_context(cadata=base64.b64decode(ca_bundle).decode())
    with urllib.request.urlopen(f"{url}/metrics", context=context, timeout=5) as answer:
        text = answer.read().decode()
    found: dict[str, dict[str, float]] = {}
    prefix = "fleetgate_webhook_request_duration_seconds_"
    for line in text.splitlines():
        name, _, value = line.rpartition(" ")
        metric = name.split("{")[0]
        if not metric.startswith(prefix) or not metric.endswith(("_sum", "_count")):
            continue
        endpoint = name.partition('endpoint="')[2].partition('"')[0]
        kind = metric.rsplit("_", 1)[1]
        found.setdefault(endpoint, {})[kind] = float(value)
    return found


def reviews(metrics: Mapping[str, Mapping[str, float]]) -> int:
    """The admission requests (every endpoint) the webhook has answered."""
    return sum(int(seen.get("count", 0)) for seen in metrics.values())


def cpu_seconds(pid: int, tid: int | None = None) -> float:
    """User + system CPU seconds of a process (or one of its threads) from /proc."""
    where = f"/proc/{pid}/task/{tid}/stat" if tid is not None else f"/proc/{pid}/stat"
    try:
        fields = Path(where).read_text().rpartition(")")[2].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def thread_cpu() -> dict[str, float]:
    """CPU seconds of this process's threads, by what they do."""
    found: dict[str, float] = {}
    for thread in threading.enumerate():
        if thread.native_id is None:
            continue
        group = thread.name.split("-")[0] if thread.name.startswith(GROUPS) else "other"
        found[group] = found.get(group, 0.0) + cpu_seconds(os.getpid(), thread.native_id)
    return found


class Stages:
    """Seconds spent in each stage of the reconciler's passes (wrapped calls, this process)."""

    def __init__(self) -> None:
        self.totals: dict[str, float] = {}
        self.passes: list[dict[str, Any]] = []
        self.current: dict[str, float] = {}

    def wrap(self, name: str, function: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                spent = time.perf_counter() - started
                self.current[name] = self.current.get(name, 0.0) + spent
                self.totals[name] = self.totals.get(name, 0.0) + spent

        return timed


def instrument(rec: Reconciler, stages: Stages, profile: cProfile.Profile | None) -> None:
    rec._snapshot = stages.wrap("snapshot", rec._snapshot)  # type: ignore[method-assign]
    rec.cycles.decide = stages.wrap("cycle", rec.cycles.decide)  # type: ignore[method-assign]
    lifecycle.review = stages.wrap("lifecycle", lifecycle.review)
    rec.applier.apply = stages.wrap("writes", rec.applier.apply)  # type: ignore[method-assign]
    if hasattr(rec.applier, "transition"):
        rec.applier.transition = stages.wrap("writes", rec.applier.transition)  # type: ignore[method-assign]
    for private, name in (("_patch", "writes.patch"), ("_event", "writes.event")):
        if hasattr(rec.applier, private):  # the requests a write is made of, where known
            setattr(rec.applier, private, stages.wrap(name, getattr(rec.applier, private)))
    original = rec.run_once

    def run_once(*args: Any, **kwargs: Any) -> Any:
        stages.current = {}
        if profile is not None:
            profile.enable()
        try:
            summary = original(*args, **kwargs)
        finally:
            if profile is not None:
                profile.disable()
        stages.passes.append(
            {
                "at": time.monotonic(),
                "seconds": round(summary.seconds, 3),
                "decisions": summary.decisions,
                "applied": summary.applied,
                "unchanged": summary.unchanged,
                "conflicts": summary.conflicts,
                **{k: round(v, 3) for k, v in stages.current.items()},
            }
        )
        return summary

    rec.run_once = run_once  # type: ignore[method-assign]


class Watcher:
    """When each binding was first seen, and first seen decided, by the reconciler's informer."""

    def __init__(self, expected: set[str]) -> None:
        self.expected = expected
        self.seen: dict[str, float] = {}
        self.decided: dict[str, float] = {}
        self.admitted: set[str] = set()
        self.done = threading.Event()

    def __call__(self, _resource: str, key: Any, obj: Mapping[str, Any] | None) -> None:
        if obj is None:
            return
        meta = obj.get("metadata") or {}
        ref = f"{meta.get('namespace')}/{meta.get('name')}"
        if ref not in self.expected:
            return
        now = time.monotonic()
        self.seen.setdefault(ref, now)
        placed = bool((obj.get("spec") or {}).get("clusters"))
        if placed:
            self.admitted.add(ref)
        if ref not in self.decided and (placed or ann.PENDING in (meta.get("annotations") or {})):
            self.decided[ref] = now
            if len(self.decided) == len(self.expected):
                self.done.set()


def run(args: argparse.Namespace) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="e2e-load-"))
    sandbox, kubeconfig = start_sandbox(workdir)
    webhook, url, ca_bundle = start_webhook(workdir)
    rec: Reconciler | None = None
    backlog: dict[str, float] = {}
    try:
        api = client(kubeconfig, pool=args.threads + 2)
        register_webhook(api, url, ca_bundle)
        seed_tenants(api)
        jobs = plan(args.jobs, args.seed, window=0.0)
        for job in jobs:
            job.template["metadata"]["annotations"][DURATION_ANNOTATION] = "24h"
        watcher = Watcher({job.binding for job in jobs})
        holder = PolicyHolder.for_paths([REPO / "policies"])
        assert holder.reload(), holder.status.errors
        stages = Stages()
        profile = cProfile.Profile() if args.profile else None
        created: list[float] = []
        refused: list[str] = []
        lock = threading.Lock()

        def submit(part: list[Any]) -> None:
            for job in part:
                why = create(api, job.template)
                with lock:
                    created.append(time.monotonic())
                    if why is not None:
                        refused.append(f"{job.binding}: {why}")

        def start_reconciler() -> Reconciler:
            writer = client(kubeconfig, pool=32)
            writer.user_agent = f"{WRITER}/bench"  # names its writes in the sandbox's record
            started = Reconciler(
                writer,
                holder,
                ReconcilerSettings(debounce=0.2, resync=30.0, write_workers=args.write_workers),
            )
            instrument(started, stages, profile)
            started.informers[RB_KEY].add_listener(watcher)
            return started

        processes = {"sandbox": sandbox.pid, "webhook": webhook.pid, "this": os.getpid()}
        if not args.backlog:
            rec = start_reconciler().start()
            if not rec.wait_synced(60):
                raise SystemExit("the reconciler's informers did not sync")
        cpu_before = {name: cpu_seconds(pid) for name, pid in processes.items()}
        reviews_before = reviews(webhook_metrics(url, ca_bundle))
        threads_before = thread_cpu()
        began = time.monotonic()
        threads = [
            threading.Thread(target=submit, args=(jobs[i :: args.threads],), name=f"submit-{i}")
            for i in range(args.threads)
        ]
        for thread in threads:
            thread.start()
        submit_cpu = 0.0
        for thread in threads:
            spent = 0.0
            while thread.is_alive():  # its CPU is read before it ends (its /proc entry goes)
                if thread.native_id is not None:
                    spent = cpu_seconds(os.getpid(), thread.native_id)
                thread.join(0.2)
            submit_cpu += spent
        all_created = time.monotonic()
        if args.backlog:  # every binding exists, held by the webhook; then fleetgate starts
            backlog = wait_for_bindings(api, len(jobs) - len(refused), args.timeout)
            backlog["submitSeconds"] = round(all_created - began, 2)
            backlog["templatesPerSecond"] = round(len(jobs) / (all_created - began), 1)
            submit_cpu = 0.0  # the clock and the CPU count start with the reconciler
            cpu_before = {name: cpu_seconds(pid) for name, pid in processes.items()}
            reviews_before = reviews(webhook_metrics(url, ca_bundle))
            threads_before = thread_cpu()
            began = time.monotonic()
            rec = start_reconciler().start()
            all_created = began  # the reconciler starts with every binding there
        finished = watcher.done.wait(max(0.0, args.timeout - (all_created - began)))
        ended = time.monotonic()
        if rec is not None:  # the pass that wrote the last decision records its stages at its end
            rec.idle(30)
        cpu = {name: cpu_seconds(pid) - cpu_before[name] for name, pid in processes.items()}
        threads_after = thread_cpu()
        cpu |= {
            f"this.{group}": spent - threads_before.get(group, 0.0)
            for group, spent in threads_after.items()
        }
        cpu["this.submit"] = submit_cpu
        metrics = webhook_metrics(url, ca_bundle)
        if profile is not None:
            stats = pstats.Stats(profile)
            stats.dump_stats(args.profile)
        result = report(
            args, jobs, watcher, stages, metrics, began, all_created, ended, finished, refused
        )
        if args.backlog:
            result["backlog"] = backlog
        result["writesPerBinding"] = writes_per_binding(api, watcher.admitted)
        result["cpuSeconds"] = {k: round(v, 1) for k, v in sorted(cpu.items())}
        reviewed = reviews(metrics) - reviews_before
        result["webhookCpuMsPerReview"] = (
            round(1000 * cpu["webhook"] / reviewed, 3) if reviewed else None
        )
        result["cpuCores"] = os.cpu_count()
        result["loadAverage"] = [round(x, 2) for x in os.getloadavg()]
        return result
    finally:
        if rec is not None:
            rec.stop()
        for process in (webhook, sandbox):
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
        shutil.rmtree(workdir, ignore_errors=True)  # its kubeconfig and the test CA's key


def writes_per_binding(api: Any, admitted: Any) -> dict[str, Any]:
    """The reconciler's writes per binding (patches, status writes) from the sandbox's record
    (``GET /sandbox/writes``), for the admitted jobs and for those still waiting; ``dropped``
    is how many entries of any writer the record lost to its bound (the counts are exact at 0).
    Events are not counted: they are not writes of the binding."""
    request = api.param_serialize(
        "GET",
        "/sandbox/writes",
        query_params=[("resource", RB_KEY), ("user", WRITER)],
        header_params={"Accept": "application/json"},
        auth_settings=["BearerToken"],
    )
    response = json.loads(api.call_api(*request, _request_timeout=60).read())
    counts: dict[str, int] = {}
    for entry in response["entries"]:
        key = f"{entry['namespace']}/{entry['name']}"
        counts[key] = counts.get(key, 0) + 1
    admitted = set(admitted)

    def spread(values: list[int]) -> dict[str, Any]:
        values = sorted(values)
        if not values:
            return {"bindings": 0}
        return {
            "bindings": len(values),
            "median": statistics.median(values),
            "max": values[-1],
            "histogram": {str(n): values.count(n) for n in sorted(set(values))},
        }

    return {
        "admitted": spread([n for k, n in counts.items() if k in admitted]),
        "waiting": spread([n for k, n in counts.items() if k not in admitted]),
        "all": spread(list(counts.values())),
        "dropped": response.get("dropped", 0),
    }


def wait_for_bindings(api: Any, count: int, timeout: float) -> dict[str, float]:
    """Wait until ``count`` ResourceBindings exist; how long that took after the last create."""
    import kubernetes

    objects = kubernetes.client.CustomObjectsApi(api)
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        page = objects.list_cluster_custom_object(
            "work.karmada.io", "v1alpha2", "resourcebindings", limit=1
        )
        meta = page.get("metadata") or {}
        found = len(page.get("items") or []) + int(meta.get("remainingItemCount") or 0)
        if found >= count:
            return {
                "bindings": found,
                "secondsAfterLastCreate": round(time.monotonic() - started, 2),
            }
        time.sleep(0.5)
    raise SystemExit(f"fewer than {count} bindings after {timeout:.0f} s")


def report(
    args: argparse.Namespace,
    jobs: list[Any],
    watcher: Watcher,
    stages: Stages,
    metrics: Mapping[str, Mapping[str, float]],
    began: float,
    all_created: float,
    ended: float,
    finished: bool,
    refused: list[str],
) -> dict[str, Any]:
    decided = sorted(watcher.decided.values())
    last_seen = max(watcher.seen.values(), default=ended)
    first_decided = decided[0] if decided else ended
    all_decided = decided[-1] if finished and decided else ended
    total = all_decided - began
    window = all_decided - first_decided
    passes = [{**p, "at": round(p["at"] - began, 2)} for p in stages.passes if p["at"] >= began]
    return {
        "jobs": args.jobs,
        "threads": args.threads,
        "everyJobDecided": finished,
        "decided": len(decided),
        "admitted": len(watcher.admitted),
        "pending": len(decided) - len(watcher.admitted),
        "refused": refused[:5],
        "createSeconds": round(all_created - began, 2),
        "templatesPerSecond": (
            round(args.jobs / (all_created - began), 1) if all_created > began else None
        ),
        "lastBindingSeconds": round(last_seen - began, 2),
        "firstDecisionSeconds": round(first_decided - began, 2),
        "allDecidedSeconds": round(total, 2),
        "bindsPerSecond": round(len(decided) / total, 1) if total > 0 else None,
        "bindsPerSecondWhileDeciding": round(len(decided) / window, 1) if window > 0 else None,
        "reconcilerSeconds": {k: round(v, 2) for k, v in sorted(stages.totals.items())},
        "passes": passes,
        "webhook": {
            endpoint: {
                "requests": int(seen.get("count", 0)),
                "meanMs": round(1000 * seen.get("sum", 0) / seen["count"], 2)
                if seen.get("count")
                else None,
            }
            for endpoint, seen in sorted(metrics.items())
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=900.0, help="real seconds")
    parser.add_argument("--write-workers", type=int, default=DEFAULT_WRITE_WORKERS)
    parser.add_argument("--profile", metavar="FILE", help="write a cProfile of the passes")
    parser.add_argument(
        "--backlog",
        action="store_true",
        help="submit every job first (held by the webhook), then start the reconciler: time "
        "and CPU from its start (a restart, or fleetgate installed on a fleet with a backlog)",
    )
    print(json.dumps(run(parser.parse_args()), indent=2))


if __name__ == "__main__":
    main()
