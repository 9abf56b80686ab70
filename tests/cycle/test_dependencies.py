"""Job dependencies in the scheduling cycle (issue 20): ``fleetgate.io/after`` and
``fleetgate.io/same-cluster-as`` on the template, ``spec.dependencies`` in the SchedulingPolicy.

The rules by example are scenario tables (tests/scenarios/*dependenc*, *pipeline*, *diamond*,
*same-cluster-as*); here: reading references and outcomes, the policy field, arrivals, and two
properties on random fleets: no job is admitted before its dependencies are met, and
dependencies never change the decisions of jobs that have none.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from engine.cycle import Cycle, run_cycle
from engine.cycle.dependencies import Ref, parse
from engine.cycle.jobs.cache import JobCache
from engine.cycle.reasons import Reason
from engine.errors import PolicyLoadError
from engine.fleet.bindings import FAILED, SUCCEEDED, job_outcome, read_binding
from engine.policy.policyset import PolicySet, load_policy_set
from tests.cycle import builders
from tests.cycle.test_properties import SETTINGS, load, name_of, rarely, scenarios  # noqa: F401 (fixture)

DEPENDENCY_REASONS = {
    Reason.INVALID_DEPENDENCY,
    Reason.DEPENDENCY_CYCLE,
    Reason.DEPENDENCY_FAILED,
    Reason.DEPENDENCY_NOT_FOUND,
    Reason.WAITING_FOR_DEPENDENCY,
}


# --- references --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("prep", Ref("succeeded", "", "team", "prep")),
        (" data/prep ", Ref("succeeded", "", "data", "prep")),
        ("finished:data/prep", Ref("finished", "", "data", "prep")),
        ("failed:prep", Ref("failed", "", "team", "prep")),
        ("PyTorchJob/prep", Ref("succeeded", "PyTorchJob", "team", "prep")),
        ("succeeded:Job.batch/data/prep", Ref("succeeded", "Job.batch", "data", "prep")),
    ],
)
def test_a_reference_names_condition_kind_namespace_and_name(text: str, expected: Ref) -> None:
    assert parse(text, "team") == expected


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("afterok:prep", "unknown condition 'afterok'"),
        ("a/b/c/d", "not [condition:][Kind/][namespace/]name"),
        ("team/", "not [condition:][Kind/][namespace/]name"),
    ],
)
def test_a_reference_that_cannot_be_read_says_why(text: str, error: str) -> None:
    found = parse(text, "team")
    assert isinstance(found, str) and error in found


def test_same_cluster_as_takes_no_condition() -> None:
    assert isinstance(parse("succeeded:prep", "team", condition=False), str)


# --- outcomes per kind -------------------------------------------------------------------------
def condition(kind: str) -> dict[str, Any]:
    return {"conditions": [{"type": kind, "status": "True"}]}


@pytest.mark.parametrize(
    ("status", "outcome"),
    [
        (condition("Complete"), SUCCEEDED),  # batch/v1 Job
        (condition("Failed"), FAILED),
        (condition("Succeeded"), SUCCEEDED),  # Kubeflow, MPIJob
        (condition("Completed"), SUCCEEDED),  # JobSet
        ({"conditions": [{"type": "Failed", "status": "False"}]}, None),
        ({"conditions": [{"type": "Created", "status": "True"}]}, None),
        (
            {
                "conditions": [
                    {"type": "Succeeded", "status": "True"},
                    {"type": "Failed", "status": "True"},
                ]
            },
            FAILED,
        ),
        ({"state": {"phase": "Completed"}}, SUCCEEDED),  # Volcano
        ({"state": {"phase": "Failed"}}, FAILED),
        ({"state": {"phase": "Aborted"}}, FAILED),
        ({"state": {"phase": "Terminated"}}, FAILED),
        ({"state": {"phase": "Running"}}, None),
        ({"applicationState": {"state": "COMPLETED"}}, SUCCEEDED),  # Spark operator
        ({"applicationState": {"state": "FAILED"}}, FAILED),
        ({"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED"}, SUCCEEDED),  # RayJob
        ({"jobDeploymentStatus": "Complete", "jobStatus": "FAILED"}, FAILED),
        ({"jobDeploymentStatus": "Failed"}, FAILED),
        ({"jobDeploymentStatus": "Running"}, None),
        ("not a mapping", None),
    ],
)
def test_each_kind_says_whether_it_succeeded_or_failed(status: Any, outcome: str | None) -> None:
    assert job_outcome(status) == outcome


def test_a_binding_lists_the_clusters_where_the_job_failed() -> None:
    binding = read_binding(
        {
            "kind": "ResourceBinding",
            "metadata": {"name": "prep-job", "namespace": "team"},
            "spec": {
                "resource": {"apiVersion": "batch/v1", "kind": "Job", "name": "prep"},
                "clusters": [{"name": "east"}, {"name": "west"}],
            },
            "status": {
                "aggregatedStatus": [
                    {"clusterName": "east", "status": condition("Complete")},
                    {"clusterName": "west", "status": condition("Failed")},
                ]
            },
        }
    )
    assert binding.finished == {"east", "west"}
    assert binding.failed == {"west"}


# --- the policy field --------------------------------------------------------------------------
QUEUE = {"kind": "Queue", "metadata": {"name": "q"}, "spec": {}}
CLUSTERS = [
    {"name": "east", "nodes": 2, "node": {"nvidia.com/gpu": 8, "cpu": 64, "memory": "512Gi"}},
    {"name": "west", "nodes": 4, "node": {"nvidia.com/gpu": 8, "cpu": 64, "memory": "512Gi"}},
]


def policy_set(tmp_path: Path, dependencies: dict[str, str] | None) -> PolicySet:
    docs: list[dict[str, Any]] = [QUEUE]
    if dependencies is not None:
        docs.append(
            {
                "kind": "SchedulingPolicy",
                "metadata": {"name": "s"},
                "spec": {"dependencies": dependencies},
            }
        )
    for i, doc in enumerate(docs):
        text = yaml.safe_dump({"apiVersion": "fleetgate.io/v1alpha1", **doc})
        (tmp_path / f"{i}.yaml").write_text(text)
    return load_policy_set([tmp_path])


def decisions(scenario: dict[str, Any], policies: PolicySet) -> dict[str, tuple[str, str]]:
    result = run_cycle(builders.snapshot(scenario), policies, builders.NOW)
    return {d.workload.split("/")[-1]: (d.reason, d.message) for d in result.decisions}


def test_the_policy_derives_dependencies_from_labels(tmp_path: Path) -> None:
    policies = policy_set(
        tmp_path,
        {
            "after": '"stage-after" in job.labels ? [job.labels["stage-after"]] : []',
            "sameClusterAs": '"stage-after" in job.labels ? job.labels["stage-after"] : ""',
        },
    )
    jobs = [
        {"name": "prep", "queue": "q", "pod": {"cpu": 1}, "admitted": "west", "finished": "x"},
        {"name": "running", "queue": "q", "pod": {"cpu": 1}, "admitted": "east"},
        {"name": "train", "queue": "q", "pod": {"nvidia.com/gpu": 8}},
        {"name": "eval", "queue": "q", "pod": {"nvidia.com/gpu": 8}},
    ]
    jobs[2]["labels"] = {"stage-after": "prep"}
    jobs[3]["labels"] = {"stage-after": "running"}
    got = decisions({"clusters": CLUSTERS, "jobs": jobs}, policies)
    assert got["train"] == (Reason.ADMITTED, "admitted to west")  # east is fuller: BinPack
    assert got["eval"] == (
        Reason.WAITING_FOR_DEPENDENCY,
        "waits for succeeded:PyTorchJob/team/running (Running)",
    )


def test_a_failing_dependency_expression_is_a_policy_eval_error(tmp_path: Path) -> None:
    policies = policy_set(tmp_path, {"after": '[job.labels["missing"]]'})
    got = decisions({"clusters": CLUSTERS, "jobs": [{"name": "a", "queue": "q"}]}, policies)
    reason, message = got["a"]
    assert reason == Reason.POLICY_EVAL_ERROR
    assert message.startswith("spec.dependencies.after: ")


def test_a_dependency_expression_of_the_wrong_type_is_refused_at_load(tmp_path: Path) -> None:
    with pytest.raises(PolicyLoadError, match=r"spec\.dependencies\.after"):
        policy_set(tmp_path, {"after": "1"})


def test_without_the_field_nothing_is_evaluated(tmp_path: Path) -> None:
    policies = policy_set(tmp_path, None)
    assert policies.scheduling.dependencies.after is None
    assert JobCache().evaluators(policies).dependencies is None


def test_an_unreadable_annotation_rejects_the_job(tmp_path: Path) -> None:
    policies = policy_set(tmp_path, None)
    jobs = [
        {"name": "a", "queue": "q", "after": "whenever:b"},
        {"name": "b", "queue": "q", "sameClusterAs": "x/y/z/w"},
    ]
    got = decisions({"clusters": CLUSTERS, "jobs": jobs}, policies)
    assert got["a"][0] == got["b"][0] == Reason.INVALID_DEPENDENCY
    assert "unknown condition 'whenever'" in got["a"][1]
    assert got["b"][1].startswith("same-cluster-as 'x/y/z/w'")


def test_a_qualified_kind_picks_one_of_two_jobs_of_the_same_name(tmp_path: Path) -> None:
    policies = policy_set(tmp_path, None)
    jobs = [
        {"name": "prep", "kind": "Job", "queue": "q", "admitted": "east", "finished": "failed"},
        {"name": "prep", "queue": "q", "admitted": "east", "finished": "succeeded"},
        {"name": "a", "queue": "q", "after": "Job.batch/prep"},
        {"name": "b", "queue": "q", "after": "PyTorchJob/team/prep"},
    ]
    got = decisions({"clusters": CLUSTERS, "jobs": jobs}, policies)
    assert got["a"] == (
        Reason.DEPENDENCY_FAILED,
        "can never be met: succeeded:Job.batch/team/prep (Failed)",
    )
    assert got["b"][0] == Reason.ADMITTED


def test_a_predecessor_fleetgate_does_not_manage_counts_too(tmp_path: Path) -> None:
    policies = policy_set(tmp_path, None)
    jobs = [
        {"name": "etl", "queue": "q", "managed": False, "admitted": "east", "finished": "x"},
        {"name": "a", "queue": "q", "after": "etl"},
    ]
    assert decisions({"clusters": CLUSTERS, "jobs": jobs}, policies)["a"][0] == Reason.ADMITTED


def test_an_arrival_is_checked_against_the_jobs_pending_now(tmp_path: Path) -> None:
    policies = policy_set(tmp_path, None)
    scenario = {
        "clusters": CLUSTERS,
        "jobs": [{"name": "a", "queue": "q", "after": "b"}, {"name": "c", "queue": "q"}],
    }
    cycle = Cycle(builders.snapshot(scenario), policies, builders.NOW)
    first = {d.workload.split("/")[-1]: d.reason for d in cycle.run().decisions}
    assert first == {"a": Reason.DEPENDENCY_NOT_FOUND, "c": Reason.ADMITTED}
    scenario["jobs"].append({"name": "b", "queue": "q", "after": "a"})
    snapshot = builders.snapshot(scenario)
    binding = next(b for b in snapshot.bindings if b.resource.name == "b")
    decision = cycle.arrive(snapshot, binding)
    assert decision is not None and decision.reason == Reason.DEPENDENCY_CYCLE
    assert decision.position is None


# --- properties --------------------------------------------------------------------------------
@st.composite
def with_dependencies(draw: st.DrawFn) -> dict[str, Any]:
    """A random scenario (tests/cycle/test_properties.py) whose running jobs may have ended,
    and whose jobs may depend on each other (or on a job that does not exist)."""
    scenario = draw(scenarios())
    names = [j["name"] for j in scenario["jobs"]]
    for spec in scenario["jobs"]:
        if spec.get("admitted") and not rarely(draw, 3):
            spec["finished"] = draw(st.sampled_from(["succeeded", "failed"]))
    ended = [j["name"] for j in scenario["jobs"] if j.get("finished")]
    conditions = st.sampled_from(["finished:", "finished:", "", "succeeded:", "failed:"])
    for i, spec in enumerate(scenario["jobs"]):
        if not draw(st.booleans()):
            continue
        # jobs that ended, or earlier ones (no cycle); now and then any job, or a missing one
        pool = ended if ended and draw(st.booleans()) else names[: i or len(names)]
        if rarely(draw, 4):
            pool = [*names, "ghost"]
        targets = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=2))
        spec["after"] = ", ".join(f"{draw(conditions)}{t}" for t in targets)
    return scenario


def state_of(spec: dict[str, Any] | None) -> str:
    if spec is None:
        return "NotFound"
    if not spec.get("admitted"):
        return "Pending"
    return {"succeeded": SUCCEEDED, "failed": FAILED}.get(spec.get("finished", ""), "Running")


MET = {
    "succeeded": {SUCCEEDED},
    "failed": {FAILED},
    "finished": {SUCCEEDED, FAILED},
}


@SETTINGS
@given(scenario=with_dependencies())
def test_no_job_is_admitted_before_its_dependencies_are_met(
    scenario: dict[str, Any],
    load: Callable[..., PolicySet],  # noqa: F811
) -> None:
    result = run_cycle(builders.snapshot(scenario), load(scenario["policies"]), builders.NOW)
    specs = {j["name"]: j for j in scenario["jobs"]}
    for d in result.decisions:
        spec = specs[d.workload.split("/")[-1]]
        if d.reason not in (Reason.ADMITTED, Reason.PREEMPTING) or "after" not in spec:
            continue
        for item in spec["after"].split(","):
            ref = parse(item, "team")
            assert isinstance(ref, Ref)
            state = state_of(specs.get(ref.name))
            assert state in MET[ref.condition], f"{d.workload} admitted, {item} is {state}"


@SETTINGS
@given(scenario=with_dependencies())
def test_dependencies_never_change_the_decisions_of_jobs_that_have_none(
    scenario: dict[str, Any],
    load: Callable[..., PolicySet],  # noqa: F811
) -> None:
    """Jobs whose dependencies hold them back are as if they were not there (they take no turn
    and no place); jobs whose dependencies are met are decided as if they had none."""
    policies = load(scenario["policies"])
    with_deps = run_cycle(builders.snapshot(scenario), policies, builders.NOW)
    held = {
        d.workload.split("/")[-1] for d in with_deps.decisions if d.reason in DEPENDENCY_REASONS
    }
    without = copy.deepcopy(scenario)
    without["jobs"] = [j for j in without["jobs"] if j["name"] not in held]
    for spec in without["jobs"]:
        spec.pop("after", None)
    expected = run_cycle(builders.snapshot(without), policies, builders.NOW)
    got = [d for d in with_deps.decisions if name_of(d) not in held]
    assert [d.to_json() for d in got] == [d.to_json() for d in expected.decisions]


def test_a_cycle_without_dependencies_builds_no_index(tmp_path: Path, monkeypatch: Any) -> None:
    """Jobs without dependencies pay nothing: the fleet is not even indexed."""
    from engine.cycle import dependencies

    def fail(snapshot: Any) -> None:
        raise AssertionError("indexed")

    monkeypatch.setattr(dependencies, "_index", fail)
    policies = policy_set(tmp_path, None)
    jobs = [{"name": f"j{i}", "queue": "q", "at": i} for i in range(5)]
    got = decisions({"clusters": CLUSTERS, "jobs": jobs}, policies)
    assert [reason for reason, _ in got.values()] == [Reason.ADMITTED] * 5
