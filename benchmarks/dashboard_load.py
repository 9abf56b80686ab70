"""The dashboard on a large fleet: first paint, bytes per update, and the reconciler's CPU.

    .venv/bin/python benchmarks/dashboard_load.py [--jobs 50000] [--clusters 100]
        [--queues 1000] [--updates 3]

The fleet is ``fleetgate bench``'s synthetic one (``engine.bench``: ``--jobs`` pending jobs, and
10–20% as many running, on ``--clusters`` members under ``--queues`` queues), decided by one
cycle. Everything else is real and on 127.0.0.1: the sandbox API server (HTTPS), the
reconciler's visibility API over that cycle (``reconciler.api``, HTTPS, the front proxy's
client certificate asked for) registered with the sandbox as an aggregated API,
``fleetgate dashboard``'s server reading it with the admin's kubeconfig, and headless Chromium
opening each page as a user would.

For each page it prints: the first paint (navigation start to the page drawn with its data, by
the page's own ``performance.mark``), the bytes each update moved (the sum of the resource
timings' ``transferSize`` of one refresh, headers included), and the CPU the visibility API
spent on that page's requests (thread CPU time, measured in its request hooks) as a fraction
of one core at the page's rate of one refresh every 5 s. Also the one-off CPU of building the
view of a pass (``build_view``), which a busy reconciler pays once per pass whether or not a
dashboard is open (``/api/v1``, the CLI and the dashboard share it).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import kubernetes
import yaml
from flask import g

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from engine.bench.synthetic import synthetic_fleet  # noqa: E402
from engine.cycle import JobCache, run_cycle  # noqa: E402
from engine.policy.reload import PolicyHolder  # noqa: E402
from fleetgate.dashboardserver import DashboardServer  # noqa: E402
from fleetgate.liveapi import PREFIX, Live  # noqa: E402
from reconciler.api import create_app, visibility_app  # noqa: E402
from reconciler.jobsview import build_view  # noqa: E402
from reconciler.loop import Reconciler  # noqa: E402
from reconciler.settings import ReconcilerSettings  # noqa: E402
from reconciler.visibility import read_request_header  # noqa: E402
from sandbox import tls  # noqa: E402
from sandbox.demo.screenshots import chrome_options, tools  # noqa: E402
from sandbox.server import Sandbox  # noqa: E402
from webhook.serve import WebhookServer  # noqa: E402

NOW = __import__("datetime").datetime(2026, 1, 1, tzinfo=__import__("datetime").UTC)
POLL_S = 5.0  # the page's refresh period (reconciler/dashboard/app.js)
PAGES = ("jobs?namespace=*", "fleet", "queues")


class CpuMeter:
    """Thread CPU seconds the visibility API spent, by the page that asked."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.by_path: dict[str, float] = {}
        self.in_flight = 0

    def attach(self, app: Any) -> None:
        """Measured from the app's first hook (so a view built for the request counts)."""

        def started() -> None:
            g.cpu0 = time.thread_time()
            with self.lock:
                self.in_flight += 1

        app.before_request_funcs.setdefault(None, []).insert(0, started)

        @app.teardown_request
        def ended(_error: BaseException | None) -> None:
            spent = time.thread_time() - getattr(g, "cpu0", time.thread_time())
            from flask import request

            with self.lock:
                self.in_flight -= 1
                key = request.path.rsplit("/", 1)[-1] or request.path
                self.by_path[key] = self.by_path.get(key, 0.0) + spent

    def settle(self) -> None:
        """Wait until no request is in flight (a page that went away may leave one)."""
        while self.in_flight:
            time.sleep(0.05)

    def take(self) -> dict[str, float]:
        with self.lock:
            taken, self.by_path = self.by_path, {}
        return taken


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=50_000)
    parser.add_argument("--clusters", type=int, default=100)
    parser.add_argument("--queues", type=int, default=1000)
    parser.add_argument("--updates", type=int, default=3, help="updates measured per page")
    args = parser.parse_args()
    binary, driver_path = tools()
    fleet = synthetic_fleet(
        jobs=args.jobs, clusters=args.clusters, queues=args.queues, seed=1, now=NOW
    )
    with contextlib.ExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="fg-dash-")))
        for i, doc in enumerate(fleet.policy_documents):
            (folder / "policies").mkdir(exist_ok=True)
            (folder / "policies" / f"{i:05d}.yaml").write_text(yaml.safe_dump(doc))
        holder = PolicyHolder.for_paths([folder / "policies"])
        assert holder.reload(), holder.status.errors
        result = run_cycle(fleet.snapshot, holder.current, NOW, JobCache())
        t0 = time.process_time()
        len(result.jobs)  # the records: every pass builds them for itself (engine.enforce)
        records_cpu = time.process_time() - t0
        t0 = time.process_time()
        build_view(result, holder.current)
        view_cpu = time.process_time() - t0

        sandbox = Sandbox()
        sandbox.start(port=0)
        stack.callback(sandbox.stop)
        kubeconfig = sandbox.write_kubeconfig(folder / "kubeconfig")
        configuration = kubernetes.client.Configuration()
        kubernetes.config.load_kube_config(str(kubeconfig), client_configuration=configuration)
        api = kubernetes.client.ApiClient(configuration)
        stack.callback(api.close)
        reconciler = Reconciler(api, holder, ReconcilerSettings())
        reconciler.last_result, reconciler.last_snapshot = result, fleet.snapshot
        meter = CpuMeter()
        served, latest = _serve_visibility(stack, sandbox, api, reconciler, folder, meter)
        dashboard = DashboardServer(Live(str(kubeconfig), None))
        dashboard.start()
        stack.callback(dashboard.stop)
        t0 = time.perf_counter()  # the first read ever: a view to build, connections to open
        with urllib.request.urlopen(
            f"{dashboard.url}{PREFIX.lstrip('/')}/jobs?limit=50", timeout=120
        ) as answer:
            answer.read()
        cold_ms = round((time.perf_counter() - t0) * 1000)
        first_job = next(e for e in build_view(result, holder.current).jobs if e.state == "pending")
        namespace, name = first_job.workload.split("/")[1:]
        urls = {page.split("?")[0]: dashboard.url + "#/" + page for page in PAGES}
        urls["job"] = f"{dashboard.url}#/job/{namespace}/{name}"
        pages: dict[str, Any] = {}
        for every in (None, POLL_S):  # no pass meanwhile; a new pass before every refresh
            passes = _passes(latest, result, every) if every else contextlib.nullcontext()
            with passes:
                for page, url in urls.items():
                    numbers = _page(binary, driver_path, folder, url, meter, args.updates)
                    key = "quiet" if every is None else "a_pass_every_5s"
                    pages.setdefault(page, {})[key] = numbers
        print(
            json.dumps(
                {
                    "jobs": args.jobs,
                    "pending": sum(1 for d in result.decisions if d.action == "Pending"),
                    "clusters": args.clusters,
                    "queues": args.queues,
                    "records_cpu_seconds_per_pass": round(records_cpu, 3),
                    "view_build_cpu_seconds_per_pass": round(view_cpu, 3),
                    "first_read_after_start_ms": cold_ms,
                    "visibility": served,
                    "pages": pages,
                },
                indent=2,
            )
        )
    return 0


