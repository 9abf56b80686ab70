"""Measure reading a large snapshot file with libyaml's parser and with PyYAML's.

    .venv/bin/python benchmarks/snapshot_load.py [--objects 29000] [--documents] [--keep PATH]

Writes a ``kubectl get -o yaml``-shaped ``kind: List`` (or, with ``--documents``, one YAML
document per object) of Clusters (1 in 200), PyTorchJobs and their ResourceBindings, built like
``tests/fleet/builders.py`` with the ``managedFields`` and annotations real objects carry, then
reads it with ``engine.fleet.files.read_objects`` in a fresh process per loader. Prints the file
size, then per loader the seconds and the peak RSS (``ru_maxrss``) of that process, and the
RSS before reading (the interpreter and imports).
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.fleet.builders import as_list, binding_for, cluster, pytorch_job  # noqa: E402


def managed_fields(manager: str, fields: list[str]) -> list[dict[str, Any]]:
    """What the API server records for each writer: ``f:`` keys for each field it set."""
    spec = {f"f:{f}": {} for f in fields}
    status = {"f:conditions": {".": {}, 'k:{"type":"Ready"}': {".": {}, "f:status": {}}}}
    return [
        {
            "apiVersion": "v1",
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:metadata": {"f:labels": {".": {}}}, "f:spec": spec}
            if subresource == ""
            else {"f:status": status},
            "manager": manager,
            "operation": op,
            **({"subresource": subresource} if subresource else {}),
            "time": "2025-03-10T09:00:05Z",
        }
        for op, subresource in (("Apply", ""), ("Update", ""), ("Update", "status"))
    ]


def objects(count: int, seed: int = 7) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    clusters = max(1, count // 200)
    out: list[dict[str, Any]] = [
        cluster(f"member-{i:03d}", gpus=rng.choice((64, 128, 256)), used={"cpu": "100"})
        for i in range(clusters)
    ]
    for i in range((count - clusters) // 2):
        job = pytorch_job(f"job-{i:05d}", f"team-{i % 40}", workers=rng.randint(1, 16))
        job["metadata"]["annotations"] = {
            "kubectl.kubernetes.io/last-applied-configuration": json.dumps(job["spec"]),
        }
        job["metadata"]["managedFields"] = managed_fields("kubectl", ["pytorchReplicaSpecs"])
        placed = rng.random() < 0.2
        binding = binding_for(
            job,
            clusters=[(f"member-{rng.randrange(clusters):03d}", 2)] if placed else (),
            replicas=job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"],
            requests={"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "8"},
            applied={"member-000": True} if placed else None,
        )
        binding["metadata"]["managedFields"] = managed_fields(
            "karmada-controller-manager", ["resource", "replicas", "replicaRequirements"]
        )
        out += [job, binding]
    return out


def measure(path: Path, loader: str) -> dict[str, Any]:
    """In this (fresh) process: read ``path`` with ``loader``; the numbers as a dict."""
    from engine import yamlguard
    from engine.fleet.files import read_objects

    if loader == "pyyaml":
        yamlguard.C_LOADER = None
    elif yamlguard.C_LOADER is None:
        return {"loader": loader, "error": "libyaml is not installed"}
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    found, issues = read_objects([path])
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "loader": loader,
        "seconds": seconds,
        "peak_mib": peak / 1024,
        "base_mib": before / 1024,
        "objects": sum(len(o.get("items", ())) or 1 for _, o in found),
        "issues": len(issues),
    }


def write(path: Path, count: int, documents: bool) -> str:
    """Write the snapshot; a line saying what it holds."""
    built = objects(count)
    with path.open("w", encoding="utf-8") as out:
        if documents:
            yaml.safe_dump_all(built, out, sort_keys=False)
        else:
            yaml.safe_dump(as_list(built), out, sort_keys=False)
    shape = "documents" if documents else "one List"
    return f"snapshot: {len(built):,} objects ({shape}), {path.stat().st_size / 2**20:.1f} MiB"


def child(*args: str) -> str:
    """Run this script in a fresh process: Linux carries ``ru_maxrss`` over fork and exec, so
    the parent stays small and every number comes from a process that did one thing."""
    return subprocess.run(
        [sys.executable, __file__, *args], capture_output=True, text=True, check=True
    ).stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--objects", type=int, default=29_000)
    parser.add_argument("--documents", action="store_true", help="one document per object")
    parser.add_argument("--keep", type=Path, help="write the snapshot here and keep it")
    parser.add_argument("--write", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--measure", nargs=2, metavar=("PATH", "LOADER"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.write:
        print(write(args.write, args.objects, args.documents))
        return
    if args.measure:
        print(json.dumps(measure(Path(args.measure[0]), args.measure[1])))
        return
    with tempfile.TemporaryDirectory() as scratch:
        path = args.keep or Path(scratch) / "snapshot.yaml"
        shape = ["--documents"] if args.documents else []
        print(child("--write", str(path), "--objects", str(args.objects), *shape), end="")
        for loader in ("libyaml", "pyyaml"):
            row = json.loads(child("--measure", str(path), loader))
            if "error" in row:
                print(f"{loader:8} {row['error']}")
                continue
            print(
                f"{loader:8} {row['seconds']:7.1f} s   peak RSS {row['peak_mib']:7.0f} MiB "
                f"(before reading {row['base_mib']:.0f} MiB)   "
                f"{row['objects']:,} objects, {row['issues']} issues"
            )


if __name__ == "__main__":
    main()
