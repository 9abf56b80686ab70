"""First-fit binding, gangs, fragmentation, durations, faults."""

from __future__ import annotations

import pytest

from engine.members import EventType, JobSpec, MemberError, Phase
from tests.fleet.builders import pytorch_job
from tests.members.builders import at, gpu_member, job


def test_pods_bind_first_fit_in_node_order():
    member = gpu_member(nodes=3)
    member.submit(job("a", pods_=3, gpus=4), at(0))
    member.step(at(0))
    assert member.bindings("a") == {
        "a-worker-0": "gpu-0-0",
        "a-worker-1": "gpu-0-0",
        "a-worker-2": "gpu-0-1",
    }


def test_a_gang_that_fits_the_totals_but_not_the_nodes_stays_pending_until_a_node_frees():
    member = gpu_member(nodes=2)
    member.submit(job("a", gpus=8, minutes=5), at(0))  # gpu-0-0
    member.submit(job("b", gpus=4, minutes=30), at(0))  # gpu-0-1
    member.step(at(0))
    member.submit(job("d", gpus=4, minutes=30), at(5))
    member.step(at(5))  # a is done; d packs onto gpu-0-1 beside b (MostAllocated)
    assert member.bindings("d") == {"d-worker-0": "gpu-0-1"}
    # gpu-0-0 whole, gpu-0-1 full: 8 GPUs free, but one node of the two the gang needs
    member.submit(job("big", pods_=2, gpus=8), at(6))
    member.step(at(6))
    state = member.job_state("big")
    assert state is not None
    assert (state.phase, state.pods_bound, state.pods_total) == (Phase.PENDING, 0, 2)
    assert member.allocating()["nvidia.com/gpu"] == 16
    member.step(at(30))  # b is done: gpu-0-1 still half used by d
    assert member.job_state("big").pods_bound == 0  # type: ignore[union-attr]
    events = member.step(at(35))  # d is done
    assert [(e.type, e.job) for e in events] == [
        (EventType.SUCCEEDED, "d"),
        (EventType.STARTED, "big"),
    ]
    assert set(member.bindings("big").values()) == {"gpu-0-0", "gpu-0-1"}


def test_gang_is_all_or_nothing_while_a_batch_job_binds_pod_by_pod():
    for gang, bound in ((True, 0), (False, 2)):
        member = gpu_member(nodes=2)
        member.submit(job("x", pods_=3, gpus=8, gang=gang), at(0))
        member.step(at(0))
        state = member.job_state("x")
        assert state is not None
        assert (state.phase, state.pods_bound) == (Phase.PENDING, bound)


def test_a_gang_with_min_member_starts_with_that_many_pods():
    member = gpu_member(nodes=2)
    member.submit(job("x", pods_=3, gpus=8, min_member=2), at(0))
    events = member.step(at(0))
    state = member.job_state("x")
    assert [e.type for e in events] == [EventType.STARTED]
    assert (state.phase, state.pods_bound) == (Phase.RUNNING, 2)  # type: ignore[union-attr]


def test_a_job_runs_for_its_duration_then_succeeds_and_frees_its_pods():
    member = gpu_member(nodes=1)
    member.submit(job("first", gpus=8, minutes=10), at(0))
    member.submit(job("second", gpus=8, minutes=10), at(0))
    assert [e.job for e in member.step(at(0))] == ["first"]
    assert member.next_finish() == at(10)
    assert member.step(at(9.9)) == []
    events = member.step(at(12))
    assert [(e.type, e.job, e.at) for e in events] == [
        (EventType.SUCCEEDED, "first", at(10)),
        (EventType.STARTED, "second", at(12)),
    ]
    first = member.job_state("first")
    assert first is not None
    assert (first.phase, first.pods_bound, first.started_at, first.finished_at) == (
        Phase.SUCCEEDED,
        0,
        at(0),
        at(10),
    )


def test_running_at_is_the_jobs_started_and_not_at_their_end_step_or_no_step():
    member = gpu_member(nodes=2)
    member.submit(job("short", gpus=8, minutes=5), at(0))
    member.submit(job("long", gpus=8, minutes=30), at(0))
    member.submit(job("waits", gpus=8, minutes=5), at(0))  # no node left: pending
    assert member.running_at(at(0)) == ()  # submitted, not started
    member.step(at(0))
    assert set(member.running_at(at(1))) == {"short", "long"}
    # short's end has come: over, though no step has said so (its phase is still Running)
    assert member.job_state("short").phase == Phase.RUNNING  # type: ignore[union-attr]
    assert member.running_at(at(5)) == ("long",)
    member.fail("long", at(6), "node lost")
    assert member.running_at(at(6)) == ()


