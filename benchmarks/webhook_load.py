"""Load-test the mutate endpoint: the real server in one process, open-loop load from this one.

    .venv/bin/python benchmarks/webhook_load.py [--rate 500] [--duration 10] [--tls]
        [--threads 16] [--connections 8] [--step 100] [--step-duration 5] [--p99-ms 5]

Starts ``python -m webhook`` (cheroot, the example policies) on 127.0.0.1, warms it up, then
sends ResourceBinding AdmissionReviews (CREATE of the example bindings, each with its own uid)
at a fixed rate: request i is due at start + i/rate whatever happened to earlier ones (open
loop), and its latency counts from that due time, so a server that falls behind is charged for
the queueing it causes. After the ``--rate`` run it steps the rate up by ``--step`` until p99
exceeds ``--p99-ms`` or the achieved rate falls below 99 % of the target; the last step that met
both is the max sustainable rate. Prints one JSON document.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import queue
import re
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.webhook.helpers import created_binding, review  # noqa: E402

ENDPOINT = "/mutate/resourcebindings"
BINDINGS = ("tokenizer-stats-job", "llama-pretrain-pytorchjob", "bert-sweep-job")


def start_server(args: argparse.Namespace, workdir: Path) -> tuple[subprocess.Popen, int, Any]:
    command = [
        sys.executable,
        "-m",
        "webhook",
        "--policies",
        str(REPO / "policies"),
        "--host",
        "127.0.0.1",
        "--port",
        "0",
        "--threads",
        str(args.threads),
        "--log-level",
        "WARNING",
    ]
    context = None
    if args.tls:
        from tests.webhook.helpers import write_certificates

        cert, key, ca, _ = write_certificates(workdir / "tls")
        command += ["--tls-cert", str(cert), "--tls-key", str(key)]
        context = ssl.create_default_context(cafile=str(ca))
    else:
        command.append("--insecure-http")
    # INFO only for the one line that says where it listens
    command[command.index("WARNING")] = "INFO"
    process = subprocess.Popen(
        command, cwd=REPO, stderr=subprocess.PIPE, text=True, env={**os.environ}
    )
    assert process.stderr is not None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        line = process.stderr.readline()
        if found := re.search(r"serving https?://127\.0\.0\.1:(\d+)", line):
            threading.Thread(target=_drain, args=(process.stderr,), daemon=True).start()
            return process, int(found.group(1)), context
        if not line and process.poll() is not None:
            break
    process.kill()
    raise SystemExit("the webhook server did not start")


def _drain(stream: Any) -> None:
    for _ in stream:
        pass


def bodies(count: int = 600) -> list[bytes]:
    return [
        json.dumps(review(created_binding(BINDINGS[i % len(BINDINGS)]), uid=f"bench-{i}")).encode()
        for i in range(count)
    ]


def run(port: int, context: Any, rate: float, duration: float, connections: int) -> dict:
    """Send ``rate`` × ``duration`` requests open-loop; latency from each request's due time."""
    payloads = bodies()
    total = int(rate * duration)
    work: queue.SimpleQueue[tuple[int, float] | None] = queue.SimpleQueue()
    records: list[tuple[float, float, int]] = []  # (due, done, status)
    lock = threading.Lock()

    def worker() -> None:
        if context is None:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        else:
            conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=10, context=context)
        headers = {"Content-Type": "application/json"}
        mine = []
        while (item := work.get()) is not None:
            index, due = item
            try:
                conn.request("POST", ENDPOINT, payloads[index % len(payloads)], headers)
                reply = conn.getresponse()
                reply.read()
                status = reply.status
            except (OSError, http.client.HTTPException):
                status = 0
                conn.close()
            mine.append((due, time.perf_counter(), status))
        conn.close()
        with lock:
            records.extend(mine)

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(connections)]
    for thread in threads:
        thread.start()
    time.sleep(0.2)
    start = time.perf_counter() + 0.05
    for i in range(total):
        due = start + i / rate
        delay = due - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        work.put((i, due))
    for _ in threads:
        work.put(None)
    for thread in threads:
        thread.join(timeout=60)
    latencies = sorted((done - due) * 1000 for due, done, _ in records)
    finished = max(done for _, done, _ in records)
    errors = sum(1 for *_, status in records if status != 200)
    return {
        "target_rps": rate,
        "duration_s": duration,
        "requests": len(records),
        "errors": errors,
        "achieved_rps": round(len(records) / (finished - start), 1),
        "p50_ms": round(statistics.median(latencies), 3),
        "p90_ms": round(_percentile(latencies, 0.90), 3),
        "p99_ms": round(_percentile(latencies, 0.99), 3),
        "max_ms": round(latencies[-1], 3),
    }


def server_histogram(port: int, context: Any) -> dict[str, float]:
    """Share of all requests the server itself answered within each bucket (all runs).

    The server's own time, from request parsed to response ready; the client-side latencies
    above add the network stack, queueing for a worker thread and CPU contention.
    """
    if context is None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    else:
        conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=10, context=context)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    conn.close()
    pattern = (
        r'^fleetgate_webhook_request_duration_seconds_bucket\{endpoint="'
        + re.escape(ENDPOINT)
        + r'",le="([^"]+)"\} (\S+)$'
    )
    buckets = {le: float(count) for le, count in re.findall(pattern, text, re.M)}
    total = buckets.get("+Inf") or 1.0
    return {f"le_{le}s": round(count / total, 5) for le, count in buckets.items() if le != "+Inf"}


def _percentile(ordered: list[float], q: float) -> float:
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=500, help="requests/s of the main run")
    parser.add_argument("--duration", type=float, default=10, help="seconds of the main run")
    parser.add_argument("--tls", action="store_true", help="serve HTTPS (a generated cert)")
    parser.add_argument("--threads", type=int, default=16, help="server worker threads")
    parser.add_argument("--connections", type=int, default=8, help="client keep-alive conns")
    parser.add_argument("--step", type=float, default=100, help="rate increase per step")
    parser.add_argument("--step-duration", type=float, default=5, help="seconds per step")
    parser.add_argument("--p99-ms", type=float, default=5.0, help="p99 bound for 'sustainable'")
    parser.add_argument("--max-rate", type=float, default=5000, help="stop stepping here")
    args = parser.parse_args()

    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as workdir:
        process, port, context = start_server(args, Path(workdir))
        try:
            run(port, context, 200, 2, args.connections)  # warm-up, not reported
            main_run = run(port, context, args.rate, args.duration, args.connections)
            steps = []
            sustainable = None
            rate = args.rate
            while rate <= args.max_rate:
                step = run(port, context, rate, args.step_duration, args.connections)
                steps.append(step)
                ok = (
                    step["p99_ms"] <= args.p99_ms
                    and step["errors"] == 0
                    and step["achieved_rps"] >= 0.99 * rate
                )
                if not ok:
                    break
                sustainable = rate
                rate += args.step
            server_side = server_histogram(port, context)
        finally:
            process.terminate()
            process.wait(timeout=15)
    print(
        json.dumps(
            {
                "endpoint": ENDPOINT,
                "server": {"tls": args.tls, "threads": args.threads, "cpus": os.cpu_count()},
                "loadavg_1m": {"before": load_before, "after": os.getloadavg()[0]},
                "client": {"connections": args.connections, "open_loop": True},
                "run": main_run,
                "steps": steps,
                "max_sustainable_rps": sustainable,
                "server_side": server_side,
                "p99_bound_ms": args.p99_ms,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
