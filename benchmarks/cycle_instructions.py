"""Count the instructions of one warm scheduling cycle on the synthetic fleet of the bench.

    .venv/bin/python benchmarks/cycle_instructions.py --jobs N --clusters M --queues Q [--seed S]

Wall-clock time on this project's machines moves by up to 1.6x from one run to the next with
the load on their host, which hides changes of a few percent. The number of instructions a
cycle executes does not move: this command runs itself under valgrind's callgrind tool with
counting off, builds the fleet and runs the cold cycle, then switches counting on
(``callgrind_control``) for exactly one warm cycle and exits without tearing down. Python's
hash seed is fixed, so a repeat gives the same count to within ~0.01%. It prints JSON:
``jobs``, ``clusters``, ``queues``, ``seed``, ``admitted``, ``warm_cycle_instructions`` and
``wall_seconds`` (the whole run; valgrind makes it ~50x slower than the cycle: about 2.5 minutes
at 50,000 jobs). Needs valgrind (Debian package ``valgrind``).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WAIT_SECONDS = 3600  # for each step of the child (fleet and cold cycle, then the warm cycle)
COLLECTED = re.compile(r"Collected : (\d+)")


def child(args: argparse.Namespace, ready: Path, go: Path, result: Path) -> None:
    """Under callgrind: build the fleet, run the cold cycle, say so, wait for counting to be
    switched on, run one warm cycle, write what it admitted and leave at once."""
    from engine.bench.runner import NOW, load_documents
    from engine.bench.synthetic import synthetic_fleet
    from engine.cycle import Action, Cycle, JobCache

    fleet = synthetic_fleet(
        jobs=args.jobs, clusters=args.clusters, queues=args.queues, seed=args.seed, now=NOW
    )
    policies = load_documents(fleet.policy_documents)
    cache = JobCache()
    Cycle(fleet.snapshot, policies, NOW, cache).run()
    gc.collect()
    gc.freeze()  # as fleetgate bench: long-lived state out of the collector's view
    gc.disable()
    ready.touch()
    deadline = time.monotonic() + WAIT_SECONDS
    while not go.exists():
        if time.monotonic() > deadline:
            os._exit(3)
        time.sleep(0.05)
    decisions = Cycle(fleet.snapshot, policies, NOW, cache).run().decisions
    admitted = sum(1 for d in decisions if d.action == Action.ADMIT)
    result.write_text(str(admitted), encoding="utf-8")
    os._exit(0)  # the cycle's teardown is not part of it: nothing more is counted


def measure(args: argparse.Namespace) -> dict[str, object]:
    for tool in ("valgrind", "callgrind_control"):
        if shutil.which(tool) is None:
            raise SystemExit(f"cycle_instructions: {tool} not found (install valgrind)")
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="fleetgate-instructions-") as folder:
        tmp = Path(folder)
        ready, go, result, log = tmp / "ready", tmp / "go", tmp / "admitted", tmp / "valgrind.log"
        command = [
            "valgrind",
            "--tool=callgrind",
            "--instr-atstart=no",
            f"--callgrind-out-file={tmp / 'callgrind.out'}",
            f"--log-file={log}",
            sys.executable,
            str(Path(__file__).resolve()),
            *("--jobs", str(args.jobs), "--clusters", str(args.clusters)),
            *("--queues", str(args.queues), "--seed", str(args.seed)),
            *("--child", str(tmp)),
        ]
        env = {**os.environ, "PYTHONHASHSEED": "0"}
        process = subprocess.Popen(command, env=env)
        try:
            deadline = time.monotonic() + WAIT_SECONDS
            while not ready.exists():
                if process.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"cycle_instructions: the child stopped early; see {log}")
                time.sleep(0.2)
            switched = subprocess.run(
                ["callgrind_control", "--instr=on", str(process.pid)],
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
            if switched.returncode != 0 or "not detected" in switched.stdout:
                raise SystemExit(f"cycle_instructions: callgrind_control: {switched.stdout}")
            go.touch()
            code = process.wait(timeout=WAIT_SECONDS)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        text = log.read_text(encoding="utf-8", errors="replace")
        found = COLLECTED.search(text)
        if code != 0 or found is None or not result.exists():
            raise SystemExit(f"cycle_instructions: no count (exit {code}):\n{text[-2000:]}")
        admitted = int(result.read_text(encoding="utf-8"))
    return {
        "jobs": args.jobs,
        "clusters": args.clusters,
        "queues": args.queues,
        "seed": args.seed,
        "admitted": admitted,
        "warm_cycle_instructions": int(found.group(1)),
        "wall_seconds": round(time.perf_counter() - started, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=15000)
    parser.add_argument("--clusters", type=int, default=10)
    parser.add_argument("--queues", type=int, default=30)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--child", metavar="DIR", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        tmp = Path(args.child)
        child(args, tmp / "ready", tmp / "go", tmp / "admitted")
        return
    print(json.dumps(measure(args)))


if __name__ == "__main__":
    main()
