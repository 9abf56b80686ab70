"""Property tests of the scheduling cycle (issue 4, "Done when"): on small random fleets and
workloads, no cluster is over-committed, no queue max is exceeded, gangs are all-or-nothing,
the decisions do not depend on input order, preemption never runs in cycles, and every decision
has a reason, an action that agrees with it and a position.

Scenarios are dicts for tests/cycle/builders.py; the oracles below recompute what the cycle
promises from the scenario itself (per-pod requests, running jobs, the snapshot's free capacity),
not from the cycle's own bookkeeping.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime as dt
import random
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping
from fractions import Fraction
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, example, given, seed, settings
from hypothesis import strategies as st

from engine import annotations as ann
from engine.cycle import Cycle, run_cycle
from engine.cycle.jobs.cache import JobCache
from engine.cycle.model import CycleResult, Decision
from engine.cycle.reasons import NEVER, Action, Reason
from engine.fleet.model import ClusterView, Snapshot
from engine.policy.model import AdmitOn, NodeShape
from engine.policy.policyset import PolicySet, load_policy_set
from engine.quantity import parse_quantity
from tests.cycle import builders
from tests.sampling import until_covered

GPU, CPU, MEMORY, PODS = "nvidia.com/gpu", "cpu", "memory", "pods"
SHAPED = (CPU, MEMORY, GPU)  # the resources builders.py puts in resource models
NODE_SHAPES = (
    {GPU: 8, CPU: 96, MEMORY: "1Ti"},
    {GPU: 4, CPU: 48, MEMORY: "512Gi"},
    {GPU: 2, CPU: 16, MEMORY: "128Gi"},
    {CPU: 64, MEMORY: "256Gi"},
)
TAINT = {"key": "dedicated", "value": "infra", "effect": "NoSchedule"}
TOLERATION = {"key": "dedicated", "operator": "Equal", "value": "infra", "effect": "NoSchedule"}
BACKOFF = ann.format_time(builders.NOW + dt.timedelta(minutes=5))
SETTINGS = settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

Amounts = dict[str, Fraction]
Pods = list[tuple[int, Amounts]]  # (count, per-pod requests incl. pods: 1)


# --- strategies --------------------------------------------------------------------------------
def rarely(draw: st.DrawFn, one_in: int) -> bool:
    """True about once in ``one_in`` draws; shrinks to False."""
    return draw(st.integers(0, one_in - 1)) == one_in - 1


@st.composite
def cluster_specs(draw: st.DrawFn, preemptive: bool = False) -> list[dict[str, Any]]:
    specs = []
    for i in range(draw(st.integers(2, 4))):
        nodes = draw(st.integers(1, 3 if preemptive else 6))
        spec: dict[str, Any] = {
            "name": f"c{i}",
            "nodes": nodes,
            "node": dict(draw(st.sampled_from(NODE_SHAPES))),
            "used": draw(st.integers(0, nodes // 2 if preemptive else nodes)),
        }
        if rarely(draw, 6):
            spec["ready"] = False
        if rarely(draw, 5):
            spec["taints"] = [TAINT]
        if rarely(draw, 6):
            spec["apis"] = sorted(
                draw(st.sets(st.sampled_from(sorted(builders.KINDS)), min_size=1))
            )
        if rarely(draw, 2 if preemptive else 6):
            spec["models"] = False
        specs.append(spec)
    return specs


@st.composite
def queue_documents(draw: st.DrawFn, preemptive: bool = False) -> list[dict[str, Any]]:
    """2–5 queues in a tree, valid for the loader: guarantee ≤ max, children's guarantees sum
    ≤ the parent's, lendingLimit ≤ guarantee."""
    n = draw(st.integers(2, 5))
    parents: list[int | None] = [None]
    for i in range(1, n):
        parents.append(draw(st.one_of(st.none(), st.integers(0, i - 1))))
    limits = {GPU: 24, CPU: 160}
    guarantees: list[dict[str, int]] = []
    for _ in range(n):
        guarantees.append(
            {r: draw(st.integers(0, top)) for r, top in limits.items() if draw(st.booleans())}
        )
    for i in reversed(range(n)):  # children have higher indexes than their parent
        for r in guarantees[i]:
            handed = sum(guarantees[j].get(r, 0) for j in range(n) if parents[j] == i)
            guarantees[i][r] = max(guarantees[i][r], handed)
    docs = []
    for i in range(n):
        guarantee = guarantees[i]
        spec: dict[str, Any] = {
            "strategy": draw(st.sampled_from(["BestEffortFIFO", "StrictFIFO"])),
            "priority": draw(st.sampled_from([0, 0, 1])),
            "weight": draw(st.sampled_from([1, 2, 0.5])),
        }
        if parents[i] is not None:
            spec["parent"] = f"q{parents[i]}"
        if guarantee:
            spec["guarantee"] = guarantee
        ceiling = {}
        for r, top in limits.items():
            if rarely(draw, 6 if preemptive else 3):
                ceiling[r] = guarantee.get(r, 0) + draw(st.integers(0, top // 2))
        if ceiling:
            spec["max"] = ceiling
        if guarantee and rarely(draw, 3):
            spec["lendingLimit"] = {r: draw(st.integers(0, g)) for r, g in guarantee.items()}
        if rarely(draw, 6 if preemptive else 3):
            spec["borrowingLimit"] = {
                r: draw(st.integers(0, top // 2))
                for r, top in limits.items()
                if draw(st.booleans())
            }
        if preemptive:
            spec["preemption"] = {"withinQueue": "LowerPriority", "reclaim": "Any"}
        else:
            preemption = {
                "withinQueue": draw(st.sampled_from(["Never", "LowerPriority"])),
                "reclaim": draw(st.sampled_from(["Never", "Any"])),
            }
            spec["preemption"] = preemption
        docs.append({"kind": "Queue", "metadata": {"name": f"q{i}"}, "spec": spec})
    if draw(st.booleans()):
        docs.append(
            {
                "kind": "SchedulingPolicy",
                "metadata": {"name": "default"},
                "spec": {
                    "gang": {"admitOn": draw(st.sampled_from(["All", "MinMember"]))},
                    "placement": {
                        "strategy": draw(st.sampled_from(["BinPack", "Spread"])),
                        "nodeShape": draw(st.sampled_from(["Optimistic", "Conservative"])),
                    },
                    "fairSharing": {"enabled": draw(st.booleans())},
                },
            }
        )
    return docs


@st.composite
def job_specs(
    draw: st.DrawFn, queues: list[str], leaves: list[str], clusters: list[str], preemptive: bool
) -> list[dict[str, Any]]:
    """0–12 jobs of 1–4 pods, some already running. With ``preemptive`` more of them run and
    all wait in leaf queues, so that pending jobs often have victims."""
    jobs = []
    for i in range(draw(st.integers(2 if preemptive else 0, 12))):
        kind = draw(st.sampled_from(sorted(builders.KINDS)))
        resizable = kind in builders.RESIZABLE
        pick = 2 if preemptive else draw(st.integers(0, 11))
        choices = leaves[:2] if preemptive else queues if pick == 1 else leaves
        queue = "missing" if pick == 0 else draw(st.sampled_from(choices))
        runs = rarely(draw, 2 if preemptive else 3)
        lowest, highest = (0, 3) if not preemptive else (0, 1) if runs else (1, 3)
        pod: dict[str, Any] = {CPU: draw(st.integers(1, 16))}
        gpus = draw(st.integers(0, 8))
        if gpus:
            pod[GPU] = gpus
        if rarely(draw, 3):
            pod[MEMORY] = f"{draw(st.sampled_from([16, 64, 256]))}Gi"
        pods = draw(st.integers(1, 4))
        spec: dict[str, Any] = {
            "name": f"j{i}",
            "kind": kind,
            "queue": queue,
            "priority": draw(st.integers(lowest, highest)),
            "at": draw(st.integers(0, 30)),
        }
        if not resizable and rarely(draw, 4):
            spec["roles"] = [
                {"name": "launcher", "pods": 1, "pod": {CPU: 1}},
                {"name": "worker", "pods": pods, "pod": pod},
            ]
            total = pods + 1
        else:
            spec["pods"], spec["pod"] = pods, pod
            total = pods
        if rarely(draw, 3):
            spec["minMember"] = draw(st.integers(1, total))
        if runs:
            if resizable and rarely(draw, 2):
                names = draw(
                    st.lists(st.sampled_from(clusters), min_size=1, max_size=2, unique=True)
                )
                spec["admitted"] = {c: draw(st.integers(1, 3)) for c in names}
            else:
                spec["admitted"] = draw(st.sampled_from(clusters))
            if rarely(draw, 5):
                spec["inFlight"] = True
        elif not preemptive and rarely(draw, 10):
            spec["backoffUntil"] = BACKOFF
        if rarely(draw, 5):
            spec["placement"] = {"tolerations": [TOLERATION]}
        elif rarely(draw, 8):
            spec["placement"] = {
                "clusters": draw(st.lists(st.sampled_from(clusters), min_size=1, unique=True))
            }
        jobs.append(spec)
    return jobs


@st.composite
def scenarios(draw: st.DrawFn, preemptive: bool = False) -> dict[str, Any]:
    clusters = draw(cluster_specs(preemptive))
    policies = draw(queue_documents(preemptive))
    queues = [d for d in policies if d["kind"] == "Queue"]
    names = [q["metadata"]["name"] for q in queues]
    parents = {q["spec"].get("parent") for q in queues}
    leaves = [n for n in names if n not in parents]
    cluster_names = [c["name"] for c in clusters]
    jobs = draw(job_specs(names, leaves, cluster_names, preemptive))
    scenario = {"policies": policies, "clusters": clusters, "jobs": jobs}
    keep_running_jobs_within_capacity(scenario)
    return scenario


def keep_running_jobs_within_capacity(scenario: dict[str, Any]) -> None:
    """Running jobs must have fitted their nodes: place them first-fit, in order, as the member's
    scheduler would, and make any job that does not fit pending instead."""
    nodes: dict[str, list[Amounts]] = {}
    for c in scenario["clusters"]:
        node = amounts(c["node"])
        nodes[c["name"]] = [dict(node) for _ in range(c["nodes"] - c["used"])]
    names = [c["name"] for c in scenario["clusters"]]
    for spec in scenario["jobs"]:
        admitted = spec.get("admitted")
        if not admitted:
            continue
        # a one-cluster job that does not fit where it was drawn runs on the next that has room
        tries = [admitted] if isinstance(admitted, Mapping) else names[names.index(admitted) :]
        for where in tries:
            spec["admitted"] = where
            trial = {name: [dict(n) for n in free] for name, free in nodes.items()}
            fits = all(
                _first_fit(trial[cluster], requests)
                for cluster, pods in running_pods(spec).items()
                for count, requests in pods
                for _ in range(count)
            )
            if fits:
                nodes = trial
                break
        else:
            spec.pop("admitted")
            spec.pop("inFlight", None)


def _first_fit(nodes: list[Amounts], requests: Amounts) -> bool:
    shaped = {r: v for r, v in requests.items() if r != PODS}
    for node in nodes:
        if all(node.get(r, 0) >= v for r, v in shaped.items()):
            for r, v in shaped.items():
                node[r] -= v
            return True
    return False


# --- scenario arithmetic -----------------------------------------------------------------------
def amounts(spec: Mapping[str, Any] | None) -> Amounts:
    return {k: parse_quantity(v) for k, v in (spec or {}).items()}


def add(total: Amounts, requests: Mapping[str, Fraction], count: int = 1) -> None:
    for r, v in requests.items():
        total[r] = total.get(r, Fraction(0)) + v * count


def total_of(pods: Iterable[tuple[int, Amounts]]) -> Amounts:
    out: Amounts = {}
    for count, requests in pods:
        add(out, requests, count)
    return out


def roles(spec: Mapping[str, Any]) -> list[tuple[int, Amounts]]:
    """(replicas, per-pod requests with pods: 1) per role, as builders.job reads them."""
    written = spec.get("roles") or [{"pods": spec.get("pods", 1), "pod": spec.get("pod")}]
    return [(int(r.get("pods", 1)), {**amounts(r.get("pod")), PODS: Fraction(1)}) for r in written]


def resizable(spec: Mapping[str, Any]) -> bool:
    return spec.get("kind", "PyTorchJob") in builders.RESIZABLE


def gang_counts(spec: Mapping[str, Any], admit_on: AdmitOn) -> list[int]:
    """Pods per role that admission must place: all, or (MinMember) the gang minimum taken from
    the roles in order (builders' roles have no per-role minimum)."""
    replicas = [n for n, _ in roles(spec)]
    minimum = int(spec.get("minMember", sum(replicas)))
    if admit_on == AdmitOn.ALL or minimum >= sum(replicas):
        return replicas
    left, counts = max(minimum, 1), []
    for n in replicas:
        counts.append(min(n, left))
        left -= counts[-1]
    return counts


def running_pods(spec: Mapping[str, Any]) -> dict[str, Pods]:
    """cluster → the pods a running job holds there."""
    admitted = spec.get("admitted")
    if not admitted:
        return {}
    placed = admitted if isinstance(admitted, Mapping) else {admitted: None}
    job_roles = roles(spec)
    out = {}
    for cluster, count in placed.items():
        if resizable(spec) and count is not None:
            out[cluster] = [(int(count), job_roles[0][1])]
        else:
            out[cluster] = list(job_roles)
    return out


def admitted_pods(
    spec: Mapping[str, Any], decision: Decision, admit_on: AdmitOn
) -> dict[str, Pods]:
    """cluster → the pods an Admit (or the nomination of a Preempting) decision places there."""
    job_roles = roles(spec)
    if len(job_roles) == 1:
        return {c.name: [(c.replicas, job_roles[0][1])] for c in decision.clusters}
    counts = gang_counts(spec, admit_on)
    pods = [(n, requests) for n, (_, requests) in zip(counts, job_roles, strict=True) if n]
    return {c.name: pods for c in decision.clusters}


def queue_tree(policies: PolicySet) -> dict[str, set[str]]:
    """queue → the names in its subtree (itself included)."""
    subtree = {q.name: {q.name} for q in policies.queues}
    for q in policies.queues:
        parent, seen = q.parent, set()
        while parent is not None and parent in subtree and parent not in seen:
            seen.add(parent)
            subtree[parent].add(q.name)
            parent = policies.queue(parent).parent  # type: ignore[union-attr]
    return subtree


def name_of(decision: Decision) -> str:
    return decision.workload.split("/")[-1]


def table(result: CycleResult) -> str:
    return "\n".join(
        f"  {d.action:8} {d.workload:28} {d.queue:7} {d.reason:20} "
        f"{[(c.name, c.replicas) for c in d.clusters]} {d.message}"
        for d in result.decisions
    )


# --- running the cycle -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def load(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., PolicySet]:
    """Load policy documents (one file each, optionally named), cached by their YAML."""
    cache: dict[str, PolicySet] = {}

    def loader(documents: list[dict[str, Any]], files: list[str] | None = None) -> PolicySet:
        files = files or [f"{i:02}.yaml" for i in range(len(documents))]
        key = yaml.safe_dump({"documents": documents, "files": files})
        if key not in cache:
            folder = tmp_path_factory.mktemp("policies")
            for name, doc in zip(files, documents, strict=True):
                text = yaml.safe_dump({"apiVersion": "fleetgate.io/v1alpha1", **doc})
                (folder / name).write_text(text)
            cache[key] = load_policy_set([folder])
        return cache[key]

    return loader


def run(scenario: dict[str, Any], policies: PolicySet) -> tuple[Snapshot, CycleResult]:
    snapshot = builders.snapshot(scenario)
    return snapshot, run_cycle(snapshot, policies, builders.NOW)


def free_at_start(snapshot: Snapshot, scenario: Mapping[str, Any]) -> dict[str, Amounts]:
    """cluster → allocatable − allocated − allocating − in-flight reservations."""
    free = {c.name: dict(c.free.items()) for c in snapshot.clusters}
    for spec in scenario["jobs"]:
        if spec.get("inFlight"):
            for cluster, pods in running_pods(spec).items():
                if cluster in free:
                    add(free[cluster], total_of(pods), -1)
    return free


def free_nodes(view: ClusterView, optimistic: bool = False) -> list[tuple[Amounts, int]] | None:
    """The cluster's free nodes by shape from its resource models (None without models): each
    grade's minimum, or (``optimistic``: ``nodeShape: Optimistic`` may admit pods a node of the
    grade may hold) the most a node of the grade may have: just under its max, the last
    grade (whose max is unbounded, and no node shape is declared here) at its minimum."""
    if not view.resource_models or not view.allocatable_modelings:
        return None
    grades = {m.grade: m for m in view.resource_models}
    first, last = min(grades), max(grades)
    out = []
    for grade, count in view.allocatable_modelings:
        floor = {r: lo for r, (lo, _) in grades[grade].ranges.items()} if grade != first else {}
        if optimistic and grade != last:
            floor = {r: hi - Fraction(1, 1000) for r, (_, hi) in grades[grade].ranges.items()}
        out.append(({r: floor.get(r, Fraction(0)) for r in grades[grade].ranges}, count))
    return out


def candidate_problem(spec: Mapping[str, Any], cluster: Mapping[str, Any]) -> str:
    """Why a job may not run on a cluster at all, or ''."""
    placement = spec.get("placement") or {}
    if not cluster.get("ready", True):
        return "cluster is not Ready"
    if "apis" in cluster and spec.get("kind", "PyTorchJob") not in cluster["apis"]:
        return "kind not served"
    if cluster.get("taints") and TOLERATION not in placement.get("tolerations", []):
        return "taint not tolerated"
    if "clusters" in placement and cluster["name"] not in placement["clusters"]:
        return "not in the job's cluster affinity"
    return ""


ANY_SCENARIO = st.one_of(scenarios(), scenarios(preemptive=True))


# --- 1. no cluster over-committed --------------------------------------------------------------
@SETTINGS
@given(scenario=ANY_SCENARIO)
def test_no_cluster_is_over_committed(scenario: dict[str, Any], load: Callable) -> None:
    policies = load(scenario["policies"])
    snapshot, result = run(scenario, policies)
    admit_on = policies.scheduling.gang.admit_on
    jobs = {j["name"]: j for j in scenario["jobs"]}
    placed: dict[str, Pods] = defaultdict(list)
    for d in result.decisions:
        if d.action == Action.ADMIT:
            for cluster, pods in admitted_pods(jobs[name_of(d)], d, admit_on).items():
                placed[cluster] += pods
    free = free_at_start(snapshot, scenario)
    problems = []
    for view in snapshot.clusters:
        taken = total_of(placed.get(view.name, []))
        for r, amount in sorted(taken.items()):
            if amount > 0 and amount > free[view.name].get(r, 0):
                problems.append(
                    f"{view.name}: admitted {amount} {r}, only {free[view.name].get(r, 0)} free"
                )
        optimistic = policies.scheduling.placement.node_shape == NodeShape.OPTIMISTIC
        nodes = free_nodes(view, optimistic)
        if nodes is None:
            continue
        by_shape: Counter[tuple[tuple[str, Fraction], ...]] = Counter()
        for count, requests in placed.get(view.name, []):
            by_shape[tuple(sorted((r, v) for r, v in requests.items() if r in SHAPED and v))] += (
                count
            )
        for shape, count in sorted(by_shape.items()):
            modelled = [(r, v) for r, v in shape if any(r in free for free, _ in nodes)]
            if not modelled:
                continue
            room = sum(n * min(free.get(r, 0) // v for r, v in modelled) for free, n in nodes)
            if count > room:
                problems.append(
                    f"{view.name}: {count} pods of {dict(shape)} admitted, but its free nodes "
                    f"hold at most {room} such pods ({nodes})"
                )
    assert not problems, "\n".join(problems) + "\n" + table(result)


# --- 2. no max exceeded ------------------------------------------------------------------------
MAX_WHILE_VICTIMS_TERMINATE = {
    "policies": [
        {
            "kind": "Queue",
            "metadata": {"name": "q0"},
            "spec": {"max": {CPU: 8}, "preemption": {"withinQueue": "LowerPriority"}},
        },
    ],
    "clusters": [{"name": "c0", "nodes": 1, "node": {GPU: 8, CPU: 96}}],
    "jobs": [
        {"name": "lo", "queue": "q0", "priority": 0, "pod": {CPU: 6}, "admitted": "c0"},
        {"name": "hi", "queue": "q0", "priority": 1, "pod": {CPU: 4}, "at": 0},
        {"name": "small", "queue": "q0", "priority": 1, "pod": {CPU: 4}, "at": 1},
    ],
}
"""hi (4 CPUs) preempts lo (6 CPUs) to stay within q0's max of 8; small (4 CPUs) must not be
admitted into the 2 CPUs lo frees beyond hi's need while lo still runs: 6 + 4 > 8."""


@SETTINGS
@given(scenario=ANY_SCENARIO)
@example(scenario=MAX_WHILE_VICTIMS_TERMINATE)
def test_no_queue_max_is_exceeded(scenario: dict[str, Any], load: Callable) -> None:
    policies = load(scenario["policies"])
    _, result = run(scenario, policies)
    admit_on = policies.scheduling.gang.admit_on
    jobs = {j["name"]: j for j in scenario["jobs"]}
    running: dict[str, Amounts] = defaultdict(dict)
    for spec in scenario["jobs"]:
        for pods in running_pods(spec).values():
            add(running[spec["queue"]], total_of(pods))
    admitted: dict[str, Amounts] = defaultdict(dict)
    for d in result.decisions:
        if d.action == Action.ADMIT:
            for pods in admitted_pods(jobs[name_of(d)], d, admit_on).values():
                add(admitted[d.queue], total_of(pods))
    problems = []
    for queue, members in sorted(queue_tree(policies).items()):
        ceiling = policies.queue(queue).max  # type: ignore[union-attr]
        for r, cap in sorted(ceiling.items()):
            before = sum((running[m].get(r, 0) for m in members), Fraction(0))
            new = sum((admitted[m].get(r, 0) for m in members), Fraction(0))
            if before <= cap and before + new > cap:
                problems.append(
                    f"queue {queue} max {cap} {r}: {before} running + {new} admitted = "
                    f"{before + new}"
                )
    assert not problems, "\n".join(problems) + "\n" + table(result)


# --- 3. gang all-or-nothing --------------------------------------------------------------------
@SETTINGS
@given(scenario=ANY_SCENARIO)
def test_gangs_are_all_or_nothing(scenario: dict[str, Any], load: Callable) -> None:
    policies = load(scenario["policies"])
    _, result = run(scenario, policies)
    admit_on = policies.scheduling.gang.admit_on
    jobs = {j["name"]: j for j in scenario["jobs"]}
    clusters = {c["name"]: c for c in scenario["clusters"]}
    problems = []
    for d in result.decisions:
        spec = jobs[name_of(d)]
        where = [(c.name, c.replicas) for c in d.clusters]
        gang = sum(gang_counts(spec, admit_on))
        placed = sum(c.replicas for c in d.clusters)
        if d.action == Action.ADMIT:
            if placed != gang:
                problems.append(f"{d.binding}: admitted {where}, the gang is {gang} pods")
            if len({n for n, _ in where}) != len(where) or any(n <= 0 for _, n in where):
                problems.append(f"{d.binding}: admitted {where}, clusters repeated or empty")
            if len(where) != 1 and not resizable(spec):
                problems.append(f"{d.binding}: a {spec['kind']} split across {where}")
            for name, _ in where:
                why = candidate_problem(spec, clusters[name])
                if why:
                    problems.append(f"{d.binding}: admitted to {name}: {why}")
        elif d.reason == Reason.PREEMPTING:
            if len(where) != 1 or placed != gang:
                problems.append(f"{d.binding}: nominated {where}, the gang is {gang} pods")
            if not d.victims:
                problems.append(f"{d.binding}: preempting, but no victims")
            for name, _ in where:
                why = candidate_problem(spec, clusters[name])
                if why:
                    problems.append(f"{d.binding}: nominated to {name}: {why}")
        elif d.action == Action.PREEMPT:
            held = sorted(running_pods(spec))
            if sorted(n for n, _ in where) != held or placed != 0:
                problems.append(f"{d.binding}: preempted with clusters {where}, it runs on {held}")
        elif where:
            problems.append(f"{d.binding}: {d.action} {d.reason} carries clusters {where}")
    assert not problems, "\n".join(problems) + "\n" + table(result)


def shuffle_scenario(scenario: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """The same scenario with clusters, jobs and policy documents in another order. Running
    jobs keep their relative order: builders.py fills nodes first-fit in that order, so it is
    part of what the fleet is (which nodes are free), not just of how it is written."""
    shuffled = copy.deepcopy(scenario)
    rng.shuffle(shuffled["clusters"])
    rng.shuffle(shuffled["policies"])
    jobs = shuffled["jobs"]
    rng.shuffle(jobs)
    running = iter([j for j in scenario["jobs"] if j.get("admitted")])
    shuffled["jobs"] = [copy.deepcopy(next(running)) if j.get("admitted") else j for j in jobs]
    return shuffled


# --- 4. determinism ----------------------------------------------------------------------------
@SETTINGS
@given(scenario=ANY_SCENARIO, rng=st.randoms(use_true_random=False))
def test_same_input_in_any_order_gives_the_same_decisions(
    scenario: dict[str, Any], rng: random.Random, load: Callable
) -> None:
    policies = load(scenario["policies"])
    snapshot, result = run(scenario, policies)
    expected = result.to_json()
    assert run_cycle(snapshot, policies, builders.NOW).to_json() == expected, "second run differs"
    cache = JobCache()
    Cycle(snapshot, policies, builders.NOW, cache).run()
    warm = Cycle(snapshot, policies, builders.NOW, cache).run()
    assert warm.to_json() == expected, "a run with a warm JobCache differs"

    shuffled = shuffle_scenario(scenario, rng)
    files = [f"{name}.yaml" for name in rng.sample(range(100), len(shuffled["policies"]))]
    shuffled_policies = load(shuffled["policies"], files)
    shuffled_snapshot = builders.snapshot(shuffled)
    assert shuffled_snapshot == snapshot, "the test's shuffle changed the fleet"
    shuffled_result = run_cycle(shuffled_snapshot, shuffled_policies, builders.NOW)
    assert shuffled_result.to_json() == expected, (
        "shuffled policy documents and files give other decisions:\n"
        f"in order:\n{table(result)}\nshuffled:\n{table(shuffled_result)}"
    )
    # Snapshot's tuples are documented as sorted, but the cycle sorts what it reads itself
    unsorted_snapshot = dataclasses.replace(
        snapshot,
        clusters=tuple(rng.sample(snapshot.clusters, len(snapshot.clusters))),
        bindings=tuple(rng.sample(snapshot.bindings, len(snapshot.bindings))),
        priority_classes=tuple(
            rng.sample(snapshot.priority_classes, len(snapshot.priority_classes))
        ),
    )
    unsorted = run_cycle(unsorted_snapshot, shuffled_policies, builders.NOW)
    assert unsorted.to_json() == expected, (
        "shuffled clusters, bindings and priority classes give other decisions:\n"
        f"in order:\n{table(result)}\nshuffled:\n{table(unsorted)}"
    )


# --- 5. no preemption cycles -------------------------------------------------------------------
def check_one_cycle_preemptions(result: CycleResult) -> list[str]:
    problems = []
    seen = Counter(d.binding for d in result.decisions)
    problems += [f"{b}: {n} decisions in one cycle" for b, n in seen.items() if n > 1]
    preemptors = {d.binding for d in result.decisions if d.reason == Reason.PREEMPTING}
    victims = {d.binding: d.preemptor for d in result.decisions if d.action == Action.PREEMPT}
    admitted = {d.binding for d in result.decisions if d.action == Action.ADMIT}
    for victim, preemptor in sorted(victims.items()):
        if victim in preemptors:
            problems.append(f"{victim} is preempted and preempting in the same cycle")
        if victim in admitted:
            problems.append(f"{victim} is preempted and admitted in the same cycle")
        if preemptor not in preemptors:
            problems.append(f"{victim} is preempted for {preemptor}, which is not preempting")
    for d in result.decisions:
        if d.reason == Reason.PREEMPTING:
            for v in d.victims:
                if victims.get(v) != d.binding:
                    problems.append(f"{d.binding} waits for {v}, which is not preempted for it")
    return problems


def apply_preemptions(scenario: dict[str, Any], result: CycleResult, settled: bool) -> None:
    """Admitted jobs start; victims are pending again; with ``settled`` the victims are gone
    and each preemptor runs on the cluster it was nominated to (otherwise it keeps waiting)."""
    jobs = {j["name"]: j for j in scenario["jobs"]}
    for d in result.decisions:
        spec = jobs[name_of(d)]
        if d.action == Action.ADMIT or (settled and d.reason == Reason.PREEMPTING):
            spec["admitted"] = {c.name: c.replicas for c in d.clusters}
            spec.pop("inFlight", None)
        elif d.action == Action.PREEMPT:
            spec.pop("admitted", None)
            spec.pop("inFlight", None)


@SETTINGS
@given(scenario=scenarios(preemptive=True))
def test_no_preemption_cycles(scenario: dict[str, Any], load: Callable) -> None:
    policies = load(scenario["policies"])
    _, first = run(scenario, policies)
    problems = check_one_cycle_preemptions(first)
    preempted_by = {d.binding: d.preemptor for d in first.decisions if d.action == Action.PREEMPT}
    tables = [table(first)]
    for settled in (False, True):
        later = copy.deepcopy(scenario)
        apply_preemptions(later, first, settled)
        _, second = run(later, policies)
        tables.append(table(second))
        problems += check_one_cycle_preemptions(second)
        for d in second.decisions:
            if d.action == Action.PREEMPT and preempted_by.get(d.preemptor) == d.binding:
                problems.append(
                    f"{d.preemptor} was preempted for {d.binding} and now preempts it "
                    f"({'victims gone' if settled else 'victims pending'})"
                )
    assert not problems, "\n".join(problems) + "\n" + "\n-- next cycle --\n".join(tables)


WASTED_ROOM = {
    "policies": [
        {
            "kind": "Queue",
            "metadata": {"name": "q0"},
            "spec": {"priority": 1, "preemption": {"withinQueue": "LowerPriority"}},
        },
        {"kind": "Queue", "metadata": {"name": "q1"}, "spec": {}},
    ],
    "clusters": [{"name": "c0", "nodes": 1, "node": {GPU: 8, CPU: 96}, "models": False}],
    "jobs": [
        {"name": "lo", "queue": "q0", "priority": 0, "pod": {GPU: 4}, "admitted": "c0"},
        {"name": "hi", "queue": "q0", "priority": 3, "pod": {GPU: 8}},
        {"name": "other", "queue": "q1", "priority": 0, "pod": {GPU: 4}},
    ],
}
"""hi preempts lo for 8 GPUs on c0 (4 free + lo's 4); then other takes the 4 free GPUs."""

WASTED_QUOTA = {
    "policies": [
        {
            "kind": "Queue",
            "metadata": {"name": "q0"},
            "spec": {"max": {CPU: 4}, "preemption": {"withinQueue": "LowerPriority"}},
        },
    ],
    "clusters": [{"name": "c0", "nodes": 1, "node": {GPU: 8, CPU: 96}}],
    "jobs": [
        {"name": "lo", "queue": "q0", "priority": 0, "pod": {CPU: 1}, "admitted": "c0"},
        {"name": "hi", "queue": "q0", "priority": 1, "pod": {CPU: 4}, "at": 0},
        {"name": "small", "queue": "q0", "priority": 1, "pod": {CPU: 1}, "at": 1},
    ],
}
"""hi preempts lo to stay within q0's max of 4 CPUs (1 + 4); then small takes 1 CPU of it."""


@SETTINGS
@given(scenario=scenarios(preemptive=True))
@example(scenario=WASTED_ROOM)
@example(scenario=WASTED_QUOTA)
def test_preemption_makes_room_that_stays_free(scenario: dict[str, Any], load: Callable) -> None:
    """The issue: never preempt unless the victims actually make the job fit on one cluster.
    Once the victims are gone, the preemptor fits its nominated cluster and its quota, after
    everything else the same cycle admitted."""
    policies = load(scenario["policies"])
    snapshot, result = run(scenario, policies)
    admit_on = policies.scheduling.gang.admit_on
    jobs = {j["name"]: j for j in scenario["jobs"]}
    by_binding = {d.binding: d for d in result.decisions}
    free = free_at_start(snapshot, scenario)
    usage: dict[str, Amounts] = defaultdict(dict)  # queue → running, after this cycle
    for spec in scenario["jobs"]:
        for pods in running_pods(spec).values():
            add(usage[spec["queue"]], total_of(pods))
    for d in result.decisions:
        spec = jobs[name_of(d)]
        if d.action == Action.ADMIT:
            for cluster, pods in admitted_pods(spec, d, admit_on).items():
                add(free[cluster], total_of(pods), -1)
                add(usage[d.queue], total_of(pods))
    tree = queue_tree(policies)
    problems = []
    for d in result.decisions:
        if d.reason != Reason.PREEMPTING:
            continue
        spec = jobs[name_of(d)]
        ((cluster, pods),) = admitted_pods(spec, d, admit_on).items()
        room = dict(free[cluster])
        gone: dict[str, Amounts] = defaultdict(dict)
        for v in d.victims:
            victim = jobs[name_of(by_binding[v])]
            for name, held in running_pods(victim).items():
                add(gone[victim["queue"]], total_of(held))
                if name == cluster:
                    add(room, total_of(held))
        need = total_of(pods)
        for r, amount in sorted(need.items()):
            if amount > room.get(r, 0):
                problems.append(
                    f"{d.binding} preempts {list(d.victims)} for {amount} {r} on {cluster}, "
                    f"but after this cycle's admissions only {room.get(r, 0)} would be free"
                )
        for queue, members in sorted(tree.items()):
            if spec["queue"] not in members:
                continue
            for r, cap in sorted(policies.queue(queue).max.items()):  # type: ignore[union-attr]
                after = sum((usage[m].get(r, 0) - gone[m].get(r, 0) for m in members), Fraction(0))
                if need.get(r, 0) and after + need[r] > cap:
                    problems.append(
                        f"{d.binding} preempts {list(d.victims)}, but queue {queue} would hold "
                        f"{after} + {need[r]} {r} > max {cap}"
                    )
    assert not problems, "\n".join(problems) + "\n" + table(result)


# --- 6. reasons, actions, positions ------------------------------------------------------------
@SETTINGS
@given(scenario=ANY_SCENARIO)
def test_every_decision_has_a_reason_an_action_and_a_position(
    scenario: dict[str, Any], load: Callable
) -> None:
    policies = load(scenario["policies"])
    _, result = run(scenario, policies)
    problems = []
    for d in result.decisions:
        if d.reason not in set(Reason):
            problems.append(f"{d.binding}: reason {d.reason!r} is not a Reason")
        expected = (
            Action.ADMIT
            if d.reason == Reason.ADMITTED
            else Action.PREEMPT
            if d.reason == Reason.PREEMPTED
            else Action.REJECT
            if d.reason in NEVER
            else Action.PENDING
        )
        if d.action != expected:
            problems.append(f"{d.binding}: action {d.action} with reason {d.reason}")
        if not d.message:
            problems.append(f"{d.binding}: {d.reason} without a message")
        if d.action == Action.PENDING and d.position is None:
            problems.append(f"{d.binding}: {d.action} {d.reason} without a position")
        if d.action in (Action.ADMIT, Action.PREEMPT) and d.position is not None:
            problems.append(f"{d.binding}: {d.action} {d.reason} with position {d.position}")
    positions: dict[str, list[int]] = defaultdict(list)
    for d in result.decisions:
        if d.position is not None:
            positions[d.queue].append(d.position)
    for queue, found in sorted(positions.items()):
        if sorted(found) != list(range(1, len(found) + 1)):
            problems.append(f"queue {queue!r}: positions {sorted(found)}, not 1..{len(found)}")
    decided = Counter(d.binding for d in result.decisions if d.action != Action.PREEMPT)
    for spec in scenario["jobs"]:
        binding = f"team/{spec['name']}-{spec['kind'].lower()}"
        want = 0 if spec.get("admitted") else 1
        if decided[binding] != want:
            problems.append(f"{binding}: {decided[binding]} decisions, expected {want}")
    assert not problems, "\n".join(problems) + "\n" + table(result)


def test_the_strategies_reach_the_interesting_cases(load: Callable) -> None:
    """A fixed sample of scenarios admits, waits and preempts (so the properties above are not
    vacuous)."""
    reasons: Counter[str] = Counter()
    strategy = st.tuples(scenarios(), scenarios(preemptive=True))
    wanted = ("Admitted", "Preempting", "Preempted", "NoClusterFits", "WaitingForQuota")

    def draw_batch(number: int) -> None:
        @seed(number)
        @settings(max_examples=60, deadline=None, database=None)
        @given(pair=strategy)
        def sample(pair: tuple[dict[str, Any], dict[str, Any]]) -> None:
            for scenario in pair:
                _, result = run(scenario, load(scenario["policies"]))
                reasons.update(str(d.reason) for d in result.decisions)

        sample()

    until_covered(draw_batch, lambda: all(reasons[reason] for reason in wanted))
    for reason in wanted:
        assert reasons[reason], f"no {reason} decision in the sample: {dict(reasons)}"
    # Splits are rare in this sample; tests/scenarios/a-resizable-job-is-split-* pins them down.
