"""A seeded synthetic trace in fleetgate's CSV format (docs/simulator.md).

    python -m simulate.generate --jobs 300 --gpus 64 --hours 24 --seed 1 \\
        --queue research-training:research --queue research-experiments:research \\
        --queue prod-inference:prod-inference --out examples/traces/small.csv

Jobs arrive as a Poisson process over ``hours``; a job's GPU count is drawn from the profile's
mix, its run time from a log-normal whose median is set so the offered load is about ``load`` ×
the fleet's GPU-hours. Queues are drawn uniformly (each ``--queue QUEUE:TENANT``); a fifth of
the jobs carry a higher priority. Profiles (``--profile``):

* ``philly`` (default): a Philly-like mix (half single-GPU jobs, a few 16–32 GPU gangs); a job
  is a ``gpus`` count, shaped into pods by ``fleetgate simulate --gpus-per-pod``/``--per-gpu``;
* ``whole-node``: a production mix where whole-node pods carry most GPU-hours: 8-GPU pods
  alone and gangs of 2 or 4 of them, 1–4 GPU single pods, and CPU-only ``Job``s (14% of the
  jobs; a fifth ask 8 GPUs or more). Every GPU pod asks 12 cores and 96Gi per GPU (an 8-GPU
  pod: 96 cores, 768Gi, a whole node of issue 27's fleet); pods are written out
  (``replicas``, ``pod_*`` columns), so ``--per-gpu`` does not change them. About 65% of the
  GPU-hours offered are whole-node pods (``whole_node_share`` measures it);
* ``production``: modelled on a public production GPU trace (tens of thousands of jobs over two
  months at 89% offered load), pods shaped as ``whole-node``'s. 83% 1-GPU jobs, 2% 2-GPU,
  3.4% 4-GPU, 10% 8-GPU, 1.2% gangs of 2–8 whole-node pods (16–64 GPUs), 0.4% CPU-only; run
  times log-normal with a median of 3 h (sigma 1.8) clipped to 10 min – 14 days, whatever the
  load; ten queues (``team-01`` … ``team-10``, one tenant each, or the ``--queue`` given)
  drawn with weights from 60 down to 1 (geometric), two of which (``team-04``, ``team-07``)
  submit only in the second half. There is no ``--jobs``: jobs are drawn until the GPU-seconds
  asked reach ``load`` × ``gpus`` × ``hours`` (default load 0.89), then arrive uniformly at
  random over ``hours`` (a Poisson process given their number). See
  :func:`generate_production`.
"""

from __future__ import annotations

import argparse
import csv
import math
import random
from collections.abc import Sequence
from pathlib import Path

GPU_MIX = ((1, 0.50), (2, 0.15), (4, 0.15), (8, 0.14), (16, 0.04), (32, 0.02))
WHOLE_NODE_MIX = ((0, 0.14), (1, 0.34), (2, 0.16), (4, 0.16), (8, 0.14), (16, 0.04), (32, 0.02))
"""GPUs per job of the ``whole-node`` profile (0: a CPU-only job), with their weights."""
PROFILES = {"philly": GPU_MIX, "whole-node": WHOLE_NODE_MIX}
PRODUCTION_MIX = (
    (0, 0.004), (1, 0.83), (2, 0.02), (4, 0.034), (8, 0.10),
    (16, 0.006), (24, 0.0012), (32, 0.003), (48, 0.0006), (64, 0.0012),
)  # fmt: skip
"""GPUs per job of the ``production`` profile; 1.2% gangs of 2, 3, 4, 6 or 8 whole nodes."""
PRODUCTION_QUEUES = tuple((f"team-{i:02d}", f"team-{i:02d}") for i in range(1, 11))
PRODUCTION_SKEW = 60.0  # the largest queue's weight over the smallest's
PRODUCTION_LOAD = 0.89
RUN_MEDIAN_S = 3 * 3600.0  # of the production profile's run times
RUN_SIGMA = 1.8
RUN_MIN_S, RUN_MAX_S = 600.0, 14 * 86400.0
COLUMNS = ("name", "submit", "duration", "queue", "tenant", "kind", "gpus", "priority")
POD_COLUMNS = ("replicas", "pod_gpus", "pod_cpu", "pod_memory")
NODE_GPUS = 8  # GPUs of a whole node (the largest pod of the whole-node profile)
CPU_PER_GPU = 12  # cores
MEMORY_PER_GPU_GI = 96
CPU_ONLY_CORES = (4, 8, 16, 32)  # with 4Gi per core
SIGMA = 1.0  # of the log-normal run time


