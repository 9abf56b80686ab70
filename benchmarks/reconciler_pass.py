"""One reconciler pass on a large, settled fleet after one object changed: where its time goes.

    .venv/bin/python benchmarks/reconciler_pass.py [--objects 20000] [--passes 20] [--seed 7]
        [--profile FILE]

No API server and no network: the real ``reconciler.loop.Reconciler`` over the real informers
(``reconciler.informer.Informer``), whose caches are filled through the methods a list and a
watch event call (``_replace``, ``_handle``), and the real ``Applier`` whose requests are
answered in memory: each patch is merged into the stored binding, given a new resourceVersion
and handed back to the informer as a MODIFIED event (as the watch brings a write back); Events
are dropped. The fleet: examples/fleet-snapshot.yaml (clusters, PriorityClasses,
PropagationPolicies, its jobs) and the demo's job mix (``sandbox.demo.jobs.plan``), each
template with the binding Karmada's detector makes for it (``engine.fleet.detector``), held by
fleetgate's webhook (managed, suspended, queued), up to ``--objects`` objects in all.

First the passes run until one writes nothing (the first decides every job, and its writes come
back as events). Then, ``--passes`` times: one waiting binding changes (``--change label``:
another controller's label, a new resourceVersion, same demand; ``--change managed-fields``:
only its managedFields, which no reader reads; ``--change arrival``: instead, a new job's
template and binding arrive, held by the webhook), and one pass runs as the loop runs a pass that
events alone asked for (``quiet``), followed by passes until the writes it caused have come
back. Prints, for the passes that followed the one change: the
median and the largest of the whole pass and of each stage (snapshot: the informers' objects,
adoption and the Snapshot; cycle: ``run_cycle``; plan: ``engine.enforce.plan_pass``; writes:
sending what the plan says, here in memory), and ``decisions_sha256`` of the last pass's
decisions (equal before and after a change that must not alter what is decided).
"""

from __future__ import annotations

import argparse
import copy
import cProfile
import datetime as dt
import hashlib
import json
import pstats
import random
import statistics
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import kubernetes

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from engine import annotations as ann  # noqa: E402
from engine.fleet.detector import Policy, build_binding, find_policy  # noqa: E402
from engine.gcpause import FreezeOnce  # noqa: E402
from engine.policy.policyset import load_policy_set  # noqa: E402
from reconciler import loop as reconciler_loop  # noqa: E402
from reconciler.apply import Applier  # noqa: E402
from reconciler.informer import Informer, key_of  # noqa: E402
from reconciler.informers import Informers  # noqa: E402
from reconciler.loop import Reconciler  # noqa: E402
from sandbox.demo.jobs import plan  # noqa: E402
from sandbox.demo.world import snapshot_items  # noqa: E402

NOW = dt.datetime(2025, 3, 10, 10, 0, tzinfo=dt.UTC)
TENANTS = ("research", "inference", "analytics")
STAGES = ("snapshot", "cycle", "plan", "writes")


