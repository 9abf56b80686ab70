"""Co-admission groups in the scheduling cycle (issue 21): HyperJob children and jobs that carry
``fleetgate.io/group`` are admitted all together, or their minimum, or not at all.

Fleets are built with ``tests/cycle/builders.py``; a member is a job with ``group`` (a dict of
its group annotations) or ``hyperjob`` (the HyperJob it is a child of).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pytest
import yaml

from engine import annotations as ann
from engine.cycle import Cycle, run_cycle
from engine.cycle.groups import place as groups_place
from engine.cycle.model import CycleResult, Decision
from engine.cycle.reasons import Action, Reason
from engine.fleet.files import read_objects
from engine.fleet.frozen import FrozenDict
from engine.fleet.model import Snapshot
from engine.fleet.snapshot import build_snapshot
from engine.policy.policyset import PolicySet, load_policy_set
from engine.workloads import hyperjob
from engine.workloads.hyperjob import HyperJob, ReplicatedJob
from engine.workloads.model import DemandError
from tests.conftest import REPO
from tests.cycle import builders

GPU = {"nvidia.com/gpu": 8, "cpu": 64, "memory": "512Gi"}
QUEUES = [
    {"kind": "Queue", "metadata": {"name": "q"}, "spec": {"guarantee": {"nvidia.com/gpu": 1000}}},
    {"kind": "Queue", "metadata": {"name": "r"}, "spec": {"guarantee": {"nvidia.com/gpu": 1000}}},
]


@pytest.fixture(scope="module")
def loader(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., PolicySet]:
    """Policy documents → a PolicySet, each set of documents loaded once."""
    cache: dict[str, PolicySet] = {}

    def load(documents: Sequence[dict[str, Any]]) -> PolicySet:
        key = yaml.safe_dump(list(documents))
        if key not in cache:
            folder = tmp_path_factory.mktemp("policies")
            for i, doc in enumerate(documents):
                text = yaml.safe_dump({"apiVersion": "fleetgate.io/v1alpha1", **doc})
                (folder / f"{i:02}.yaml").write_text(text)
            cache[key] = load_policy_set([folder])
        return cache[key]

    return load


def gpu_clusters(**nodes: int) -> list[dict[str, Any]]:
    """Clusters of 8-GPU nodes: ``east=2`` is a cluster east of two such nodes."""
    return [{"name": name, "nodes": n, "node": GPU} for name, n in nodes.items()]


def member(name: str, group: str, size: int, *, pods: int = 1, **extra: Any) -> dict[str, Any]:
    """A job of ``pods`` 8-GPU pods in queue q, member of the annotated group ``group``."""
    spec = {"name": name, "queue": "q", "pods": pods, "pod": {"nvidia.com/gpu": 8}}
    spec["group"] = {ann.GROUP: group, ann.GROUP_SIZE: str(size), **extra.pop("annotations", {})}
    return {**spec, **extra}


def child(hyperjob_name: str, name: str, *, pods: int = 1, **extra: Any) -> dict[str, Any]:
    spec = {"name": name, "queue": "q", "pods": pods, "pod": {"nvidia.com/gpu": 8}}
    labels = {hyperjob.NAME_LABEL: hyperjob_name, **extra.pop("labels", {})}
    return {**spec, "labels": labels, **extra}


def snapshot(scenario: Mapping[str, Any], hyperjobs: Sequence[HyperJob] = ()) -> Snapshot:
    """``builders.snapshot`` with each job's ``group`` annotations on its template."""
    plain = {
        **scenario,
        "jobs": [{k: v for k, v in j.items() if k != "group"} for j in scenario["jobs"]],
    }
    built = builders.snapshot(plain)
    extra = {j["name"]: j["group"] for j in scenario["jobs"] if "group" in j}
    workloads = {
        key: dataclasses.replace(w, annotations=FrozenDict({**w.annotations, **extra[w.name]}))
        if w.name in extra
        else w
        for key, w in built.workloads.items()
    }
    found = {(h.namespace, h.name): h for h in hyperjobs}
    return dataclasses.replace(built, workloads=FrozenDict(workloads), hyperjobs=FrozenDict(found))


def decide(
    loader: Callable,
    scenario: Mapping[str, Any],
    hyperjobs: Sequence[HyperJob] = (),
    policies: Sequence[dict[str, Any]] = (),
) -> dict[str, Decision]:
    result = run_cycle(snapshot(scenario, hyperjobs), loader([*QUEUES, *policies]), builders.NOW)
    return by_name(result)