def _serve_visibility(
    stack: contextlib.ExitStack,
    sandbox: Sandbox,
    api: kubernetes.client.ApiClient,
    reconciler: Reconciler,
    folder: Path,
    meter: CpuMeter,
) -> tuple[str, Any]:
    config = read_request_header(api)
    assert config is not None
    served = tls.generate()
    cert, key = folder / "tls.crt", folder / "tls.key"
    cert.write_bytes(served.cert_pem + served.ca_pem)
    key.write_bytes(served.key_pem)
    base = create_app(reconciler)
    app = visibility_app(base, config)
    meter.attach(app)
    server = WebhookServer(app, "127.0.0.1", 0, tls=(cert, key), client_ca=config.client_ca)
    server.start()
    stack.callback(server.stop)
    registration = next(
        d
        for d in yaml.safe_load_all((REPO / "deploy/karmada-apiserver/visibility.yaml").read_text())
        if d and d["kind"] == "APIService"
    )
    registration["spec"]["caBundle"] = base64.b64encode(served.ca_pem).decode()
    kubernetes.client.CustomObjectsApi(api).create_cluster_custom_object(
        "apiregistration.k8s.io", "v1", "apiservices", registration
    )
    service = registration["spec"]["service"]
    host, port = server.address
    sandbox.service_urls[(service["namespace"], service["name"], int(service["port"]))] = (
        f"https://{host}:{port}"
    )
    return f"https://{host}:{port}{PREFIX}", base.config["fleetgate.latest"]


@contextlib.contextmanager
def _passes(latest: Any, result: Any, every: float) -> Any:
    """A new pass (the same decisions, a new view) every ``every`` seconds: the worst case for
    an open dashboard, whose every refresh then finds a new view to build."""
    stop = threading.Event()

    def run() -> None:
        while not stop.wait(every):
            latest.observe(result, None)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def _page(
    binary: str, driver_path: str, folder: Path, url: str, meter: CpuMeter, updates: int
) -> dict[str, Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = Path(tempfile.mkdtemp(dir=folder))
    driver = webdriver.Chrome(
        options=chrome_options(binary, profile, "--window-size=1400,1000"),
        service=Service(driver_path),
    )
    try:
        meter.settle()
        meter.take()
        driver.get(url)
        _until(driver, "return performance.getEntriesByName('fleetgate:drawn').length > 0", 120)
        paint = driver.execute_script(
            "return performance.getEntriesByName('fleetgate:drawn')[0].startTime"
        )
        full = driver.execute_script(
            "return performance.getEntriesByType('resource').filter(r => r.initiatorType === "
            "'fetch' && !r.name.includes('config.json')).map(r => r.transferSize)"
        )
        meter.settle()
        first = meter.take()
        driver.execute_script("performance.clearResourceTimings()")
        _until(
            driver,
            f"return performance.getEntriesByName('fleetgate:updated').length >= {updates}",
            (updates + 2) * POLL_S * 4,
        )
        moved = driver.execute_script(
            "return performance.getEntriesByType('resource')"
            ".filter(r => r.initiatorType === 'fetch').map(r => r.transferSize)"
        )
        meter.settle()
        spent = meter.take()
        rows = driver.execute_script("return document.querySelectorAll('tbody tr').length")
        per_update = sum(spent.values()) / max(updates, 1)
        return {
            "first_paint_ms": round(paint),
            "first_paint_api_cpu_s": round(sum(first.values()), 3),
            "full_update_bytes": sum(full),  # what an update moves when the data changed
            "update_bytes": round(sum(moved) / max(updates, 1)),
            "largest_response_bytes": max(moved, default=0),
            "api_cpu_per_update_s": round(max(per_update, 0.0), 4),
            "api_cpu_share_of_a_core": round(max(per_update, 0.0) / POLL_S, 4),
            "rows_drawn": rows,
        }
    finally:
        driver.quit()


def _until(driver: Any, script: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not driver.execute_script(script):
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out after {timeout:g} s waiting for: {script}")
        time.sleep(0.05)


if __name__ == "__main__":
    sys.exit(main())
