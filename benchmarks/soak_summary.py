"""The soak's summary (``benchmarks/soak.py``): latencies, answers by kind, slow clients, policy
reloads and RSS growth, with the reasons the soak fails; and its rendering as aligned text."""

from __future__ import annotations

import argparse
import collections
import statistics
from typing import Any

from benchmarks.soak_traffic import Run

GOOD_LIMIT_S = 1.0
# A leak shows as growth proportional to the requests served; allocator arenas, the buffered
# 4 MiB bodies and policy-set rebuilds give a one-off step of a few tens of MB. Both must be
# exceeded to fail: +50 % alone is noise on a ~60 MB process, +50 MB alone on a large one.
RSS_GROWTH_RATIO, RSS_GROWTH_MB = 0.5, 50.0


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 1)


def summarize(
    args: argparse.Namespace, run: Run, observed: dict[str, Any], ready: int, tracebacks: int
) -> dict[str, Any]:
    """The summary, with ``failures``: why the soak fails (empty: it passes)."""
    duration, rss = observed["duration"], observed["rss"]
    before, after = observed["before"], observed["after"]
    good: dict[str, Any] = {}
    everything: list[float] = []
    for name, times in sorted(run.good.items()):
        ordered = sorted(times)
        everything += ordered
        good[name] = _latency(ordered)
    everything.sort()
    garbage_by_status: dict[str, int] = collections.Counter()
    for (kind, status), count in run.garbage.items():
        garbage_by_status[f"{kind} {status}"] += count
    server_errors = sum(c for (_, s), c in run.garbage.items() if s.startswith("5")) + sum(
        c for k, c in run.good_failures.items() if k.split()[-1].startswith("5")
    )
    rss_start, rss_end = rss[0], rss[-1]
    growth = rss_end - rss_start
    reloads, failed = (
        int(after.get(name, 0) - before.get(name, 0))
        for name in ("fleetgate_policy_reloads_total", "fleetgate_policy_reload_failures_total")
    )
    healthy = after.get("fleetgate_policy_healthy") == 1
    limit = args.latency_limit
    slow_over = [t for t in everything if limit and t > limit]
    failures = []
    if slow_over:
        failures.append(f"{len(slow_over)} good request(s) took longer than {limit:g} s")
    if run.good_failures:
        failures.append(f"{sum(run.good_failures.values())} good request(s) not answered 200")
    if server_errors:
        failures.append(f"{server_errors} answer(s) were 5xx")
    if growth > RSS_GROWTH_MB and growth > RSS_GROWTH_RATIO * rss_start:
        failures.append(f"RSS grew by {growth:.1f} MB ({growth / rss_start:.0%})")
    if ready != 200:
        failures.append(f"/readyz answered {ready} at the end")
    if not healthy:
        failures.append("the last policy reload failed (the original file was written back)")
    return {
        "duration_s": round(duration, 1),
        "setup": {
            "clients": args.clients,
            "server_threads": args.threads,
            "slowloris": args.slow,
            "idle_tls": args.idle,
            "rewrite_every_s": args.rewrite_every,
            "latency_limit_s": limit or None,
        },
        "requests": {
            "good": {name: len(times) for name, times in sorted(run.good.items())},
            "garbage": sum(run.garbage.values()),
            "total": len(everything) + sum(run.garbage.values()),
        },
        "good_latency_ms": {"all": _latency(everything), **good},
        "good_failures": dict(sorted(run.good_failures.items())),
        "garbage_by_kind_status": dict(sorted(garbage_by_status.items())),
        "garbage_max_ms": _ms(run.garbage_max_s),
        "server_errors_5xx": server_errors,
        "slow_clients": dict(sorted(run.slow.items())),
        "policy_rewrites": dict(sorted(run.rewrites.items())),
        "policy_reloads": {"succeeded": reloads, "failed": failed, "healthy_at_end": healthy},
        "rss_mb": {
            "start": round(rss_start, 1),
            "end": round(rss_end, 1),
            "max": round(max(rss), 1),
            "growth": round(growth, 1),
            "limit": f"> {RSS_GROWTH_RATIO:.0%} and > {RSS_GROWTH_MB:g} MB",
        },
        "tracebacks_logged": tracebacks,
        "ready_at_end": ready == 200,
        "failures": failures,
        "ok": not failures,
    }


def _latency(ordered: list[float]) -> dict[str, float]:
    if not ordered:
        return {"n": 0}
    return {
        "n": len(ordered),
        "p50": _ms(statistics.median(ordered)),
        "p99": _ms(ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]),
        "max": _ms(ordered[-1]),
    }


def render(summary: dict[str, Any]) -> str:
    """The summary as aligned text: one ``section  key  value`` row per leaf."""
    rows: list[tuple[str, str]] = []

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, dict) and value and not _is_latency(value):
            for key, inner in value.items():
                walk(f"{prefix}{key}" if not prefix else f"{prefix}.{key}", inner)
        elif isinstance(value, dict) and _is_latency(value):
            text = "  ".join(f"{k} {v}" for k, v in value.items())
            rows.append((prefix, text))
        elif isinstance(value, list):
            rows.append((prefix, "; ".join(value) if value else "none"))
        else:
            rows.append((prefix, "{}" if value == {} else str(value)))

    walk("", summary)
    width = max(len(key) for key, _ in rows)
    return "\n".join(f"{key.ljust(width)}  {value}" for key, value in rows)


def _is_latency(value: dict) -> bool:
    return "n" in value