def by_name(result: CycleResult) -> dict[str, Decision]:
    return {d.workload.split("/")[-1]: d for d in result.decisions}


def owner(name: str, *replicas: int, minimum: int | None = None, spread: str = "") -> HyperJob:
    """A HyperJob of replicated jobs rj0, rj1, … with these replicas (demand not read here)."""
    template = builders.job({"name": "t", "pods": 1, "pod": {"nvidia.com/gpu": 8}})[1]
    replicated = tuple(ReplicatedJob(f"rj{i}", n, (), template) for i, n in enumerate(replicas))
    return HyperJob("team", name, replicated, minimum, None, spread)


# --- all or nothing ----------------------------------------------------------------------------
def test_a_group_that_fits_only_partly_admits_nobody(loader: Callable) -> None:
    # east holds two of the three members; the third fits nowhere at the same time
    scenario = {
        "clusters": gpu_clusters(east=2),
        "jobs": [member(n, "g", 3, at=i) for i, n in enumerate(["a", "b", "c"])],
    }
    decisions = decide(loader, scenario)
    for name in "abc":
        d = decisions[name]
        assert (d.action, d.reason) == (Action.PENDING, Reason.NO_CLUSTER_FITS), d
        assert "2 of 3 members fit at once, 3 needed" in d.message
        assert not d.clusters
        assert d.group is not None and d.group.state == "Pending"
    # every member gets the same reason and message, with the best attempt per cluster
    assert len({(d.reason, d.message) for d in decisions.values()}) == 1
    east = dict(decisions["a"].cluster_reasons)["east"]
    assert "takes" in east and "needs 8 nvidia.com/gpu, 0 free" in east


def test_with_room_for_all_a_group_is_admitted_whole_in_one_cycle(loader: Callable) -> None:
    scenario = {
        "clusters": gpu_clusters(east=2, west=1),
        "jobs": [member(n, "g", 3, at=i) for i, n in enumerate(["a", "b", "c"])],
    }
    decisions = decide(loader, scenario)
    assert {n: decisions[n].action for n in "abc"} == dict.fromkeys("abc", Action.ADMIT)
    placed = [decisions[n].clusters[0].name for n in "abc"]
    assert sorted(placed) == ["east", "east", "west"]
    assert all(
        "with its group group/team/g (3 of 3 members)" in decisions[n].message for n in "abc"
    )
    assert decisions["a"].group._asdict() == {
        "name": "group/team/g",
        "size": 3,
        "min": 3,
        "present": 3,
        "state": "Admitted",
    }


def test_a_minimum_below_the_size_admits_the_minimum_when_only_that_fits(loader: Callable) -> None:
    jobs = [
        member(n, "g", 3, at=i, annotations={ann.GROUP_MIN: "2"})
        for i, n in enumerate(["a", "b", "c"])
    ]
    decisions = decide(loader, {"clusters": gpu_clusters(east=2), "jobs": jobs})
    admitted = sorted(n for n in "abc" if decisions[n].action == Action.ADMIT)
    assert len(admitted) == 2
    (left,) = set("abc") - set(admitted)
    assert decisions[left].reason == Reason.NO_CLUSTER_FITS
    assert "2 of 3 members, minimum 2" in decisions[left].message
    # one fewer node: not even the minimum fits, so nobody is admitted
    decisions = decide(loader, {"clusters": gpu_clusters(east=1), "jobs": jobs})
    assert all(decisions[n].action == Action.PENDING for n in "abc")
    assert "1 of 3 members fit at once, 2 needed" in decisions["a"].message


def test_a_member_that_does_not_exist_yet_makes_the_group_wait(loader: Callable) -> None:
    jobs = [member("a", "g", 3), member("b", "g", 3, at=1)]
    decisions = decide(loader, {"clusters": gpu_clusters(east=4), "jobs": jobs})
    for name in "ab":
        d = decisions[name]
        assert (d.action, d.reason) == (Action.PENDING, Reason.WAITING_FOR_GROUP)
        assert d.message == "group group/team/g: 2 of 3 members present"
        assert d.position is None  # not yet eligible: no place in its queue
        assert d.group is not None and (d.group.present, d.group.state) == (2, "Waiting")


