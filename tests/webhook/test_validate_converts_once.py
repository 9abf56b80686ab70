"""One ``/validate/workloads`` review turns the job template into CEL values once, however many
expressions it evaluates (the SchedulingPolicy's queue, tenant and priority, the gang's
minMember and allowSplit, each AdmissionPolicy's match, validations and messages)."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import celpy.celtypes as ct
import pytest

from engine.policy import cel
from tests.webhook.helpers import example, review
from webhook.review import parse_review
from webhook.validate import validate_workload

NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def template() -> dict[str, Any]:
    job = example("PyTorchJob", "llama-pretrain")
    for key in ("uid", "resourceVersion", "creationTimestamp", "generation"):
        job["metadata"].pop(key)
    job.pop("status")
    return job


@pytest.fixture
def counted_maps(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many CEL maps are built, through celpy's json_to_cel or fleetgate's conversion."""
    built = [0]

    class CountedMap(ct.MapType):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            built[0] += 1
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(ct, "MapType", CountedMap)
    return built


def test_a_review_converts_the_template_once(holder, fleet, counted_maps):
    obj = template()
    obj["spec"]["extra"] = {f"field{n}": {"n": n} for n in range(100)}  # a template of many maps
    once = cel.to_cel(obj, cel.DYN)
    maps_of_the_template = counted_maps[0]  # built by one conversion
    counted_maps[0] = 0
    request = parse_review(json.dumps(review(obj)).encode())
    assert validate_workload(request, holder.current, fleet, NOW).allowed
    in_the_review = counted_maps[0]
    assert cel.to_cel(request.object, cel.DYN) == once
    # the template's maps once, plus the job records around it: a few small maps each
    assert in_the_review - maps_of_the_template < 50 < maps_of_the_template


def test_activations_share_the_converted_template_only_within_one_review():
    obj = template()
    with cel.converting_once():
        first = cel.activation(cel.ADMISSION_VARS, object=obj, job={"object": obj})
        second = cel.activation(cel.ADMISSION_VARS, object=obj, job={"object": dict(obj)})
        assert first.values["object"] is second.values["object"]
        job_object = second.values["job"]["object"]
        assert job_object is not second.values["object"]  # a copy of the template's top...
        assert job_object["spec"] is second.values["object"]["spec"]  # ...around the same spec
    third = cel.activation(cel.ADMISSION_VARS, object=obj)
    assert third.values["object"] is not first.values["object"]
    assert third.values["object"] == first.values["object"]