def generate(
    jobs: int,
    queues: Sequence[tuple[str, str]],
    *,
    gpus: float,
    hours: float,
    load: float = 0.9,
    seed: int = 1,
    max_gpus: int = 32,
    profile: str = "philly",
) -> list[dict[str, str]]:
    if profile not in PROFILES:
        raise ValueError(f"profile {profile!r}: expected one of {', '.join(PROFILES)}")
    rng = random.Random(seed)
    mix = [(g, w) for g, w in PROFILES[profile] if g <= max_gpus]
    mean_gpus = sum(g * w for g, w in mix) / sum(w for _, w in mix)
    span = hours * 3600
    # offered GPU-seconds = jobs × mean GPUs × mean run time = load × gpus × span
    mean_run = load * gpus * span / max(jobs * mean_gpus, 1)
    median = mean_run / math.exp(SIGMA**2 / 2)
    rows = []
    t = 0.0
    rate = jobs / span if span else 0.0
    for i in range(jobs):
        t += rng.expovariate(rate) if rate else 0.0
        size = rng.choices([g for g, _ in mix], [w for _, w in mix])[0]
        run = min(max(30.0, rng.lognormvariate(math.log(median), SIGMA)), 7 * 24 * 3600)
        queue, tenant = queues[rng.randrange(len(queues))]
        row = {
            "name": f"job-{i:06d}",
            "submit": f"{t:.1f}",
            "duration": f"{run:.0f}",
            "queue": queue,
            "tenant": tenant,
            "kind": "PyTorchJob" if size <= 8 else "MPIJob",
            "gpus": str(size),
            "priority": "100" if rng.random() < 0.2 else "0",
        }
        if profile == "whole-node":
            row = _with_pods(row, size, rng)
        rows.append(row)
    return rows


def queue_weights(count: int) -> list[float]:
    """Weights from :data:`PRODUCTION_SKEW` down to 1, geometric, for ``count`` ≥ 2 queues."""
    return [PRODUCTION_SKEW ** ((count - 1 - i) / (count - 1)) for i in range(count)]


def late_queues(count: int) -> tuple[int, int]:
    """The indices of the two queues that submit only in the second half (3 and 6 of 10)."""
    return count // 3, 2 * count // 3


def generate_production(
    queues: Sequence[tuple[str, str]] = PRODUCTION_QUEUES,
    *,
    gpus: float,
    hours: float,
    load: float = PRODUCTION_LOAD,
    seed: int = 1,
    max_gpus: int = 64,
) -> list[dict[str, str]]:
    """The ``production`` profile's rows (module docstring), sorted by submit time. ``queues``
    in order of volume, the largest first; at least 3."""
    if len(queues) < 3:
        raise ValueError(f"the production profile needs at least 3 queues, got {len(queues)}")
    mix = [(g, w) for g, w in PRODUCTION_MIX if g <= max_gpus]
    sizes, size_weights = [g for g, _ in mix], [w for _, w in mix]
    if not any(sizes):
        raise ValueError(f"--max-gpus {max_gpus}: the production mix has no GPU job left")
    rng = random.Random(seed)
    span = hours * 3600
    target = load * gpus * span
    drawn: list[tuple[int, float]] = []
    asked = 0.0
    while asked < target:
        size = rng.choices(sizes, size_weights)[0]
        run = rng.lognormvariate(math.log(RUN_MEDIAN_S), RUN_SIGMA)
        drawn.append((size, min(max(RUN_MIN_S, run), RUN_MAX_S)))
        asked += size * drawn[-1][1]
    if drawn and asked - target > target - (asked - drawn[-1][0] * drawn[-1][1]):
        drawn.pop()  # the load is closer without the job that crossed it
    times = sorted(rng.uniform(0, span) for _ in drawn)
    weights = queue_weights(len(queues))
    early = [0.0 if i in late_queues(len(queues)) else w for i, w in enumerate(weights)]
    rows = []
    for i, (t, (size, run)) in enumerate(zip(times, drawn, strict=True)):
        queue, tenant = rng.choices(queues, early if t < span / 2 else weights)[0]
        row = {
            "name": f"job-{i:06d}",
            "submit": f"{t:.1f}",
            "duration": f"{run:.0f}",
            "queue": queue,
            "tenant": tenant,
            "kind": "PyTorchJob" if size <= NODE_GPUS else "MPIJob",
            "gpus": str(size),
            "priority": "100" if rng.random() < 0.2 else "0",
        }
        rows.append(_with_pods(row, size, rng))
    return rows


