"""``spec.placement.cost``: cheapest first, the strategy only breaking ties; unpriced clusters;
and a score that fails on a cluster never makes that cluster win."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.cycle import run_cycle
from engine.errors import PolicyLoadError
from tests.cycle import builders
from tests.cycle.test_scenarios import decision_for, load_policies

NODE = {"nvidia.com/gpu": 8, "cpu": 64}
PRICE = "fleetgate.io/gpu-hour-price"


def policies(tmp_path: Path, placement: dict[str, Any]):
    tmp_path.mkdir(parents=True, exist_ok=True)
    return load_policies(
        [
            {"kind": "Queue", "metadata": {"name": "q"}, "spec": {}},
            {
                "kind": "SchedulingPolicy",
                "metadata": {"name": "p"},
                "spec": {"placement": placement},
            },
        ],
        tmp_path,
    )


def gpu_cluster(name: str, price: str | None, nodes: int = 4, used: int = 0) -> dict[str, Any]:
    labels = {PRICE: price} if price is not None else {}
    return {"name": name, "nodes": nodes, "used": used, "node": NODE, "labels": labels}


def decide(policy_set, clusters, jobs) -> dict[str, Any]:
    result = run_cycle(
        builders.snapshot({"clusters": clusters, "jobs": jobs}), policy_set, builders.NOW
    )
    return {j["name"]: decision_for(result, j["name"]) for j in jobs}


def placed(decision) -> dict[str, int]:
    assert decision is not None and decision.action == "Admit", decision
    return {c.name: c.replicas for c in decision.clusters}


def gpu_job(name: str, pods: int = 1, kind: str = "PyTorchJob", at: int = 1) -> dict[str, Any]:
    pod = {"nvidia.com/gpu": 8, "cpu": 8}
    return {"name": name, "kind": kind, "queue": "q", "pods": pods, "pod": pod, "at": at}


COST = {"label": PRICE, "resource": "nvidia.com/gpu"}


def test_the_cheapest_cluster_wins_over_the_one_binpack_would_fill(tmp_path):
    # pricey is half full: BinPack alone fills it; with cost the cheaper, emptier one wins
    clusters = [gpu_cluster("pricey", "3.20", used=2), gpu_cluster("cheap", "2.45")]
    job = [gpu_job("a")]
    assert placed(decide(policies(tmp_path / "a", {}), clusters, job)["a"]) == {"pricey": 1}
    with_cost = policies(tmp_path / "b", {"cost": COST})
    decision = decide(with_cost, clusters, job)["a"]
    assert placed(decision) == {"cheap": 1}
    assert decision.message == "admitted to cheap at cost 19.6"  # 8 GPUs at 2.45


def test_between_equal_prices_the_strategy_decides(tmp_path):
    clusters = [gpu_cluster("a-empty", "1.5"), gpu_cluster("b-full", "1.5", used=2)]
    binpack = policies(tmp_path / "a", {"cost": COST})
    assert placed(decide(binpack, clusters, [gpu_job("j")])["j"]) == {"b-full": 1}
    spread = policies(tmp_path / "b", {"cost": COST, "strategy": "Spread"})
    assert placed(decide(spread, clusters, [gpu_job("j")])["j"]) == {"a-empty": 1}


def test_a_job_that_asks_nothing_of_the_priced_resource_ignores_prices(tmp_path):
    clusters = [
        gpu_cluster("cheap", "1"),
        gpu_cluster("pricey", "9", used=2),
        gpu_cluster("unpriced", None, used=3),
    ]
    cpu_job = {"name": "c", "queue": "q", "pods": 1, "pod": {"cpu": 60}, "at": 1}
    decided = decide(policies(tmp_path, {"cost": COST}), clusters, [cpu_job])
    assert placed(decided["c"]) == {"unpriced": 1}  # BinPack: the fullest, price or none
    assert decided["c"].message == "admitted to unpriced"  # nothing to pay


def test_unpriced_clusters_are_excluded_by_default_and_say_why(tmp_path):
    clusters = [gpu_cluster("bad", "n/a", 5), gpu_cluster("none", None, 5), gpu_cluster("ok", "4")]
    clusters.append(gpu_cluster("negative", "-1", 5))
    decided = decide(policies(tmp_path, {"cost": COST}), clusters, [gpu_job("a", pods=5)])
    decision = decided["a"]  # 5 nodes' worth: only the excluded clusters could hold it
    assert (decision.action, decision.reason) == ("Reject", "GangTooLarge")
    reasons = dict(decision.cluster_reasons)
    assert reasons["bad"] == f"no price: label {PRICE}='n/a' is not a number ≥ 0"
    assert reasons["negative"] == f"no price: label {PRICE}='-1' is not a number ≥ 0"
    assert reasons["none"] == f"no price: no label {PRICE}"


def test_unpriced_last_ranks_them_after_every_priced_cluster(tmp_path):
    clusters = [gpu_cluster("none", None, used=1), gpu_cluster("dear", "99")]
    last = policies(tmp_path, {"cost": {**COST, "unpriced": "Last"}})
    jobs = [gpu_job("a", pods=2), gpu_job("b", pods=3, at=2)]
    decided = decide(last, clusters, jobs)
    assert placed(decided["a"]) == {"dear": 2}  # BinPack alone: none, left fuller
    assert placed(decided["b"]) == {"none": 3}  # dear has 2 nodes left
    assert decided["b"].message == "admitted to none at an unknown cost"


def test_a_split_fills_the_cheapest_clusters_first(tmp_path):
    # equally empty: by name alone c1 would be filled first
    clusters = [gpu_cluster("c1", "3", nodes=2), gpu_cluster("c2", "2", nodes=2)]
    clusters.append(gpu_cluster("c3", "1", nodes=2))
    decided = decide(policies(tmp_path, {"cost": COST}), clusters, [gpu_job("s", 5, "Job")])
    assert placed(decided["s"]) == {"c3": 2, "c2": 2, "c1": 1}
    # 16 GPUs at 1, 16 at 2, 8 at 3
    assert decided["s"].message == "split across c3=2, c2=2, c1=1 at cost 72"


def test_cost_without_a_resource_is_per_job(tmp_path):
    clusters = [gpu_cluster("cheap", "1"), gpu_cluster("pricey", "2", used=2)]
    per_job = policies(tmp_path, {"cost": {"label": PRICE}})
    cpu_job = {"name": "c", "queue": "q", "pods": 1, "pod": {"cpu": 8}, "at": 1}
    assert placed(decide(per_job, clusters, [cpu_job])["c"]) == {"cheap": 1}


@pytest.mark.parametrize(
    ("cost", "says"),
    [
        ({"resource": "nvidia.com/gpu"}, "'label' is a required property"),
        ({"label": PRICE, "unpriced": "Free"}, "'Free' is not one of ['Exclude', 'Last']"),
        ({"label": PRICE, "per": "gpu"}, "unknown field 'per'; known: label, resource, unpriced"),
    ],
)
def test_the_schema_checks_the_cost_field(tmp_path, cost, says):
    with pytest.raises(PolicyLoadError) as err:
        policies(tmp_path, {"cost": cost})
    assert any(says in issue.message for issue in err.value.issues), err.value


# --- failing scores ---------------------------------------------------------------------------


def test_a_failing_score_never_makes_its_cluster_win(tmp_path):
    """A price written as a negative score: the unpriced cluster's score fails. Counted as 0 it
    would beat every price; it ranks after the clusters where every score succeeded."""
    placement = {
        "scores": [
            {
                "name": "cheapest",
                "weight": 1000,
                "expression": f'-double(cluster.labels["{PRICE}"])',
            }
        ]
    }
    clusters = [gpu_cluster("priced", "2.45"), gpu_cluster("unpriced", None)]
    decision = decide(policies(tmp_path, placement), clusters, [gpu_job("a")])["a"]
    assert placed(decision) == {"priced": 1}
    assert "score cheapest failed on unpriced (counted as 0), ranked last" in decision.message


def test_a_cluster_where_a_score_failed_still_takes_a_job_no_other_can_hold(tmp_path):
    placement = {"scores": [{"name": "x", "expression": 'double(cluster.labels["x"])'}]}
    clusters = [
        {"name": "big", "nodes": 4, "node": NODE},
        {"name": "small", "nodes": 1, "node": NODE, "labels": {"x": "1"}},
    ]
    decision = decide(policies(tmp_path, placement), clusters, [gpu_job("a", pods=2)])["a"]
    assert placed(decision) == {"big": 2}
    assert "score x failed on big (counted as 0), ranked last" in decision.message


# --- property: never a dearer cluster than one that fits --------------------------------------

_SETS: dict[str, Any] = {}
_FOLDERS: list[tempfile.TemporaryDirectory[str]] = []  # removed when the process ends


def _policy_set(spec: dict[str, Any]):
    """One loaded policy set per spec, for all examples (hypothesis runs many)."""
    key = json.dumps(spec, sort_keys=True)
    if key not in _SETS:
        _FOLDERS.append(folder := tempfile.TemporaryDirectory(prefix="fleetgate-test-"))
        _SETS[key] = policies(Path(folder.name) / "p", spec)
    return _SETS[key]


@st.composite
def priced_fleets(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    count = draw(st.integers(2, 5))
    prices = st.one_of(st.none(), st.sampled_from(["0", "1", "1.5", "2", "3.25", "n/a"]))
    clusters = [
        gpu_cluster(f"c{i}", draw(prices), nodes=(n := draw(st.integers(1, 4))),
                    used=draw(st.integers(0, n)))
        for i in range(count)
    ]  # fmt: skip
    kinds = st.sampled_from(["PyTorchJob", "Job"])
    jobs = [
        gpu_job(f"j{k}", pods=draw(st.integers(1, 3)), kind=draw(kinds), at=k)
        for k in range(draw(st.integers(1, 4)))
    ]
    return clusters, jobs


@settings(max_examples=40, deadline=None, database=None, derandomize=True)
@given(fleet=priced_fleets(), strategy=st.sampled_from(["BinPack", "Spread"]))
def test_a_job_placed_whole_never_goes_to_a_dearer_cluster_that_fits(fleet, strategy):
    """In queue order, each job placed on one cluster went to a priced cluster no dearer than
    any other priced cluster that had room for it then; unpriced clusters are never used."""
    clusters, jobs = fleet
    decided = decide(_policy_set({"cost": COST, "strategy": strategy}), clusters, jobs)
    price = {c["name"]: c["labels"].get(PRICE) for c in clusters}
    free = {c["name"]: c["nodes"] - c["used"] for c in clusters}  # whole nodes: 1 pod each
    for job in jobs:
        decision = decided[job["name"]]
        if decision is None or decision.action != "Admit":
            continue
        where = {c.name: c.replicas for c in decision.clusters}
        assert all(price[n] not in (None, "n/a") for n in where), (where, price)
        if len(where) == 1:
            (chosen,) = where
            cheapest = min(
                float(price[n])
                for n in free
                if price[n] not in (None, "n/a") and free[n] >= job["pods"]
            )
            assert float(price[chosen]) == cheapest, (chosen, price, free)
        for n, pods in where.items():
            free[n] -= pods
