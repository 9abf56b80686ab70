"""Events on the user's job (reconciler.recorder): deduplicated, combined and rate-limited as
client-go's event recorder does them."""

from __future__ import annotations

import datetime as dt
from typing import Any

from kubernetes.client.exceptions import ApiException

from engine.enforce import EventSpec
from reconciler.recorder import BURST, COMBINED, SIMILAR_MAX, Recorder, template_of

NOW = dt.datetime(2026, 3, 10, 12, 0, tzinfo=dt.UTC)
JOB = {
    "apiVersion": "kubeflow.org/v1",
    "kind": "PyTorchJob",
    "namespace": "vision",
    "name": "train",
    "uid": "u-1",
}


class Answer:
    def read(self) -> bytes:
        return b"{}"

    def release_conn(self) -> None:
        pass


class FakeCore:
    """What a CoreV1Api would have been asked; ``gone``: Events a PATCH finds deleted."""

    def __init__(self) -> None:
        self.created: list[dict[str, Any]] = []
        self.patched: list[tuple[str, dict[str, Any]]] = []
        self.gone: set[str] = set()

    def create_namespaced_event(self, namespace: str, body: dict[str, Any], **_: Any) -> Answer:
        assert namespace == body["metadata"]["namespace"]
        self.created.append(body)
        return Answer()

    def patch_namespaced_event(self, name: str, _ns: str, body: dict[str, Any], **_: Any):
        if name in self.gone:
            raise ApiException(status=404, reason="Not Found")
        self.patched.append((name, body))
        return Answer()


def recorder(gate: bool = True) -> tuple[Recorder, FakeCore]:
    core = FakeCore()
    return Recorder(core, lambda: 5.0, lambda: gate), core  # type: ignore[arg-type]


def test_the_same_event_again_is_counted_on_the_first():
    rec, core = recorder()
    queued = EventSpec("Normal", "Queued", "queued in research at position 3")
    for minute in range(3):
        rec.record(JOB, queued, NOW + dt.timedelta(minutes=minute))
    (event,) = core.created
    assert event["involvedObject"] == JOB and event["metadata"]["namespace"] == "vision"
    assert (event["reason"], event["count"], event["type"]) == ("Queued", 1, "Normal")
    name = event["metadata"]["name"]
    assert name.startswith("train.")
    assert core.patched == [
        (name, {"count": 2, "lastTimestamp": "2026-03-10T12:01:00Z"}),
        (name, {"count": 3, "lastTimestamp": "2026-03-10T12:02:00Z"}),
    ]


def test_another_object_or_message_is_another_event():
    rec, core = recorder()
    rec.record(JOB, EventSpec("Normal", "Pending", "WaitingForQuota: a"), NOW)
    rec.record({**JOB, "uid": "u-2"}, EventSpec("Normal", "Pending", "WaitingForQuota: a"), NOW)
    rec.record(JOB, EventSpec("Normal", "Pending", "NoClusterFits: b"), NOW)
    assert len(core.created) == 3 and core.patched == []


def test_similar_events_are_combined_from_the_tenth():
    rec, core = recorder()
    for i in range(SIMILAR_MAX + 2):
        rec.record(JOB, EventSpec("Normal", "Pending", f"reason {i}"), NOW)
    messages = [e["message"] for e in core.created]
    assert messages[: SIMILAR_MAX - 1] == [f"reason {i}" for i in range(SIMILAR_MAX - 1)]
    assert messages[SIMILAR_MAX - 1 :] == [
        f"{COMBINED}reason {SIMILAR_MAX - 1}",
        f"{COMBINED}reason {SIMILAR_MAX}",
        f"{COMBINED}reason {SIMILAR_MAX + 1}",
    ]
    # ten minutes later the window starts again
    rec.record(JOB, EventSpec("Normal", "Pending", "later"), NOW + dt.timedelta(minutes=11))
    assert core.created[-1]["message"] == "later"


def test_an_object_gets_a_burst_then_one_event_per_five_minutes():
    rec, core = recorder()
    for i in range(BURST + 5):
        rec.record(JOB, EventSpec("Warning", f"R{i}", "m"), NOW)
    assert len(core.created) == BURST
    rec.record(JOB, EventSpec("Warning", "Late", "m"), NOW + dt.timedelta(minutes=4))
    assert len(core.created) == BURST
    rec.record(JOB, EventSpec("Warning", "Later", "m"), NOW + dt.timedelta(minutes=5))
    assert [e["reason"] for e in core.created[BURST:]] == ["Later"]
    # another object has its own bucket
    rec.record({**JOB, "name": "other", "uid": "u-3"}, EventSpec("Warning", "R", "m"), NOW)
    assert core.created[-1]["involvedObject"]["name"] == "other"


def test_an_event_deleted_since_is_recorded_again_with_its_count():
    rec, core = recorder()
    spec = EventSpec("Normal", "Admitted", "admitted to gpu-east")
    rec.record(JOB, spec, NOW)
    core.gone.add(core.created[0]["metadata"]["name"])
    rec.record(JOB, spec, NOW + dt.timedelta(seconds=1))
    assert len(core.created) == 2 and core.created[1]["count"] == 2


def test_a_replica_that_does_not_lead_sends_nothing():
    rec, core = recorder(gate=False)
    rec.record(JOB, EventSpec("Normal", "Queued", "q"), NOW)
    assert core.created == [] and core.patched == []


def test_the_template_of_a_binding():
    binding = {
        "metadata": {"namespace": "vision", "name": "train-pytorchjob"},
        "spec": {"resource": {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
                              "name": "train", "uid": "u-1", "resourceVersion": "9"}},
    }  # fmt: skip
    assert template_of(binding) == JOB
    assert template_of({"metadata": {}, "spec": {}}) is None