def offered_load(rows: Sequence[dict[str, str]], gpus: float, hours: float) -> float:
    """GPU-seconds the rows ask / (``gpus`` × ``hours``); rows of any profile."""
    asked = 0.0
    for row in rows:
        size = (
            int(row["pod_gpus"]) * int(row["replicas"]) if "pod_gpus" in row else int(row["gpus"])
        )
        asked += size * float(row["duration"])
    return asked / (gpus * hours * 3600)


def _with_pods(row: dict[str, str], gpus: int, rng: random.Random) -> dict[str, str]:
    """The whole-node profile's pods in place of the ``gpus`` count: pods of at most a node's
    GPUs, 12 cores and 96Gi per GPU; no GPUs: one pod of a batch ``Job``."""
    out = {k: v for k, v in row.items() if k not in ("gpus", "priority")}
    if gpus == 0:
        cores = rng.choice(CPU_ONLY_CORES)
        pods = {"replicas": 1, "pod_gpus": 0, "pod_cpu": cores, "pod_memory": f"{4 * cores}Gi"}
        out["kind"] = "Job"
    else:
        per_pod = min(gpus, NODE_GPUS)
        pods = {
            "replicas": gpus // per_pod,
            "pod_gpus": per_pod,
            "pod_cpu": CPU_PER_GPU * per_pod,
            "pod_memory": f"{MEMORY_PER_GPU_GI * per_pod}Gi",
        }
    return {**out, **{k: str(v) for k, v in pods.items()}, "priority": row["priority"]}


def whole_node_share(rows: Sequence[dict[str, str]], node_gpus: int = NODE_GPUS) -> float:
    """The share of the GPU-hours asked that whole-node pods (``node_gpus`` GPUs each) ask;
    0 when no row asks for GPUs. Rows as :func:`generate` makes them (either profile)."""
    whole = total = 0.0
    for row in rows:
        if "pod_gpus" in row:
            per_pod, pods = int(row["pod_gpus"]), int(row["replicas"])
        else:
            pods = math.ceil(int(row["gpus"]) / node_gpus)
            per_pod = math.ceil(int(row["gpus"]) / pods) if pods else 0
        gpu_s = per_pod * pods * float(row["duration"])
        total += gpu_s
        whole += gpu_s if per_pod >= node_gpus else 0.0
    return whole / total if total else 0.0


def write_csv(path: Path, rows: Sequence[dict[str, str]], header: str = "") -> None:
    with path.open("w", newline="", encoding="utf-8") as out:
        if header:
            out.write("".join(f"# {line}\n" for line in header.splitlines()))
        writer = csv.DictWriter(out, fieldnames=list(rows[0]) if rows else list(COLUMNS))
        writer.writeheader()
        writer.writerows(rows)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, help="default 300; not with --profile production")
    parser.add_argument("--gpus", type=float, default=64, help="the fleet's GPUs (for the load)")
    parser.add_argument("--hours", type=float, default=24)
    parser.add_argument("--load", type=float, help="offered load; default 0.9 (production: 0.89)")
    parser.add_argument("--max-gpus", type=int, help="default 32 (production: 64)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--profile", choices=(*PROFILES, "production"), default="philly")
    parser.add_argument("--queue", action="append", default=[], metavar="QUEUE:TENANT")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    queues = [tuple(q.split(":", 1)) if ":" in q else (q, q) for q in args.queue]
    production = args.profile == "production"
    if production and args.jobs is not None:
        parser.error(
            "--profile production sizes its arrivals by --hours, --gpus and --load: no --jobs"
        )
    load = args.load if args.load is not None else PRODUCTION_LOAD if production else 0.9
    max_gpus = args.max_gpus if args.max_gpus is not None else 64 if production else 32
    jobs = 300 if args.jobs is None else args.jobs
    if production:
        rows = generate_production(
            queues or PRODUCTION_QUEUES,  # type: ignore[arg-type]
            gpus=args.gpus,
            hours=args.hours,
            load=load,
            seed=args.seed,
            max_gpus=max_gpus,
        )
    else:
        rows = generate(
            jobs,
            queues or [("default", "default")],  # type: ignore[arg-type]
            gpus=args.gpus,
            hours=args.hours,
            load=load,
            seed=args.seed,
            max_gpus=max_gpus,
            profile=args.profile,
        )
    words = [f"--queue {q}" for q in args.queue] + ([] if production else [f"--jobs {jobs}"])
    words += [f"--gpus {args.gpus:g} --hours {args.hours:g} --load {load:g} --max-gpus {max_gpus}"]
    words += [f"--profile {args.profile}"] if args.profile != "philly" else []
    words += [f"--seed {args.seed} --out {args.out}"]
    command = " ".join(["python -m simulate.generate", *words])
    write_csv(args.out, rows, f"generated by: {command}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