def test_a_hyperjob_waits_for_the_children_its_replicated_jobs_stamp_out(loader: Callable) -> None:
    jobs = [child("llm", "llm-trainer-0"), child("llm", "llm-trainer-1", at=1)]
    scenario = {"clusters": gpu_clusters(east=4), "jobs": jobs}
    decisions = decide(loader, scenario, [owner("llm", 2, 1)])
    assert decisions["llm-trainer-0"].reason == Reason.WAITING_FOR_GROUP
    assert "2 of 3 members present" in decisions["llm-trainer-0"].message
    # without the HyperJob object, the children seen are the group
    decisions = decide(loader, scenario)
    assert [decisions[n].action for n in ("llm-trainer-0", "llm-trainer-1")] == [Action.ADMIT] * 2
    # with it, and minAvailable 2: the two present of three do not make the group
    decisions = decide(loader, scenario, [owner("llm", 2, 1, minimum=2)])
    assert decisions["llm-trainer-1"].reason == Reason.WAITING_FOR_GROUP


def test_members_of_different_queues_are_rejected(loader: Callable) -> None:
    jobs = [member("a", "g", 2), {**member("b", "g", 2, at=1), "queue": "r"}]
    decisions = decide(loader, {"clusters": gpu_clusters(east=4), "jobs": jobs})
    for name in "ab":
        d = decisions[name]
        assert (d.action, d.reason) == (Action.REJECT, Reason.INVALID_GROUP)
        assert "members map to different queues (a → q, b → r)" in d.message


@pytest.mark.parametrize(
    ("annotations", "says"),
    [
        ({ann.GROUP_SIZE: "two"}, "fleetgate.io/group-size 'two': not a positive integer"),
        ({ann.GROUP_MIN: "3"}, "fleetgate.io/group-min '3': not an integer from 1 to the size 2"),
        ({ann.GROUP_SPREAD: "zones"}, "fleetgate.io/group-spread zones: only 'clusters'"),
    ],
)
def test_group_annotations_that_cannot_be_read_reject_the_members(
    loader: Callable, annotations: dict[str, str], says: str
) -> None:
    jobs = [
        member("a", "g", 2, annotations=annotations),
        member("b", "g", 2, annotations=annotations),
    ]
    decisions = decide(loader, {"clusters": gpu_clusters(east=4), "jobs": jobs})
    assert decisions["a"].reason == Reason.INVALID_GROUP
    assert says in decisions["a"].message


def test_more_members_than_the_size_is_an_invalid_group(loader: Callable) -> None:
    jobs = [member(n, "g", 2) for n in "abc"]
    decisions = decide(loader, {"clusters": gpu_clusters(east=4), "jobs": jobs})
    assert decisions["c"].reason == Reason.INVALID_GROUP
    assert "3 members for a group of 2" in decisions["c"].message


# --- placement ---------------------------------------------------------------------------------
def test_spread_puts_every_member_on_a_cluster_of_its_own(loader: Callable) -> None:
    spread = {ann.GROUP_SPREAD: "clusters"}
    jobs = [member(n, "g", 3, annotations=spread) for n in "abc"]
    clusters = gpu_clusters(east=4, west=4, north=4)
    decisions = decide(loader, {"clusters": clusters, "jobs": jobs})
    placed = {decisions[n].clusters[0].name for n in "abc"}
    assert placed == {"east", "west", "north"}
    # two clusters for three members: never, even empty
    decisions = decide(loader, {"clusters": gpu_clusters(east=4, west=4), "jobs": jobs})
    assert (decisions["a"].action, decisions["a"].reason) == (Action.REJECT, Reason.GROUP_TOO_LARGE)
    assert (
        "at most 2 of its 3 members could ever fit on distinct clusters" in decisions["a"].message
    )


def test_each_member_keeps_its_own_placement_the_most_constrained_placed_first(
    loader: Callable,
) -> None:
    # b may only use east (like a replicated job's clusterNames); a alone would take east (the
    # tighter fit), leaving b no room. Placed first, b gets east and a goes to west.
    jobs = [
        child("llm", "a", pods=2, at=0),
        child("llm", "b", pods=3, at=1, placement={"clusters": ["east"]}),
    ]
    decisions = decide(loader, {"clusters": gpu_clusters(east=3, west=4), "jobs": jobs})
    assert decisions["b"].clusters[0].name == "east"
    assert decisions["a"].clusters[0].name == "west"


