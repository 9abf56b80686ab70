"""``benchmarks/soak.py`` (``make soak``) runs end to end: a 5-second soak, fewer clients.

The soak itself is not in CI (it runs for a minute); this checks that the script starts the
webhook, drives every kind of traffic, stops everything and prints its summary. It counts and
never times (``--latency-limit 0``): every good request answered 200, no 5xx, bounded RSS; the
1 s latency limit is ``make soak``'s, on a machine left to it.
"""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import REPO

KEYS = (
    "duration_s",
    "requests",
    "good_latency_ms",
    "garbage_by_kind_status",
    "server_errors_5xx",
    "slow_clients",
    "policy_reloads",
    "rss_mb",
    "failures",
    "ok",
)


def test_a_short_soak_passes_and_prints_its_summary() -> None:
    command = [sys.executable, "benchmarks/soak.py", "--seconds", "5", "--clients", "1"]
    command += ["--slow", "3", "--idle", "3", "--threads", "4", "--rewrite-every", "0.5"]
    command += ["--latency-limit", "0"]
    done = subprocess.run(
        [*command, "--json"], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    summary = json.loads(done.stdout)
    assert set(KEYS) <= set(summary)
    assert summary["ok"] is True and summary["failures"] == []
    assert summary["good_failures"] == {}  # every good request answered 200
    assert summary["server_errors_5xx"] == 0
    good = summary["requests"]["good"]
    assert good["mutate"] > 0 and good["validate"] > 0 and good["cel-heavy"] > 0
    assert summary["requests"]["garbage"] > 0
    assert summary["policy_rewrites"]["invalid"] >= 1
    assert summary["policy_reloads"]["failed"] >= 1
    assert summary["slow_clients"]["slow opened"] >= 3
