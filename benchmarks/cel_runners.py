"""Measure CEL evaluation cost per runner, to choose the one fleetgate uses.

    .venv/bin/python benchmarks/cel_runners.py [--evaluations N]

Prints microseconds per evaluation for celpy's InterpretedRunner, celpy's CompiledRunner
(stock ``evaluate``, not thread-safe) and fleetgate's CelProgram (the compiled code run with
per-call globals, thread-safe), on a placement filter over realistic job and cluster values.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import time

import celpy

from engine.policy import cel
from engine.policy.celcheck import BOOL

EXPRESSION = (
    '!("gpu.fleetgate.io/model" in job.labels)'
    ' || ("gpu.fleetgate.io/model" in cluster.labels'
    ' && cluster.labels["gpu.fleetgate.io/model"] == job.labels["gpu.fleetgate.io/model"]'
    ' && cluster.free["nvidia.com/gpu"] >= job.total["nvidia.com/gpu"])'
)
JOB = {
    "kind": "PyTorchJob",
    "namespace": "research",
    "name": "llm",
    "labels": {"gpu.fleetgate.io/model": "h100", "team": "nlp"},
    "annotations": {},
    "total": {"cpu": 128, "memory": 2**40, "nvidia.com/gpu": 32, "pods": 4},
    "priority": 100,
    "createdAt": dt.datetime(2026, 11, 1, tzinfo=dt.UTC),
}
CLUSTER = {
    "name": "gpu-east",
    "labels": {"gpu.fleetgate.io/model": "h100", "topology.kubernetes.io/region": "us-east-1"},
    "free": {"cpu": 512, "memory": 4 * 2**40, "nvidia.com/gpu": 48},
    "allocatable": {"cpu": 1024, "memory": 8 * 2**40, "nvidia.com/gpu": 64},
    "ready": True,
}


def per_call(fn, evaluations: int, rounds: int = 5) -> float:
    """Median over rounds of the mean microseconds per call."""
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(evaluations):
            fn()
        samples.append((time.perf_counter() - start) / evaluations * 1e6)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--evaluations", type=int, default=2000)
    args = parser.parse_args()

    act = cel.activation(cel.PLACEMENT_VARS, job=JOB, cluster=CLUSTER)
    program = cel.compile_expression(EXPRESSION, cel.PLACEMENT_VARS, BOOL)
    assert isinstance(program, cel.CelProgram)
    assert program.evaluate(act) is True

    compiled_env = celpy.Environment(runner_class=celpy.CompiledRunner)
    compiled = compiled_env.program(compiled_env.compile(EXPRESSION))
    interpreted_env = celpy.Environment(runner_class=celpy.InterpretedRunner)
    interpreted = interpreted_env.program(interpreted_env.compile(EXPRESSION))
    for runner in (compiled, interpreted):
        assert bool(runner.evaluate(act.values)) is True

    results = {
        "evaluations": args.evaluations,
        "us_per_evaluation": {
            "celpy.InterpretedRunner": round(
                per_call(lambda: interpreted.evaluate(act.values), args.evaluations), 1
            ),
            "celpy.CompiledRunner": round(
                per_call(lambda: compiled.evaluate(act.values), args.evaluations), 1
            ),
            "fleetgate.CelProgram": round(
                per_call(lambda: program.evaluate(act), args.evaluations), 1
            ),
        },
        "convert_activation_us": round(
            per_call(
                lambda: cel.activation(cel.PLACEMENT_VARS, job=JOB, cluster=CLUSTER),
                args.evaluations,
            ),
            1,
        ),
    }
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