@pytest.mark.parametrize(("budget", "admitted"), [(groups_place.BUDGET, 6), (10, 0)])
def test_backtracking_finds_what_first_fit_decreasing_misses(
    loader: Callable, monkeypatch: pytest.MonkeyPatch, budget: int, admitted: int
) -> None:
    # members of 5, 4, 4, 3, 2, 2 nodes on two clusters of 10: first fit decreasing puts 5+4
    # on one and 4+3+2 on the other, and the last 2 finds no room; 5+3+2 and 4+4+2 fit. With
    # a budget of 10 fit checks the search stops after the first-fit descent (a, b: 1 check;
    # c, d, e: 2; f: 2, both failing).
    monkeypatch.setattr(groups_place, "BUDGET", budget)
    sizes = {"a": 5, "b": 4, "c": 4, "d": 3, "e": 2, "f": 2}
    jobs = [member(n, "g", 6, pods=p, at=i) for i, (n, p) in enumerate(sizes.items())]
    decisions = decide(loader, {"clusters": gpu_clusters(c1=10, c2=10), "jobs": jobs})
    assert sum(decisions[n].action == Action.ADMIT for n in sizes) == admitted
    if not admitted:
        assert "5 of 6 members fit at once, 6 needed" in decisions["a"].message


def test_quota_counts_the_whole_group(loader: Callable) -> None:
    capped = [
        {"kind": "Queue", "metadata": {"name": "q"}, "spec": {"max": {"nvidia.com/gpu": 16}}},
        QUEUES[1],
    ]
    jobs = [member(n, "g", 3) for n in "abc"]
    scenario = {"clusters": gpu_clusters(east=4), "jobs": jobs}
    result = run_cycle(snapshot(scenario), loader(capped), builders.NOW)
    decisions = by_name(result)
    assert {decisions[n].reason for n in "abc"} == {Reason.EXCEEDS_MAX_QUOTA}
    assert decisions["a"].message.startswith("group group/team/g: ")


def test_a_group_takes_one_turn_and_a_job_behind_it_still_runs(loader: Callable) -> None:
    jobs = [
        *(member(n, "g", 3, at=0) for n in "abc"),
        {"name": "solo", "queue": "q", "pods": 1, "pod": {"nvidia.com/gpu": 8}, "at": 5},
    ]
    decisions = decide(loader, {"clusters": gpu_clusters(east=2), "jobs": jobs})
    assert decisions["solo"].action == Action.ADMIT
    assert {decisions[n].reason for n in "abc"} == {Reason.NO_CLUSTER_FITS}


def test_running_members_count_towards_the_minimum(loader: Callable) -> None:
    jobs = [
        member("a", "g", 2, admitted="east", annotations={ann.GROUP_MIN: "1"}),
        member("b", "g", 2, at=1, annotations={ann.GROUP_MIN: "1"}),
    ]
    decisions = decide(loader, {"clusters": gpu_clusters(east=2), "jobs": jobs})
    assert decisions["b"].action == Action.ADMIT
    assert "2 of 2 members, minimum 1" in decisions["b"].message


def test_decision_json_carries_the_group(loader: Callable) -> None:
    jobs = [member("a", "g", 2)]
    result = run_cycle(
        snapshot({"clusters": gpu_clusters(east=1), "jobs": jobs}), loader(QUEUES), builders.NOW
    )
    (decision,) = result.to_json()["decisions"]
    assert decision["group"] == {
        "name": "group/team/g",
        "size": 2,
        "min": 2,
        "present": 1,
        "state": "Waiting",
    }
    plain = run_cycle(
        builders.snapshot(
            {"clusters": gpu_clusters(east=1), "jobs": [{"name": "x", "queue": "q"}]}
        ),
        loader(QUEUES),
        builders.NOW,
    )
    assert "group" not in plain.to_json()["decisions"][0]


def test_a_member_arriving_between_cycles_waits_for_the_next_full_cycle(loader: Callable) -> None:
    jobs = [member("a", "g", 2)]
    built = snapshot({"clusters": gpu_clusters(east=2), "jobs": [*jobs, member("b", "g", 2)]})
    first = dataclasses.replace(built, bindings=built.bindings[:1])
    cycle = Cycle(first, loader(QUEUES), builders.NOW)
    cycle.run()
    decision = cycle.arrive(built, built.bindings[1])
    assert decision is not None and decision.reason == Reason.WAITING_FOR_GROUP


# --- from the SchedulingPolicy -----------------------------------------------------------------
GROUPS_BY_LABEL = {
    "kind": "SchedulingPolicy",
    "metadata": {"name": "default"},
    "spec": {
        "groups": {
            "name": '"sweep" in job.labels ? job.labels["sweep"] : ""',
            "size": 'int(job.labels["sweep-size"])',
        }
    },
}