class Server:
    """The objects, by informer, as an API server would hold them; resourceVersions count up."""

    def __init__(self, informers: Informers) -> None:
        self.informers = informers
        self.version = 0
        self.events: list[tuple[Informer, dict[str, Any]]] = []  # not yet delivered
        self.stored: dict[tuple[str, str, str], dict[str, Any]] = {}  # the server's copies

    def informer_of(self, obj: Mapping[str, Any]) -> Informer | None:
        return self.informers.for_object(obj)

    def stamp(self, obj: dict[str, Any]) -> dict[str, Any]:
        self.version += 1
        obj.setdefault("metadata", {})["resourceVersion"] = str(self.version)
        informer = self.informer_of(obj)
        if informer is not None:
            self.stored[(informer.resource.key, *key_of(obj))] = obj
        return obj

    def get(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        informer = self.informer_of(obj)
        assert informer is not None
        return self.stored[(informer.resource.key, *key_of(obj))]

    def list_all(self, objects: list[dict[str, Any]]) -> None:
        lists: dict[str, dict[Any, Any]] = {key: {} for key in self.informers.informers}
        for obj in objects:
            informer = self.informer_of(obj)
            if informer is not None:
                lists[informer.resource.key][key_of(obj)] = self.stamp(obj)
        for key, items in lists.items():
            self.informers[key]._replace(items, str(self.version))

    def modified(self, obj: dict[str, Any]) -> dict[str, Any]:
        informer = self.informer_of(obj)
        assert informer is not None
        self.events.append((informer, self.stamp(obj)))
        return obj

    def deliver(self) -> int:
        events, self.events = self.events, []
        for informer, obj in events:
            informer._handle({"type": "MODIFIED", "object": obj})
        return len(events)


def merged(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merged(out.get(key), value)
    return out


class MemoryApplier(Applier):
    """The Applier with its requests answered by :class:`Server`."""

    server: Server

    def _patch(self, binding: Mapping[str, Any], body: dict[str, Any], status: bool) -> Any:
        return self.server.modified(merged(self.server.get(binding), body))

    def _get(self, binding: Mapping[str, Any]) -> dict[str, Any]:
        return self.server.get(binding)

    def _event(self, binding: Mapping[str, Any], writes: Any, now: dt.datetime) -> None:
        pass


def fleet(objects: int, seed: int, later: int = 0) -> list[dict[str, Any]]:
    """The example snapshot's objects, the tenants' Namespaces, and demo jobs with their
    bindings (held by the webhook), ``objects`` in all, then ``later`` more jobs' (template,
    binding) pairs at the end, for arrivals."""
    base = [copy.deepcopy(item) for item in snapshot_items()]
    base += [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": t}} for t in TENANTS]
    policies = [Policy.read(o) for o in base if o.get("kind") == "PropagationPolicy"]
    classes = {
        o["metadata"]["name"]: int(o.get("value", 0))
        for o in base
        if o.get("kind") == "PriorityClass"
    }
    rng = random.Random(seed)
    out = list(base)
    for index, job in enumerate(plan(max(0, (objects - len(base)) // 2) + later, seed)):
        template = job.template
        meta = template["metadata"]
        meta["uid"] = f"uid-{index:06d}"
        meta["creationTimestamp"] = ann.format_time(NOW - dt.timedelta(seconds=index))
        claim = find_policy(template, policies)
        assert claim.policy is not None, claim.reason
        binding = build_binding(template, claim.policy, classes)
        bmeta = binding["metadata"]
        bmeta["labels"][ann.MANAGED] = "true"
        queued = NOW - dt.timedelta(seconds=rng.randint(1, 86_400))
        bmeta["annotations"][ann.QUEUED_AT] = ann.format_time(queued)
        binding["spec"]["suspension"] = {"scheduling": True}
        out += [template, binding]
    return out


class Stages:
    def __init__(self) -> None:
        self.current: dict[str, float] = {}

    def wrap(self, name: str, function: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                self.current[name] = self.current.get(name, 0.0) + time.perf_counter() - started

        return timed


def settle(rec: Reconciler, server: Server, limit: int = 20) -> int:
    """Passes until one writes nothing and no event is left; how many ran."""
    for count in range(1, limit + 1):
        summary = rec.run_once(NOW)
        if not server.deliver() and not summary.applied:
            return count
    raise RuntimeError(f"the fleet did not settle in {limit} passes")


def decisions_sha256(rec: Reconciler) -> str:
    assert rec.last_result is not None
    text = "\n".join(
        json.dumps(
            [d.binding, str(d.action), str(d.reason), d.message, list(d.clusters)], default=str
        )
        for d in sorted(rec.last_result.decisions, key=lambda d: d.binding)
    )
    return hashlib.sha256(text.encode()).hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--objects", type=int, default=20_000)
    parser.add_argument("--passes", type=int, default=20)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--change",
        choices=("label", "managed-fields", "arrival"),
        default="label",
        help="what changes: a waiting binding's label (read into the snapshot), or only its "
        "managedFields (nothing a pass reads: the pass, asked for by events alone, runs no "
        "cycle), or a new job arrives (its template and its binding, held by the webhook)",
    )
    parser.add_argument("--profile", type=Path, help="write a cProfile of the measured passes")
    args = parser.parse_args()

    api = kubernetes.client.ApiClient()
    informers = Informers(api, seed=args.seed)
    server = Server(informers)
    arrivals = args.passes if args.change == "arrival" else 0
    objects = fleet(args.objects, args.seed, arrivals)
    later = objects[len(objects) - 2 * arrivals :]  # (template, binding) pairs, in order
    server.list_all(objects[: len(objects) - 2 * arrivals])
    rec = Reconciler(
        api,
        type("Fixed", (), {"current": load_policy_set([REPO / "policies"])})(),
        clock=lambda: NOW,
        informers=informers,
    )
    rec.observers.append(FreezeOnce())  # as `fleetgate serve` does
    applier = MemoryApplier(api, "bind", lambda: NOW)
    applier.server = server
    rec.applier = applier
    started = time.perf_counter()
    rec.run_once(NOW)
    first_seconds = time.perf_counter() - started
    server.deliver()
    settling = settle(rec, server)

    stages = Stages()
    rec._snapshot = stages.wrap("snapshot", rec._snapshot)  # type: ignore[method-assign]
    rec._send = stages.wrap("writes", rec._send)  # type: ignore[method-assign]
    rec.cycles.decide = stages.wrap("cycle", rec.cycles.decide)  # type: ignore[method-assign]
    reconciler_loop.plan_pass = stages.wrap("plan", reconciler_loop.plan_pass)
    rng = random.Random(args.seed)
    waiting = sorted(
        key
        for key, obj in informers["resourcebindings.work.karmada.io"].snapshot_items().items()
        if not (obj.get("spec") or {}).get("clusters")
    )
    profile = cProfile.Profile() if args.profile else None
    rows: list[dict[str, float]] = []
    for n in range(args.passes):
        namespace, name = rng.choice(waiting)
        binding = informers["resourcebindings.work.karmada.io"].get(namespace, name)
        assert binding is not None
        changed = copy.deepcopy(server.get(binding))
        if args.change == "arrival":
            server.modified(later[2 * n])  # the template, then its binding
            server.modified(later[2 * n + 1])
        elif args.change == "label":
            changed["metadata"].setdefault("labels", {})["example.com/touched"] = str(n)
            server.modified(changed)
        else:
            changed["metadata"]["managedFields"] = [{"manager": f"controller-{n}"}]
            server.modified(changed)
        server.deliver()
        stages.current = {}
        if profile is not None:
            profile.enable()
        started = time.perf_counter()
        rec.run_once(NOW, quiet=True)  # as the loop runs a pass events alone asked for
        seconds = time.perf_counter() - started
        if profile is not None:
            profile.disable()
        rows.append({"pass": seconds, **stages.current})
        quiet_sha256 = decisions_sha256(rec)
        server.deliver()
        settle(rec, server)

    cached = sum(len(i.snapshot_items()) for i in informers.informers.values())
    print(f"objects in the caches: {cached:,}; bindings waiting: {len(waiting):,}")
    print(
        f"first pass (cold, decides every job): {first_seconds:.3f} s; settled after "
        f"{settling} more passes"
    )
    what = "one job arrived" if args.change == "arrival" else f"one binding's {args.change} changed"
    print(f"{args.passes} passes after {what} (median / max):")
    print(f"  cycles not run (nothing a pass reads changed): {rec.quiet_passes}")
    print(f"  cycles rerun (only the jobs that changed decided): {rec.cycles.reruns}")
    for stage in ("pass", *STAGES):
        values = [row.get(stage, 0.0) for row in rows]
        print(
            f"  {stage:9} {statistics.median(values) * 1000:8.1f} ms {max(values) * 1000:8.1f} ms"
        )
    print(f"decisions_sha256 {decisions_sha256(rec)}")
    print(f"decisions_sha256 of the last pass after a change: {quiet_sha256}")
    if profile is not None:
        profile.dump_stats(str(args.profile))
        pstats.Stats(str(args.profile)).sort_stats("cumulative").print_stats(25)


if __name__ == "__main__":
    main()