def test_fail_and_remove_free_the_pods():
    member = gpu_member(nodes=1)
    member.submit(job("a", gpus=8), at(0))
    member.step(at(0))
    event = member.fail("a", at(1), "node lost")
    assert event is not None and event.type is EventType.FAILED
    state = member.job_state("a")
    assert (state.phase, state.pods_bound, state.message) == (Phase.FAILED, 0, "node lost")  # type: ignore[union-attr]
    assert member.fail("a", at(2)) is None
    assert member.allocated().get_amount("nvidia.com/gpu") == 0
    member.submit(job("b", gpus=8), at(2))
    member.step(at(2))
    assert member.allocated()["nvidia.com/gpu"] == 8
    assert member.remove("b") and not member.remove("b")
    assert member.job_state("b") is None
    assert member.allocated() == {}
    with pytest.raises(MemberError):
        member.fail("b", at(3))


def test_a_job_key_is_submitted_once():
    member = gpu_member()
    member.submit(job("a"), at(0))
    with pytest.raises(MemberError):
        member.submit(job("a"), at(0))


def test_a_template_is_read_through_the_workload_registry():
    spec = JobSpec.from_template("research/llama", pytorch_job("llama", workers=3), at(0) - at(0))
    assert (spec.pods, spec.gang, spec.needed) == (3, True, 3)
    assert spec.groups[0].requests["nvidia.com/gpu"] == 8
    member = gpu_member(nodes=2)
    member.submit(spec, at(0))
    member.step(at(0))
    assert member.job_state("research/llama").phase is Phase.PENDING  # type: ignore[union-attr]


def test_a_batch_job_template_is_not_a_gang():
    template = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "etl", "namespace": "data"},
        "spec": {
            "parallelism": 2,
            "template": {
                "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}]}
            },
        },
    }
    spec = JobSpec.from_template("data/etl", template, at(0) - at(0))
    assert (spec.pods, spec.gang) == (2, False)
    with pytest.raises(MemberError):
        JobSpec.from_template("x", {"apiVersion": "v1", "kind": "ConfigMap"}, at(0) - at(0))


def test_the_ready_flag_does_not_stop_running_jobs():
    member = gpu_member(nodes=1)
    member.submit(job("a", gpus=8, minutes=1), at(0))
    member.step(at(0))
    member.set_ready(False, at(0.5))
    assert not member.ready and member.ready_changed_at == at(0.5)
    assert [e.type for e in member.step(at(2))] == [EventType.SUCCEEDED]


def test_a_fleet_steps_every_member():
    from engine.members import Fleet, FleetSpec
    from tests.members.builders import gpu_member as member_of

    spec = FleetSpec((member_of("a").spec, member_of("b").spec))
    fleet = Fleet(spec, at(0))
    fleet["a"].submit(job("x", gpus=8, minutes=3), at(0))
    fleet["b"].submit(job("y", gpus=8, minutes=2), at(0))
    assert [(e.cluster, e.job) for e in fleet.step(at(0))] == [("a", "x"), ("b", "y")]
    assert fleet.next_finish() == at(2)
    with pytest.raises(MemberError):
        fleet["c"]


def test_a_small_pod_packs_onto_the_fullest_node_and_leaves_whole_nodes_whole():
    """kube-scheduler's MostAllocated: the 1-GPU pod goes where the least is left, not to the
    first node, so the 8-GPU pod that comes next still finds a whole node."""
    member = gpu_member(nodes=3)
    member.submit(job("brief", gpus=8, minutes=1), at(0))  # gpu-0-0, done at 1
    member.submit(job("half", gpus=4, minutes=60), at(0))  # gpu-0-1
    member.step(at(0))
    assert member.bindings("half") == {"half-worker-0": "gpu-0-1"}
    member.submit(job("small", gpus=1, minutes=60), at(1))
    member.submit(job("whole-1", gpus=8, minutes=60), at(1))
    member.submit(job("whole-2", gpus=8, minutes=60), at(1))
    member.step(at(1))  # first-fit would put the 1-GPU pod on the empty gpu-0-0
    assert set(member.bindings("small").values()) == {"gpu-0-1"}
    for name in ("whole-1", "whole-2"):
        assert member.job_state(name).pods_bound == 1  # type: ignore[union-attr]
