"""Soak the webhook: good traffic timed while hostile clients and policy rewrites run beside it.

    .venv/bin/python benchmarks/soak.py [--seconds 60] [--clients 3] [--slow 8] [--idle 8]
        [--threads 8] [--rewrite-every 3] [--latency-limit 1] [--json]

Starts ``fleetgate webhook`` over TLS on 127.0.0.1 (a free port, a generated CA and serving
certificate, a private copy of policies/ plus a CEL-heavy AdmissionPolicy that allows), warms it
up, then for ``--seconds`` runs at once, all against that one process:

- good traffic: ``--clients`` keep-alive clients POST realistic AdmissionReviews to
  /mutate/resourcebindings and /validate/workloads, one CEL-heavy client POSTs jobs with many
  containers, env vars, labels and annotations, and /healthz is probed every second; each is
  timed and must be a 200 (an allowed or denied answer) within ``--latency-limit`` (default
  ``GOOD_LIMIT_S``, 1 s);
- garbage: malformed JSON, wrong kinds, huge quantities, deep nesting, oversized bodies, wrong
  methods; each must be a 4xx (or a 200 denial) and never a 5xx;
- slow clients: ``--slow`` slowloris connections (one byte a second) and ``--idle`` TCP
  connections that never start the TLS handshake, replaced whenever the server drops one;
- policy rewrites: every ``--rewrite-every`` seconds, once the webhook has read the last one,
  admission.yaml becomes an invalid variant, then a valid one, then the original again;
- the webhook's RSS (VmRSS) sampled every second.

Prints a summary (``--json``: one JSON document) and exits 1 if a good request took longer than
``--latency-limit`` or failed, any answer was a 5xx, or the RSS grew by more than both
``RSS_GROWTH_RATIO`` and ``RSS_GROWTH_MB`` from after the warm-up to the end. Not in CI:
``make soak`` (``SOAK_SECONDS``, default 60).

This file is the entry point and the run; beside it, ``soak_requests`` builds the request bodies,
``soak_traffic`` drives the traffic, ``soak_server`` starts the webhook and ``soak_summary``
judges and renders the result.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.soak_requests import MUTATE, VALIDATE, garbage, good_bodies, heavy_body  # noqa: E402
from benchmarks.soak_server import webhook  # noqa: E402
from benchmarks.soak_summary import GOOD_LIMIT_S, render, summarize  # noqa: E402
from benchmarks.soak_traffic import (  # noqa: E402
    CLIENT_TIMEOUT_S,
    MAX_SLOW,
    Connection,
    Run,
    garbage_client,
    good_client,
    metric_values,
    rewriter,
    rss_mb,
    slow_clients,
)
from engine.policy.policyset import load_policy_set  # noqa: E402


def soak(args: argparse.Namespace) -> dict[str, Any]:
    with (
        tempfile.TemporaryDirectory(prefix="fleetgate-soak-") as tmp,
        webhook(Path(tmp), args.threads) as (process, port, context, policy_dir, log),
    ):
        run = Run(port, context)
        probe = Connection(run)
        status, text = probe.call("GET", "/readyz", b"")
        if status != 200:
            raise SystemExit(f"the webhook is not ready ({status}): {text.decode()[:2000]}")
        bodies, heavy = good_bodies(), [(VALIDATE, heavy_body())]
        for path, body in bodies + heavy * 5:  # warm-up: every code path once, not reported
            probe.call("POST", path, body)
        for _ in range(3):
            for _kind, method, path, body in garbage():
                probe.call(method, path, body)
        before = metric_values(probe)
        rss = [rss_mb(process.pid)]

        def good_kind(path: str) -> str:
            return "mutate" if path == MUTATE else "validate"

        jobs: list[tuple[Callable[..., None], tuple]] = [
            *[(good_client, (run, bodies, good_kind))] * args.clients,
            (good_client, (run, heavy, lambda _: "cel-heavy", 0.05)),
            (garbage_client, (run, 0.02)),
            (slow_clients, (run, args.slow, args.idle)),
            (rewriter, (run, policy_dir, args.rewrite_every)),
        ]
        threads = [threading.Thread(target=target, args=a) for target, a in jobs]
        started = time.monotonic()
        for thread in threads:
            thread.start()
        health: list[float] = []
        while time.monotonic() - started < args.seconds:
            time.sleep(1.0)
            rss.append(rss_mb(process.pid))
            t0 = time.perf_counter()
            status, _ = probe.call("GET", "/healthz", b"")
            health.append(time.perf_counter() - t0)
            if status != 200:
                run.good_failures[f"healthz {status}"] += 1
        run.stop.set()
        duration = time.monotonic() - started
        for thread in threads:
            thread.join(timeout=CLIENT_TIMEOUT_S + 5)
        live(probe, load_policy_set([policy_dir]).version)  # the original policy file reloads
        rss.append(rss_mb(process.pid))
        after = metric_values(probe)
        ready, _ = probe.call("GET", "/readyz", b"")
        probe.close()
        tracebacks = sum(1 for line in log if "Traceback" in line)
    run.good["healthz"] = health
    observed = {"duration": duration, "rss": rss, "before": before, "after": after}
    return summarize(args, run, observed, ready, tracebacks)


def live(probe: Connection, version: str, patience: float = 60.0) -> bool:
    """Until /metrics says ``version`` is live and the files load (the rewriter wrote the
    original back); False if not within ``patience`` seconds (the summary then says why)."""
    deadline = time.monotonic() + patience
    wanted = f'fleetgate_policy_version_info{{version="{version}"}} 1.0'
    while time.monotonic() < deadline:
        status, data = probe.call("GET", "/metrics", b"")
        lines = data.decode(errors="replace").splitlines() if status == 200 else []
        if wanted in lines and "fleetgate_policy_healthy 1.0" in lines:
            return True
        time.sleep(0.1)
    return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60, help="length of the soak (60)")
    parser.add_argument("--clients", type=int, default=3, help="good keep-alive clients (3)")
    parser.add_argument(
        "--slow", type=int, default=8, help=f"slowloris connections (8, ≤{MAX_SLOW})"
    )
    parser.add_argument(
        "--idle", type=int, default=8, help=f"idle TLS connections (8, ≤{MAX_SLOW})"
    )
    parser.add_argument("--threads", type=int, default=8, help="server worker threads (8)")
    parser.add_argument("--rewrite-every", type=float, default=3, help="seconds between rewrites")
    parser.add_argument(
        "--latency-limit",
        type=float,
        default=GOOD_LIMIT_S,
        help=f"seconds a good request may take ({GOOD_LIMIT_S:g}; 0: no limit, as in the test "
        "suite, which counts and never times)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    args = parser.parse_args(argv)
    summary = soak(args)
    print(json.dumps(summary, indent=2) if args.json else render(summary))
    return 0 if summary["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