def test_the_scheduling_policy_can_name_groups_by_cel(loader: Callable) -> None:
    def swept(name: str, at: int) -> dict[str, Any]:
        labels = {"sweep": "lr", "sweep-size": "3"}
        return {
            "name": name,
            "queue": "q",
            "pod": {"nvidia.com/gpu": 8},
            "at": at,
            "labels": labels,
        }

    jobs = [swept("a", 0), swept("b", 1), {"name": "solo", "queue": "q", "at": 2}]
    scenario = {"clusters": gpu_clusters(east=4), "jobs": jobs}
    decisions = decide(loader, scenario, policies=[GROUPS_BY_LABEL])
    assert decisions["a"].reason == Reason.WAITING_FOR_GROUP
    assert decisions["a"].message == "group group/team/lr: 2 of 3 members present"
    assert decisions["solo"].action == Action.ADMIT
    decisions = decide(loader, {**scenario, "jobs": [*jobs, swept("c", 3)]}, [], [GROUPS_BY_LABEL])
    assert all(decisions[n].action == Action.ADMIT for n in "abc")
    # the template's annotation wins over the policy
    annotated = {**swept("d", 4), "group": {ann.GROUP: "other", ann.GROUP_SIZE: "1"}}
    decisions = decide(loader, {**scenario, "jobs": [annotated]}, [], [GROUPS_BY_LABEL])
    assert decisions["d"].action == Action.ADMIT
    assert "group/team/other (1 of 1 members)" in decisions["d"].message


def test_a_group_expression_that_fails_is_a_policy_error(loader: Callable) -> None:
    jobs = [{"name": "a", "queue": "q", "labels": {"sweep": "lr", "sweep-size": "three"}}]
    decisions = decide(
        loader, {"clusters": gpu_clusters(east=1), "jobs": jobs}, [], [GROUPS_BY_LABEL]
    )
    assert decisions["a"].reason == Reason.POLICY_EVAL_ERROR
    assert decisions["a"].message.startswith("spec.groups.size: ")


# --- reading HyperJobs -------------------------------------------------------------------------
def hyperjob_objects() -> list[dict[str, Any]]:
    path = REPO / "examples" / "hyperjob" / "hyperjobs.yaml"
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def test_a_hyperjob_is_read_with_the_demand_of_each_child() -> None:
    pretrain = hyperjob.read_hyperjob(hyperjob_objects()[0])
    assert (pretrain.size, pretrain.min_available, pretrain.split_count) == (3, 3, 3)
    children = pretrain.children()
    assert [c.name for c in children] == [
        "llm-pretrain-trainer-0",
        "llm-pretrain-trainer-1",
        "llm-pretrain-evaluator-0",
    ]
    assert children[0].labels[hyperjob.REPLICATED_JOB_LABEL] == "trainer"
    assert (children[0].pods, float(children[0].total.get_amount("nvidia.com/gpu"))) == (4, 32.0)
    assert pretrain.replicated_jobs[1].cluster_names == ("gpu-central",)


@pytest.mark.parametrize(
    ("change", "path"),
    [
        (
            lambda s: s["replicatedJobs"][1].pop("templateSpec"),
            "spec.replicatedJobs[1].templateSpec",
        ),
        (
            lambda s: s["replicatedJobs"][0]["templateSpec"]["tasks"][0].update(replicas="x"),
            "spec.replicatedJobs[0].templateSpec.tasks[0].replicas",
        ),
        (lambda s: s.update(minAvailable=9), "spec.minAvailable"),
        (lambda s: s["replicatedJobs"][1].update(name="trainer"), "spec.replicatedJobs[1].name"),
        (lambda s: s["replicatedJobs"][0].update(replicas=10**9), "spec.replicatedJobs"),
    ],
)
def test_a_malformed_hyperjob_names_the_field(change: Callable, path: str) -> None:
    obj = hyperjob_objects()[0]
    change(obj["spec"])
    with pytest.raises(DemandError) as caught:
        hyperjob.read_hyperjob(obj)
    assert caught.value.path == path


def test_the_snapshot_holds_the_hyperjobs_beside_their_children() -> None:
    built = build_snapshot(read_objects([REPO / "examples" / "hyperjob" / "snapshot.yaml"])[0])
    assert sorted(built.hyperjobs) == [("research", "llm-finetune"), ("research", "llm-pretrain")]
    assert built.hyperjobs[("research", "llm-finetune")].spread == "clusters"
    assert not built.errors


