"""Builders for simulator tests: a policy directory, a fleet, a trace file, a run."""

from __future__ import annotations

import csv
from collections.abc import Callable, Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from engine.fleet.frozen import FrozenDict
from engine.members import ClusterSpec, FleetSpec, NodeGroup
from engine.policy.policyset import PolicySet, load_policy_set
from simulate.loop import Options, Simulation
from simulate.results import RunResult
from simulate.trace import read_trace

GI = 2**30
SCHEDULING = """\
apiVersion: fleetgate.io/v1alpha1
kind: SchedulingPolicy
metadata: {{name: sim}}
spec:
  queue: '"fleetgate.io/queue" in job.labels ? job.labels["fleetgate.io/queue"] : "a"'
  tenant: job.namespace
  priority: job.priority
  fairSharing: {{enabled: true, resources: [nvidia.com/gpu]}}
  placement: {{strategy: BinPack}}
  requeue: {{startupTimeout: {startup}, backoffBase: 30s, backoffMax: 5m, maxAttempts: {attempts},
            clusterNotReadyGrace: {grace}}}
"""


def gpu_cluster(name: str, nodes: int, gpus: int = 8) -> ClusterSpec:
    shape = {"cpu": Fraction(96), "memory": Fraction(1024 * GI), "nvidia.com/gpu": Fraction(gpus)}
    return ClusterSpec(
        name=name,
        labels=FrozenDict({"gpu": "yes"}),
        kinds=(("kubeflow.org/v1", "PyTorchJob"),),
        nodes=(NodeGroup.of(nodes, shape),),
    )


@pytest.fixture
def cluster() -> Callable[..., ClusterSpec]:
    """``cluster(name, nodes, gpus=8)``: that many 8-GPU (or ``gpus``-GPU) nodes."""
    return gpu_cluster


@pytest.fixture
def policies(tmp_path: Path) -> Callable[..., PolicySet]:
    def build(
        weights: dict[str, float] | None = None,
        *,
        startup: str = "5m",
        attempts: int = 3,
        grace: str = "2m",
        extra: str = "",
    ) -> PolicySet:
        folder = tmp_path / f"policies-{len(list(tmp_path.glob('policies-*')))}"
        folder.mkdir()
        docs = [SCHEDULING.format(startup=startup, attempts=attempts, grace=grace)]
        for name, weight in (weights or {"a": 1}).items():
            docs.append(
                "apiVersion: fleetgate.io/v1alpha1\nkind: Queue\n"
                f"metadata: {{name: {name}}}\nspec: {{weight: {weight}}}\n"
            )
        if extra:
            docs.append(extra)
        (folder / "p.yaml").write_text("---\n".join(docs), encoding="utf-8")
        return load_policy_set([folder])

    return build


@pytest.fixture
def trace_file(tmp_path: Path) -> Callable[[Sequence[dict[str, Any]], str], Path]:
    def write(rows: Sequence[dict[str, Any]], name: str = "trace.csv") -> Path:
        path = tmp_path / name
        fields = sorted({k for r in rows for k in r})
        with path.open("w", newline="", encoding="utf-8") as out:
            writer = csv.DictWriter(out, fieldnames=fields)
            writer.writeheader()
            writer.writerows(rows)
        return path

    return write


@pytest.fixture
def simulate() -> Callable[..., tuple[Simulation, RunResult]]:
    def run(
        policy_set: PolicySet,
        clusters: Sequence[ClusterSpec],
        trace: Path,
        decide: Any = None,
        **options: Any,
    ) -> tuple[Simulation, RunResult]:
        simulation = Simulation(
            policy_set, FleetSpec(tuple(clusters)), read_trace(trace), Options(**options), decide
        )
        return simulation, simulation.run()

    return run
