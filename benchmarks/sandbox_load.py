"""Load the sandbox end to end: templates created over HTTPS, their bindings watched appearing.

    .venv/bin/python benchmarks/sandbox_load.py [--templates 10000] [--threads 4] [--unplaced]
        [--fleet examples/fleet.yaml] [--timeout 600]

Starts ``fleetgate sandbox`` (HTTPS, Karmada's controllers over the fleet file, real time) in its
own process, creates a namespace and a PropagationPolicy that claims every PyTorchJob in it,
opens a watch on the namespace's ResourceBindings, then creates ``--templates`` PyTorchJobs from
``--threads`` client threads (the ``kubernetes`` client, one connection pool each). The
sandbox's detector turns each template into a binding, its scheduler places the binding, and the
binding controller writes its Work (``--unplaced``: the policy matches no cluster, so bindings
stay unplaced with a NoClusterFit status and no Works, as while fleetgate holds them).

Prints one JSON document: templates created per second (client side), bindings seen per second
(first create → last binding ADDED at the watch), watch lag p50/p99/max (binding ADDED seen by
the client − its template's create returned) and the sandbox process's RSS (now and peak).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import kubernetes

REPO = Path(__file__).resolve().parent.parent
NAMESPACE = "bench"
KUBEFLOW = ("kubeflow.org", "v1", "pytorchjobs")
POLICY = ("policy.karmada.io", "v1alpha1", "propagationpolicies")
RB = ("work.karmada.io", "v1alpha2", "resourcebindings")


def start_sandbox(args: argparse.Namespace, kubeconfig: Path) -> subprocess.Popen:
    command = [
        sys.executable,
        "-m",
        "fleetgate",
        "sandbox",
        "--port",
        "0",
        "--kubeconfig-out",
        str(kubeconfig),
        "--fleet",
        str(args.fleet),
        "--log-level",
        "WARNING",
    ]
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    for line in process.stdout:
        if line.startswith("  stop:"):
            return process
    process.kill()
    raise SystemExit("the sandbox did not start")


def client(kubeconfig: Path) -> kubernetes.client.CustomObjectsApi:
    configuration = kubernetes.client.Configuration()
    kubernetes.config.load_kube_config(
        config_file=str(kubeconfig), client_configuration=configuration
    )
    return kubernetes.client.CustomObjectsApi(kubernetes.client.ApiClient(configuration))


def policy(unplaced: bool) -> dict[str, Any]:
    placement: dict[str, Any] = {}
    if unplaced:
        placement = {"clusterAffinity": {"clusterNames": ["no-such-cluster"]}}
    return {
        "apiVersion": "policy.karmada.io/v1alpha1",
        "kind": "PropagationPolicy",
        "metadata": {"name": "bench", "namespace": NAMESPACE},
        "spec": {
            "resourceSelectors": [{"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob"}],
            "placement": placement,
        },
    }


def template(i: int) -> dict[str, Any]:
    container = {
        "name": "pytorch",
        "image": "ghcr.io/example/bench:1",
        "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
    }
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {
            "name": f"job-{i:05d}",
            "namespace": NAMESPACE,
            "annotations": {"sandbox.fleetgate.io/duration": "1h"},
        },
        "spec": {
            "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "template": {"spec": {"containers": [container]}}}
            }
        },
    }


def rss_kib(pid: int) -> dict[str, int]:
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0])
    return fields


def run(args: argparse.Namespace) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="sandbox-load-"))
    kubeconfig = workdir / "kubeconfig"
    process = start_sandbox(args, kubeconfig)
    try:
        api = client(kubeconfig)
        kubernetes.client.CoreV1Api(api.api_client).create_namespace(
            {"metadata": {"name": NAMESPACE}}
        )
        api.create_namespaced_custom_object(
            *POLICY[:2], NAMESPACE, POLICY[2], policy(args.unplaced)
        )
        created: dict[str, float] = {}
        seen: dict[str, float] = {}
        everything_seen = threading.Event()
        listed = api.list_namespaced_custom_object(*RB[:2], NAMESPACE, RB[2])

        def watch() -> None:
            stream = kubernetes.watch.Watch().stream(
                client(kubeconfig).list_namespaced_custom_object,
                *RB[:2],
                NAMESPACE,
                RB[2],
                resource_version=listed["metadata"]["resourceVersion"],
                timeout_seconds=int(args.timeout),
            )
            for event in stream:
                if event["type"] == "ADDED":
                    name = event["object"]["metadata"]["name"].removesuffix("-pytorchjob")
                    seen.setdefault(name, time.monotonic())
                    if len(seen) >= args.templates:
                        everything_seen.set()
                        return

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        time.sleep(0.5)  # the watch is open

        def create(worker: int) -> None:
            mine = client(kubeconfig)
            for i in range(worker, args.templates, args.threads):
                body = template(i)
                mine.create_namespaced_custom_object(*KUBEFLOW[:2], NAMESPACE, KUBEFLOW[2], body)
                created[body["metadata"]["name"]] = time.monotonic()

        start = time.monotonic()
        threads = [threading.Thread(target=create, args=(w,)) for w in range(args.threads)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        created_s = time.monotonic() - start
        everything_seen.wait(args.timeout)
        done_s = (max(seen.values()) if seen else time.monotonic()) - start
        lags = sorted(seen[name] - created[name] for name in seen if name in created)
        memory = rss_kib(process.pid)
        return {
            "templates": args.templates,
            "clientThreads": args.threads,
            "unplaced": args.unplaced,
            "bindingsSeen": len(seen),
            "createSeconds": round(created_s, 2),
            "templatesPerSecond": round(args.templates / created_s, 1),
            "endToEndSeconds": round(done_s, 2),
            "bindingsPerSecond": round(len(seen) / done_s, 1) if done_s > 0 else None,
            "watchLagMs": {
                "p50": round(1000 * statistics.median(lags), 1) if lags else None,
                "p99": round(1000 * lags[int(0.99 * (len(lags) - 1))], 1) if lags else None,
                "max": round(1000 * lags[-1], 1) if lags else None,
            },
            "sandboxRssMiB": round(memory.get("VmRSS", 0) / 1024, 1),
            "sandboxPeakRssMiB": round(memory.get("VmHWM", 0) / 1024, 1),
        }
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
        shutil.rmtree(workdir, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--templates", type=int, default=10_000)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--unplaced", action="store_true", help="bindings match no cluster")
    parser.add_argument("--fleet", type=Path, default=REPO / "examples" / "fleet.yaml")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds to wait at most")
    print(json.dumps(run(parser.parse_args()), indent=2))


if __name__ == "__main__":
    main()
