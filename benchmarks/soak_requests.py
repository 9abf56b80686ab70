"""Request bodies for the soak (``benchmarks/soak.py``): good AdmissionReviews of the example
bindings and jobs, a CEL-heavy job, and the garbage kinds that must never be answered 5xx."""

from __future__ import annotations

import json
from typing import Any

from tests.webhook.helpers import admitted_binding, created_binding, example, review

MUTATE, VALIDATE = "/mutate/resourcebindings", "/validate/workloads"
BINDINGS = ("tokenizer-stats-job", "llama-pretrain-pytorchjob", "bert-sweep-job")
JOBS = (("Job", "tokenizer-stats"), ("Job", "bert-sweep"), ("PyTorchJob", "llama-pretrain"))


def _job(kind: str, name: str) -> dict:
    job = example(kind, name)
    for key in ("uid", "resourceVersion", "creationTimestamp", "generation"):
        job["metadata"].pop(key, None)
    job.pop("status", None)
    return job


def good_bodies(count: int = 60) -> list[tuple[str, bytes]]:
    """(path, body): CREATEs of the example bindings and jobs, alternating, each its own uid."""
    bodies = []
    for i in range(count):
        if i % 2:
            obj, path = created_binding(BINDINGS[i % len(BINDINGS)]), MUTATE
        else:
            obj, path = _job(*JOBS[i % len(JOBS)]), VALIDATE
        bodies.append((path, json.dumps(review(obj, uid=f"soak-good-{i}")).encode()))
    return bodies


def heavy_body(containers: int = 40, env: int = 25, labels: int = 120) -> bytes:
    """A Job with many containers × env vars and many labels and annotations (~200 KB)."""
    job = _job("Job", "tokenizer-stats")
    spec = job["spec"]["template"]["spec"]
    spec["containers"] = [
        {
            "name": f"c{i}",
            "image": "ghcr.io/example/tokenizer-stats:1.2",
            "env": [{"name": f"VAR_{i}_{j}", "value": "x" * 32} for j in range(env)],
            "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
        }
        for i in range(containers)
    ]
    job["metadata"]["labels"].update({f"soak.example.com/l{i}": f"v{i}" for i in range(labels)})
    job["metadata"]["annotations"].update(
        {f"soak.example.com/a{i}": "y" * 64 for i in range(labels)}
    )
    return json.dumps(review(job, uid="soak-heavy")).encode()


def _with_request(binding: dict, value: Any) -> dict:
    binding["spec"]["replicas"] = 1
    binding["spec"]["replicaRequirements"] = {"resourceRequest": {"cpu": value}}
    return binding


def _job_quantity(value: Any) -> dict:
    job = _job("Job", "tokenizer-stats")
    job["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["memory"] = value
    return job


def garbage() -> list[tuple[str, str, str, bytes]]:
    """(kind, method, path, body) of hostile or careless requests; none may be answered 5xx."""
    good = json.dumps(review(created_binding())).encode()
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "n"}}
    old = admitted_binding()

    def rev(obj: dict, **kw: Any) -> bytes:
        return json.dumps(review(obj, **kw)).encode()

    return [
        ("truncated-json", "POST", MUTATE, good[: len(good) // 2]),
        ("not-json", "POST", VALIDATE, bytes(range(256)) * 4),
        ("empty-body", "POST", MUTATE, b""),
        ("json-not-object", "POST", VALIDATE, b"[1, 2, 3]"),
        ("wrong-review-kind", "POST", MUTATE, good.replace(b'"AdmissionReview"', b'"Pod"', 1)),
        (
            "no-request",
            "POST",
            VALIDATE,
            b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}',
        ),
        ("wrong-object-kind", "POST", MUTATE, rev(pod)),
        ("quantity-1e400", "POST", MUTATE, rev(_with_request(created_binding(), "1e400"))),
        (
            "quantity-1e400-update",
            "POST",
            MUTATE,
            rev(_with_request(copy_of(old), "1e400"), operation="UPDATE", old=old),
        ),
        ("quantity-1e20000000", "POST", VALIDATE, rev(_job_quantity("1e20000000"))),
        (
            "quantity-number-1e400",
            "POST",
            VALIDATE,
            rev(_job_quantity("@")).replace(b'"@"', b"1e400"),
        ),
        ("quantity-5000-digits", "POST", VALIDATE, rev(_job_quantity("9" * 5000))),
        ("deep-nesting", "POST", VALIDATE, b"[" * 100_000 + b"]" * 100_000),
        ("deep-object", "POST", MUTATE, b'{"a":' * 20_000 + b"1" + b"}" * 20_000),
        ("oversized-body", "POST", MUTATE, b'{"x":"' + b"y" * (4 * 1024 * 1024) + b'"}'),
        ("wrong-method", "GET", MUTATE, b""),
        ("unknown-path", "POST", "/mutate/pods", good),
    ]


def copy_of(obj: dict) -> dict:
    return json.loads(json.dumps(obj))
