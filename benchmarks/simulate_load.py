"""Replay a large generated trace with `fleetgate simulate`'s loop and print what it costs.

    python benchmarks/simulate_load.py                      # 100,000 jobs, 10 clusters, 1,040 GPUs
    python benchmarks/simulate_load.py --jobs 10000 --profile 25

The fleet: 10 GPU clusters of 13 nodes × 8 GPUs (half H100, half A100). The policies: three
tenants with two leaf queues each (weights 1–3, GPU guarantees), fair sharing on GPUs, the
default requeue rules. The trace: ``simulate.generate`` with Poisson arrivals over ``--hours``
at ~90% offered load. Prints the trace read time, the replay's wall time, jobs/s, cycles, peak
RSS and, with ``--profile N``, cProfile's top N entries by cumulative time.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import resource
import sys
import tempfile
import time
from fractions import Fraction
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.fleet.frozen import FrozenDict
from engine.members import ClusterSpec, FleetSpec, NodeGroup
from engine.policy.policyset import load_policy_set
from simulate.generate import generate, write_csv
from simulate.loop import Options, Simulation
from simulate.trace import read_trace

GI = 2**30
KINDS = (("kubeflow.org/v1", "PyTorchJob"), ("kubeflow.org/v2beta1", "MPIJob"))
QUEUES = (  # (queue, tenant, weight, GPU guarantee)
    ("vision-train", "vision", 2, 160),
    ("vision-dev", "vision", 1, 40),
    ("nlp-train", "nlp", 3, 240),
    ("nlp-dev", "nlp", 1, 40),
    ("speech-train", "speech", 1, 80),
    ("speech-dev", "speech", 1, 20),
)
SCHEDULING = """\
apiVersion: fleetgate.io/v1alpha1
kind: SchedulingPolicy
metadata: {name: bench}
spec:
  queue: '"fleetgate.io/queue" in job.labels ? job.labels["fleetgate.io/queue"] : "default"'
  tenant: job.namespace
  priority: job.priority
  fairSharing: {enabled: true, resources: [nvidia.com/gpu]}
  placement: {strategy: BinPack}
"""


def fleet(clusters: int = 10, nodes: int = 13) -> FleetSpec:
    specs = []
    for i in range(clusters):
        model = "h100" if i % 2 == 0 else "a100"
        shape = {"cpu": 190, "memory": 1900 * GI, "nvidia.com/gpu": 8}
        specs.append(
            ClusterSpec(
                name=f"gpu-{i:02d}",
                labels=FrozenDict({"gpu.fleetgate.io/model": model}),
                kinds=KINDS,
                nodes=(NodeGroup.of(nodes, {k: Fraction(v) for k, v in shape.items()}),),
            )
        )
    return FleetSpec(tuple(specs))


def policies(folder: Path) -> None:
    docs = [SCHEDULING]
    for queue, _tenant, weight, gpus in QUEUES:
        docs.append(
            "apiVersion: fleetgate.io/v1alpha1\nkind: Queue\n"
            f"metadata: {{name: {queue}}}\n"
            f"spec: {{weight: {weight}, guarantee: {{nvidia.com/gpu: {gpus}}}}}\n"
        )
    docs.append("apiVersion: fleetgate.io/v1alpha1\nkind: Queue\nmetadata: {name: default}\n"
                "spec: {weight: 1}\n")  # fmt: skip
    (folder / "policies.yaml").write_text("---\n".join(docs), encoding="utf-8")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--clusters", type=int, default=10)
    parser.add_argument("--nodes", type=int, default=13, help="8-GPU nodes per cluster")
    parser.add_argument("--hours", type=float, default=0.0, help="trace span (default: jobs/600)")
    parser.add_argument("--interval", type=float, default=120.0, help="least s between cycles")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--profile", type=int, default=0, metavar="N", help="top N entries")
    args = parser.parse_args()
    spec = fleet(args.clusters, args.nodes)
    gpus = args.clusters * args.nodes * 8
    hours = args.hours or args.jobs / 600
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        policies(folder)
        policy_set = load_policy_set([folder])
        rows = generate(
            args.jobs,
            [(q, t) for q, t, _, _ in QUEUES],
            gpus=gpus,
            hours=hours,
            seed=args.seed,
        )
        write_csv(folder / "trace.csv", rows)
        started = time.perf_counter()
        trace = read_trace(folder / "trace.csv")
        read_s = time.perf_counter() - started
    simulation = Simulation(
        policy_set, spec, trace, Options(interval=args.interval, seed=args.seed)
    )
    profiler = cProfile.Profile() if args.profile else None
    started = time.perf_counter()
    if profiler is not None:
        profiler.enable()
    result = simulation.run()
    if profiler is not None:
        profiler.disable()
    wall = time.perf_counter() - started
    jobs = result.summary["jobs"]
    out = {
        "jobs": args.jobs,
        "clusters": args.clusters,
        "gpus": gpus,
        "trace_hours": hours,
        "interval_s": args.interval,
        "trace_read_s": round(read_s, 2),
        "replay_wall_s": round(wall, 2),
        "jobs_per_s": round(args.jobs / wall),
        "cycles": result.summary["cycles"],
        "ms_per_cycle": round(1000 * wall / max(result.summary["cycles"], 1), 2),
        "succeeded": jobs["succeeded"],  # type: ignore[index]
        "pending_at_end": jobs["pending"],  # type: ignore[index]
        "peak_pending": jobs["peak_pending"],  # type: ignore[index]
        "wait_p50_s": jobs["wait_s"]["p50"],  # type: ignore[index]
        "wait_p95_s": jobs["wait_s"]["p95"],  # type: ignore[index]
        "preemptions": jobs["preemptions"],  # type: ignore[index]
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "profiled": bool(profiler),
    }
    print(json.dumps(out, indent=2))
    if profiler is not None:
        text = io.StringIO()
        pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(args.profile)
        print(text.getvalue())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
