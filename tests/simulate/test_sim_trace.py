"""Trace files: the fields, the column mapping and units, and errors that name their place."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest

from simulate.columns import OptionError, build_mapping
from simulate.results import GPU
from simulate.trace import TraceError, read_trace

REPO = Path(__file__).resolve().parents[2]
GI = 2**30


def test_fields_roles_and_times(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text(
        "# a comment line\n"
        "name,submit,duration,queue,tenant,kind,roles,priority,cluster,stage,after\n"
        "Prep_1,100,60,q,Team A,Job,worker:2:cpu=500m memory=1Gi,5,east,prep,\n"
        "train,160,3600,q,Team A,MPIJob,launcher:1:cpu=1;worker:4:cpu=8 memory=64Gi gpu=8,,,"
        "train,succeeded:Prep_1\n",
        encoding="utf-8",
    )
    prep, train = read_trace(path).jobs
    assert (prep.name, prep.namespace, prep.submit, prep.duration) == ("prep-1", "team-a", 0, 60)
    assert (prep.api_version, prep.kind, prep.priority, prep.cluster) == (
        "batch/v1",
        "Job",
        5,
        "east",
    )
    assert prep.roles[0].replicas == 2
    assert dict(prep.roles[0].requests) == {"cpu": Fraction(1, 2), "memory": GI}
    assert (train.kind, train.submit, train.gpus) == ("MPIJob", 60, 32)
    assert [r.name for r in train.roles] == ["launcher", "worker"]
    assert train.after == ("succeeded:team-a/prep-1",)
    assert train.source == f"{path}:4"


def test_gpus_are_shaped_into_pods(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("submit,duration,gpus\n0,10,12\n0,10,0\n", encoding="utf-8")
    mapping = build_mapping(per_gpu="cpu=6,memory=40Gi", gpus_per_pod=8)
    gpu_job, cpu_job = read_trace(path, mapping).jobs
    (role,) = gpu_job.roles
    assert role.replicas == 2  # 12 GPUs: two pods of 6
    assert dict(role.requests) == {"cpu": 36, "memory": 240 * GI, GPU: 6}
    assert dict(cpu_job.roles[0].requests) == {"cpu": 1, "memory": 4 * GI}
    assert [j.name for j in (gpu_job, cpu_job)] == ["job-000000", "job-000001"]


def test_philly_style_columns_and_units(tmp_path: Path) -> None:
    path = tmp_path / "philly.csv"
    path.write_text(
        "jobid,vc,user,submitted_time,start_time,end_time,num_gpu,mem_gb\n"
        "app_2,vc1,u2,2017-10-03 05:30:00,2017-10-03 05:31:00,2017-10-03 06:31:00,1,16\n"
        "app_1,vc1,u1,2017-10-03 05:25:00,2017-10-03 05:25:30,2017-10-03 05:35:30,50,\n",
        encoding="utf-8",
    )
    mapping = build_mapping(
        columns="name=jobid,queue=vc,tenant=user,submit=submitted_time,start=start_time,"
        "end=end_time,gpus=num_gpu,memory=mem_gb",
        units="gpus=percent,memory=GB",
    )
    first, second = read_trace(path, mapping).jobs
    assert (first.name, first.submit, first.duration) == ("app-1", 0, 600)  # by submit time
    assert (second.name, second.submit, second.duration) == ("app-2", 300, 3600)
    assert first.gpus == 1 and second.gpus == 1  # 50% of a GPU rounds up to one device
    assert second.roles[0].requests["memory"] == 16 * 10**9
    assert second.queue == "vc1" and second.tenant == "u2"


def test_json_lines(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(
        '{"name": "a", "submit": 5, "duration": 60, "gpus": 2}\n\n'
        '{"name": "b", "submit": 6, "duration": 60, "roles": [{"name": "w", "replicas": 2,'
        ' "requests": {"cpu": "2", "gpu": 1}}], "after": "a"}\n',
        encoding="utf-8",
    )
    a, b = read_trace(path).jobs
    assert a.gpus == 2 and b.gpus == 2 and b.after == ("default/a",)


def test_every_problem_is_named_by_file_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(
        "name,submit,duration,gpus,kind,after\n"
        "a,0,60,1,PyTorchJob,\n"
        "b,soon,60,1,PyTorchJob,\n"
        "c,0,-5,x,Rocket,\n"
        "a,0,60,1,PyTorchJob,ghost\n"
        "d,0,60\n",
        encoding="utf-8",
    )
    with pytest.raises(TraceError) as caught:
        read_trace(path)
    problems = caught.value.problems
    assert (
        f"{path}:3:2: column 'submit' (submit): 'soon' is neither a number nor an ISO "
        "8601 date-time" in problems
    )
    assert (
        f"{path}:4:3: column 'duration' (duration): '-5': a duration cannot be negative" in problems
    )
    assert (
        f"{path}:4:4: column 'gpus' (gpus): 'x' is not a quantity: expected a number with "
        "an optional suffix (n u m k M G T P E, Ki Mi Gi Ti Pi Ei, or an exponent like e3)"
        in problems
    )
    assert any(
        p.startswith(f"{path}:4:5: column 'kind' (kind): unknown kind 'Rocket'") for p in problems
    )
    assert f"{path}:6: 3 cells, the header has 6" in problems
    with pytest.raises(TraceError) as caught:  # names and references, once the rows read
        read_trace(path, skip_bad_rows=True)
    assert caught.value.problems == [
        f"{path}:5:1: column 'name': name 'a' repeats {path}:2",
        f"{path}:5:6: column 'after' (after): no job named 'ghost' in the trace",
    ]


def test_skipping_bad_rows_keeps_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("name,submit,duration,gpus\na,0,60,1\nb,,60,1\nc,1,60,1\n", encoding="utf-8")
    trace = read_trace(path, skip_bad_rows=True)
    assert [j.name for j in trace.jobs] == ["a", "c"]
    assert trace.skipped == (f"{path}:3: no submit time (column 'submit')",)


def test_mapping_options_are_checked() -> None:
    with pytest.raises(OptionError, match="unknown field 'gpu'"):
        build_mapping(columns="gpu=num_gpu")
    with pytest.raises(OptionError, match="--units duration=days: expected one of"):
        build_mapping(units="duration=days")
    with pytest.raises(OptionError, match="'submit' is not FIELD=VALUE"):
        build_mapping(columns="submit")


def test_the_shipped_examples_read() -> None:
    assert len(read_trace(REPO / "examples/traces/small.csv").jobs) == 300
    assert len(read_trace(REPO / "examples/traces/pipeline.csv").jobs) == 30
