"""The placement cookbook (``examples/policies/*``): every recipe is a valid policy set with a
snapshot and a README, and each recipe's claim holds on the dry-run JSON of its snapshot.

The READMEs' command blocks are replayed by ``tests/test_readme.py``; this file checks what
the outputs mean, so a change that keeps a recipe valid but breaks its point fails here.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleetgate.cli import main
from tests.conftest import REPO

COOKBOOK = REPO / "examples" / "policies"
RECIPES = sorted(p.name for p in COOKBOOK.iterdir() if p.is_dir())
NOW = "2025-03-10T10:00:00Z"


def fleetgate(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = main(list(argv))
    return code, out.getvalue()


def dry_run(policies: Path, snapshot: Path, now: str = NOW) -> dict[str, dict[str, Any]]:
    """Workload name → its decision."""
    code, out = fleetgate(
        "dry-run", "--policies", str(policies), "--snapshot", str(snapshot), "--now", now,
        "-o", "json",
    )  # fmt: skip
    assert code == 0, out
    return {d["workload"].rsplit("/", 1)[1]: d for d in json.loads(out)["decisions"]}


def decide(recipe: str, now: str = NOW) -> dict[str, dict[str, Any]]:
    return dry_run(COOKBOOK / recipe / "policies", COOKBOOK / recipe / "snapshot.yaml", now)


def placed(decision: dict[str, Any]) -> dict[str, int]:
    assert decision["action"] == "Admit", decision
    return {c["name"]: c["replicas"] for c in decision["clusters"]}


def edited_copy(tmp_path: Path, recipe: str, edit_policy=None, edit_snapshot=None) -> Path:
    """A copy of the recipe with its SchedulingPolicy and/or snapshot changed."""
    target = tmp_path / recipe
    (target / "policies").mkdir(parents=True)
    for file in (COOKBOOK / recipe / "policies").iterdir():
        text = file.read_text()
        if edit_policy and file.name == "scheduling.yaml":
            doc = yaml.safe_load(text)
            edit_policy(doc)
            text = yaml.safe_dump(doc)
        (target / "policies" / file.name).write_text(text)
    snapshot = yaml.safe_load((COOKBOOK / recipe / "snapshot.yaml").read_text())
    if edit_snapshot:
        edit_snapshot(snapshot["items"])
    (target / "snapshot.yaml").write_text(yaml.safe_dump(snapshot))
    return target


def item(items: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    return next(i for i in items if i["kind"] == kind and i["metadata"]["name"] == name)


def without_cost(doc: dict[str, Any]) -> None:
    del doc["spec"]["placement"]["cost"]


# --- every recipe ----------------------------------------------------------------------------


def test_the_cookbook_has_the_five_recipes_and_the_docs_link_each():
    assert RECIPES == [
        "cheapest-gpu",
        "data-locality",
        "disaster-recovery",
        "spillover",
        "spread-regions",
    ]
    page = (REPO / "docs" / "placement-cookbook.md").read_text()
    for recipe in RECIPES:
        assert f"(../examples/policies/{recipe}/README.md)" in page
    assert "(placement-cookbook.md)" in (REPO / "docs" / "README.md").read_text()


@pytest.mark.parametrize("recipe", RECIPES)
def test_each_recipe_validates_and_its_readme_shows_its_dry_run(recipe):
    code, out = fleetgate("validate", str(COOKBOOK / recipe / "policies"))
    assert code == 0, out
    readme = (COOKBOOK / recipe / "README.md").read_text()
    assert (
        f"$ fleetgate dry-run --policies examples/policies/{recipe}/policies "
        f"--snapshot examples/policies/{recipe}/snapshot.yaml --now "
    ) in readme


@pytest.mark.parametrize("recipe", RECIPES)
def test_each_snapshot_is_small_and_every_job_is_decided(recipe):
    items = yaml.safe_load((COOKBOOK / recipe / "snapshot.yaml").read_text())["items"]
    kinds = [i["kind"] for i in items]
    assert 2 <= kinds.count("Cluster") <= 4
    assert 2 <= kinds.count("ResourceBinding") <= 5
    assert len(decide(recipe)) == kinds.count("ResourceBinding")


# --- cheapest cluster first ------------------------------------------------------------------


def test_cheapest_takes_the_cheapest_cluster_of_the_requested_gpu_model():
    decisions = decide("cheapest-gpu")
    # h100-west ($2.45) over h100-east ($3.20), which BinPack alone would fill; never the
    # cheaper a100-central ($1.60), whose model the job did not ask for
    assert placed(decisions["llm-pretrain"]) == {"h100-west": 2}
    assert placed(decisions["vision-finetune"]) == {"a100-central": 1}
    assert placed(decisions["eval-sweep"]) == {"a100-central": 4}


def test_cheapest_without_its_cost_binpack_picks_the_pricier_cluster(tmp_path):
    copy = edited_copy(tmp_path, "cheapest-gpu", edit_policy=without_cost)
    decisions = dry_run(copy / "policies", copy / "snapshot.yaml")
    assert placed(decisions["llm-pretrain"]) == {"h100-east": 2}


def test_cheapest_an_unpriced_cluster_is_no_candidate(tmp_path):
    def unpriced(items: list[dict[str, Any]]) -> None:
        labels = item(items, "Cluster", "h100-east")["metadata"]["labels"]
        labels["fleetgate.io/gpu-hour-price"] = "n/a"

    copy = edited_copy(tmp_path, "cheapest-gpu", edit_snapshot=unpriced)
    decisions = dry_run(copy / "policies", copy / "snapshot.yaml")
    assert placed(decisions["llm-pretrain"]) == {"h100-west": 2}


# --- data locality ---------------------------------------------------------------------------


def test_data_locality_prefers_the_data_region_and_waits_when_it_is_required():
    decisions = decide("data-locality")
    assert placed(decisions["embed-eu-docs"]) == {"gpu-frankfurt": 1}
    assert placed(decisions["rank-eu-clicks"]) == {"gpu-virginia": 1}  # preferred, full
    audit = decisions["audit-eu-pii"]
    assert (audit["action"], audit["reason"]) == ("Pending", "NoClusterFits")
    assert audit["clusterReasons"]["gpu-virginia"] == "filter data-region-required rejects it"
    assert placed(decisions["train-us-logs"]) == {"gpu-virginia": 1}


# --- spillover -------------------------------------------------------------------------------


def test_spillover_waits_for_the_cloud_until_the_wait_is_over():
    before = decide("spillover", "2025-03-10T10:00:00Z")  # nightly-train has waited 20m
    train = before["nightly-train"]
    assert (train["action"], train["reason"]) == ("Pending", "NoClusterFits")
    assert train["clusterReasons"]["cloud-burst"] == "filter cloud-after-30m rejects it"
    after = decide("spillover", "2025-03-10T10:15:00Z")  # 35m
    assert placed(after["nightly-train"]) == {"cloud-burst": 2}
    for decisions in (before, after):  # on-prem first while it has room, even after the wait
        assert placed(decisions["hparam-sweep"]) == {"onprem-dc1": 1}
        assert placed(decisions["quick-eval"]) == {"onprem-dc1": 1}


def test_spillover_without_its_cost_a_job_past_the_wait_goes_to_the_cloud(tmp_path):
    copy = edited_copy(tmp_path, "spillover", edit_policy=without_cost)
    decisions = dry_run(copy / "policies", copy / "snapshot.yaml")
    assert placed(decisions["hparam-sweep"]) == {"cloud-burst": 1}


# --- disaster recovery -----------------------------------------------------------------------


def test_disaster_recovery_requeues_to_the_dr_partner_in_another_region():
    decisions = decide("disaster-recovery")
    # us-west-2: not gpu-eu (BinPack), nor gpu-east-b (its home region, where it failed)
    assert placed(decisions["llama-pretrain"]) == {"gpu-west": 2}
    assert placed(decisions["resnet-eval"]) == {"gpu-east-b": 1}  # failed nowhere: home
    assert placed(decisions["eu-finetune"]) == {"gpu-eu": 1}


def test_disaster_recovery_without_the_region_filter_stays_in_the_failed_region(tmp_path):
    def without_filter(doc: dict[str, Any]) -> None:
        del doc["spec"]["placement"]["filters"]

    copy = edited_copy(tmp_path, "disaster-recovery", edit_policy=without_filter)
    decisions = dry_run(copy / "policies", copy / "snapshot.yaml")
    assert placed(decisions["llama-pretrain"]) == {"gpu-east-b": 2}


def test_disaster_recovery_the_exclusion_holds_after_the_cluster_is_back(tmp_path):
    def recovered(items: list[dict[str, Any]]) -> None:
        east = item(items, "Cluster", "gpu-east")
        east["spec"].pop("taints")
        east["status"]["conditions"][0].update(status="True", reason="ClusterReady")

    copy = edited_copy(tmp_path, "disaster-recovery", edit_snapshot=recovered)
    decisions = dry_run(copy / "policies", copy / "snapshot.yaml")
    assert placed(decisions["llama-pretrain"]) == {"gpu-west": 2}  # excluded until 10:47
    assert placed(decisions["resnet-eval"]) == {"gpu-east-b": 1}  # home: the fuller one
    later = dry_run(copy / "policies", copy / "snapshot.yaml", "2025-03-10T11:00:00Z")
    assert placed(later["llama-pretrain"]) == {"gpu-east-b": 2}  # home again


# --- spread across regions -------------------------------------------------------------------


def test_spread_divides_a_resizable_job_across_the_allowed_regions():
    decisions = decide("spread-regions")
    # 20 pods, 16:8 room: 13 and 6, the one left over to the primary region (us-east-1);
    # gpu-eu could hold all 20 but its region is not allowed
    assert placed(decisions["embed-corpus"]) == {"gpu-east": 14, "gpu-west": 6}
    # fits one cluster, divided all the same: 2:2 room left, one pod per region
    assert placed(decisions["embed-refresh"]) == {"gpu-east": 1, "gpu-west": 1}