def test_without_a_readable_spec_the_hyperjob_status_gives_the_size(loader: Callable) -> None:
    obj = hyperjob_objects()[0]
    obj["spec"]["replicatedJobs"][0]["templateSpec"] = "not a spec"
    built = build_snapshot([("hj.yaml", obj)])
    assert [i.path for i in built.errors] == ["spec.replicatedJobs[0].templateSpec"]
    partial = built.hyperjobs[("research", "llm-pretrain")]
    jobs = [child("llm", "llm-trainer-0"), child("llm", "llm-trainer-1", at=1)]
    scenario = {"clusters": gpu_clusters(east=4), "jobs": jobs}
    decisions = decide(
        loader, scenario, [dataclasses.replace(partial, namespace="team", name="llm")]
    )
    assert decisions["llm-trainer-0"].message == "group HyperJob/team/llm: 2 of 3 members present"


def test_a_group_too_large_to_search_is_placed_first_fit(
    loader: Callable, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(groups_place, "DEEPEST", 5)  # the six members below: first fit only
    sizes = {"a": 5, "b": 4, "c": 4, "d": 3, "e": 2, "f": 2}
    jobs = [member(n, "g", 6, pods=p, at=i) for i, (n, p) in enumerate(sizes.items())]
    decisions = decide(loader, {"clusters": gpu_clusters(c1=10, c2=10), "jobs": jobs})
    assert "5 of 6 members fit at once, 6 needed" in decisions["a"].message


def test_with_admit_on_min_member_quota_counts_the_minimum(loader: Callable) -> None:
    queue = {"kind": "Queue", "metadata": {"name": "q"}, "spec": {"max": {"nvidia.com/gpu": 16}}}
    min_member = {
        "kind": "SchedulingPolicy",
        "metadata": {"name": "default"},
        "spec": {"gang": {"admitOn": "MinMember"}},
    }
    jobs = [member(n, "g", 3, at=i, annotations={ann.GROUP_MIN: "2"}) for i, n in enumerate("abc")]
    scenario = {"clusters": gpu_clusters(east=4), "jobs": jobs}
    result = run_cycle(snapshot(scenario), loader([queue, QUEUES[1], min_member]), builders.NOW)
    decisions = by_name(result)
    assert [decisions[n].action for n in "abc"] == [Action.ADMIT, Action.ADMIT, Action.PENDING]
    assert decisions["c"].reason == Reason.WAITING_FOR_QUOTA
    assert "no quota left for it in queue q" in decisions["c"].message
    # with admitOn: All the whole group's 24 GPUs count, above the max of 16
    result = run_cycle(snapshot(scenario), loader([queue, QUEUES[1]]), builders.NOW)
    assert {d.reason for d in result.decisions} == {Reason.EXCEEDS_MAX_QUOTA}


def test_preemption_never_takes_one_member_of_a_running_group(loader: Callable) -> None:
    queue = {
        "kind": "Queue",
        "metadata": {"name": "q"},
        "spec": {"preemption": {"withinQueue": "LowerPriority"}},
    }
    running = [
        member("a", "g", 2, admitted="east", priority=0),
        member("b", "g", 2, admitted="east", priority=0),
        {
            "name": "lone",
            "queue": "q",
            "pod": {"nvidia.com/gpu": 8},
            "admitted": "west",
            "priority": 0,
        },
    ]
    urgent = {
        "name": "urgent",
        "queue": "q",
        "pod": {"nvidia.com/gpu": 8},
        "priority": 100,
        "at": 9,
    }
    scenario = {"clusters": gpu_clusters(east=2, west=1), "jobs": [*running, urgent]}
    result = run_cycle(snapshot(scenario), loader([queue, QUEUES[1]]), builders.NOW)
    decisions = by_name(result)
    assert decisions["urgent"].reason == Reason.PREEMPTING
    assert decisions["urgent"].victims == ("team/lone-pytorchjob",)
    assert "a" not in decisions and "b" not in decisions  # the group runs on, whole
    # with only the group running, nothing is preempted: the job waits
    scenario = {"clusters": gpu_clusters(east=2), "jobs": [*running[:2], urgent]}
    result = run_cycle(snapshot(scenario), loader([queue, QUEUES[1]]), builders.NOW)
    assert by_name(result)["urgent"].reason == Reason.NO_CLUSTER_FITS
