"""CPU cost of one ``/validate/workloads`` review, in process (no HTTP, no TLS).

    .venv/bin/python benchmarks/validate_review.py [--reviews 2000] [--cold]

Reviews the demo's job templates (``sandbox.demo.jobs.plan``) against the example policies
(``policies/``) and fleet (``examples/fleet-snapshot.yaml``), as the webhook does for each job:
the user's CREATE, then the UPDATE of Karmada's detector claiming the template (it adds the
``propagationpolicy.karmada.io/*`` label and annotations, nothing else: admitted unreviewed,
decision ``karmada-claim``). Prints one JSON
document: CPU milliseconds per review (``time.process_time``) for each operation, and the
decisions (``audit.decision``) the reviews gave.

The webhook's memos (kept with the policy set) are warm after the first reviews, as in a webhook
that has seen a few jobs. ``--cold``: each review gets a copy of the policy set with empty
memos, so every expression misses: what a review of inputs never seen before costs.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import datetime as dt
import json
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from engine.policy.policyset import load_policy_set  # noqa: E402
from sandbox.demo.jobs import plan  # noqa: E402
from webhook.fit import Fleet  # noqa: E402
from webhook.review import parse_review  # noqa: E402
from webhook.validate import validate_workload  # noqa: E402

NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def admission_review(obj: dict[str, Any], operation: str, old: dict[str, Any] | None) -> bytes:
    group, _, version = str(obj["apiVersion"]).rpartition("/")
    kind = obj["kind"]
    request = {
        "uid": f"{operation}-{obj['metadata']['name']}",
        "kind": {"group": group, "version": version, "kind": kind},
        "operation": operation,
        "namespace": obj["metadata"].get("namespace", ""),
        "name": obj["metadata"]["name"],
        "object": obj,
        "oldObject": old,
    }
    body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    return json.dumps(body).encode()


def claimed(template: dict[str, Any]) -> dict[str, Any]:
    claimed = copy.deepcopy(template)
    meta = claimed["metadata"]
    meta.setdefault("labels", {})["propagationpolicy.karmada.io/permanent-id"] = "0d6e8e4c"
    annotations = meta.setdefault("annotations", {})
    annotations["propagationpolicy.karmada.io/name"] = "training"
    annotations["propagationpolicy.karmada.io/namespace"] = meta.get("namespace", "")
    return claimed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reviews", type=int, default=2000, help="reviews of each operation")
    parser.add_argument("--cold", action="store_true", help="empty memos for every review")
    args = parser.parse_args()
    policies = load_policy_set([REPO / "policies"])
    # copies of one version, without what the first kept (``PolicySet.kept``)
    sets = [dataclasses.replace(policies) for _ in range(args.reviews)] if args.cold else None
    fleet, _ = Fleet.from_files([REPO / "examples" / "fleet-snapshot.yaml"])
    templates = [job.template for job in plan(min(args.reviews, 500), seed=1)]
    bodies = {
        "CREATE": [admission_review(t, "CREATE", None) for t in templates],
        "UPDATE": [admission_review(claimed(t), "UPDATE", t) for t in templates],
    }
    result: dict[str, Any] = {
        "reviews": args.reviews,
        "templates": len(templates),
        "memos": "cold" if args.cold else "warm",
    }
    for operation, payloads in bodies.items():
        outcomes: dict[str, int] = {}
        for body in payloads[:50]:  # warm up
            validate_workload(parse_review(body), policies, fleet, NOW)
        started = time.process_time()
        for index in range(args.reviews):
            verdict = validate_workload(
                parse_review(payloads[index % len(payloads)]),
                sets[index] if sets else policies,
                fleet,
                NOW,
            )
            decision = verdict.audit.get("decision", "")
            outcomes[decision] = outcomes.get(decision, 0) + 1
        spent = time.process_time() - started
        result[operation] = {
            "cpuMsPerReview": round(1000 * spent / args.reviews, 3),
            "decisions": outcomes,
        }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
