"""The demo's job mix: the example jobs of three tenants, repeated over simulated time.

The templates are the job templates of examples/fleet-snapshot.yaml (and
examples/jobs/pytorch-finetune.yaml), cleaned of what the API server and Karmada set. From the
seed alone (``random.Random(seed)``) each planned job gets its template, its arrival time and
how long it runs on its member (the sandbox's duration annotation), so the same seed always
submits the same jobs in the same order.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from sandbox.demo.world import REPO, snapshot_items
from sandbox.karmada.names import DURATION_ANNOTATION

EXTRA_TEMPLATES = (REPO / "examples" / "jobs" / "pytorch-finetune.yaml",)
# tenant → its share of the jobs
TENANT_MIX = {"research": 0.5, "inference": 0.25, "analytics": 0.25}
# template name → (how often it is chosen within its tenant, minutes it runs, ±fraction).
# The research queue's memory max admits one 3-node llama gang at a time, and its training
# queue is StrictFIFO: few of those, or the run ends with a long serial tail.
TEMPLATES: Mapping[str, tuple[int, float, float]] = {
    "llama-pretrain": (1, 6.0, 0.2),
    "llama-finetune": (1, 5.0, 0.2),
    "resnet-ablation": (4, 4.0, 0.4),
    "bert-sweep": (3, 4.0, 0.4),
    "vit-probe": (2, 4.0, 0.4),
    "mistral-finetune": (3, 5.0, 0.4),
    "chat-eval": (2, 3.0, 0.4),
    "summarize-backfill": (1, 4.0, 0.3),
    "nightly-etl": (1, 6.0, 0.3),
    "clickstream-agg": (1, 4.0, 0.3),
}
ARRIVAL_WINDOW = 1500.0  # simulated seconds over which the jobs arrive
_DROPPED_META = ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields")


@dataclass(frozen=True, slots=True)
class PlannedJob:
    at: float  # simulated seconds after the start
    tenant: str  # the template's namespace
    queue: str
    template: dict[str, Any]

    @property
    def kind(self) -> str:
        return str(self.template["kind"])

    @property
    def name(self) -> str:
        return str(self.template["metadata"]["name"])

    @property
    def namespace(self) -> str:
        return str(self.template["metadata"]["namespace"])

    @property
    def binding(self) -> str:
        """namespace/name of the ResourceBinding Karmada's detector makes for it."""
        return f"{self.namespace}/{self.name}-{self.kind.lower()}"


def example_templates() -> dict[str, list[dict[str, Any]]]:
    """tenant → its example job templates, sorted by name."""
    found: dict[str, list[dict[str, Any]]] = {tenant: [] for tenant in TENANT_MIX}
    extra = (yaml.safe_load(path.read_text()) for path in EXTRA_TEMPLATES)
    for item in [*snapshot_items(), *extra]:
        meta = item.get("metadata") or {}
        if meta.get("name") in TEMPLATES and meta.get("namespace") in found:
            found[meta["namespace"]].append(_clean(item))
    for tenant, templates in found.items():
        if not templates:
            raise ValueError(f"no example job template of tenant {tenant} in examples/")
        templates.sort(key=lambda t: t["metadata"]["name"])
    return found


def plan(count: int, seed: int, window: float = ARRIVAL_WINDOW) -> list[PlannedJob]:
    """``count`` jobs of the three tenants, by arrival time (then name)."""
    rng = random.Random(seed)
    templates = example_templates()
    tenants = _tenant_sequence(count, rng)
    planned = []
    for index, tenant in enumerate(tenants):
        mine = templates[tenant]
        weights = [TEMPLATES[t["metadata"]["name"]][0] for t in mine]
        chosen = copy.deepcopy(rng.choices(mine, weights)[0])
        base = chosen["metadata"]["name"]
        _, minutes, spread = TEMPLATES[base]
        runs = minutes * 60 * rng.uniform(1 - spread, 1 + spread)
        at = 0.0 if index < 3 else rng.uniform(0, window)  # one of each tenant at the start
        chosen["metadata"]["name"] = f"{base}-{index + 1:03d}"
        annotations = chosen["metadata"].setdefault("annotations", {})
        annotations[DURATION_ANNOTATION] = f"{round(runs)}s"
        queue = str((chosen["metadata"].get("labels") or {}).get("fleetgate.io/queue", ""))
        planned.append(PlannedJob(round(at, 1), tenant, queue, chosen))
    planned.sort(key=lambda job: (job.at, job.name))
    return planned


def _tenant_sequence(count: int, rng: random.Random) -> list[str]:
    """Each tenant's share of ``count`` (at least one each), in a shuffled order after one job
    of every tenant."""
    names = list(TENANT_MIX)
    counts = {name: max(1, round(count * TENANT_MIX[name])) for name in names}
    counts[names[0]] += count - sum(counts.values())
    rest = [name for name in names for _ in range(counts[name] - 1)]
    rng.shuffle(rest)
    return names + rest


def _clean(item: Mapping[str, Any]) -> dict[str, Any]:
    """A template as a user would apply it: no status, no server-set or Karmada-set fields."""
    template = {k: copy.deepcopy(v) for k, v in item.items() if k != "status"}
    meta = template["metadata"]
    for key in _DROPPED_META:
        meta.pop(key, None)
    for field in ("labels", "annotations"):
        kept = {
            k: v for k, v in (meta.get(field) or {}).items() if "karmada.io/" not in k
        }  # the detector's claim, not the user's
        if kept:
            meta[field] = kept
        else:
            meta.pop(field, None)
    return template


def by_tenant(jobs: Sequence[PlannedJob]) -> Iterator[tuple[str, int]]:
    for tenant in TENANT_MIX:
        yield tenant, sum(1 for job in jobs if job.tenant == tenant)
