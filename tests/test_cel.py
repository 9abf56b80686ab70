"""CEL evaluation: typed variables, quantity(), errors as values, safety under threads."""

from __future__ import annotations

import datetime as dt
import sys
import threading

import pytest

from engine.policy import cel
from engine.policy.celcheck import BOOL, DOUBLE, INT, STRING

NOW = dt.datetime(2026, 11, 21, 12, 0, tzinfo=dt.UTC)


def job(**over):
    base = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "namespace": "team-a",
        "name": "train",
        "uid": "u1",
        "labels": {"fleetgate.io/queue": "research"},
        "annotations": {},
        "queue": "research",
        "specQueue": "",
        "tenant": "research",
        "priority": 100,
        "priorityClassName": "high",
        "components": [
            {"name": "master", "replicas": 1, "requests": {"cpu": 4, "nvidia.com/gpu": 8}},
            {"name": "worker", "replicas": 3, "requests": {"cpu": 4, "nvidia.com/gpu": 8}},
        ],
        "total": {"cpu": 16, "nvidia.com/gpu": 32, "pods": 4},
        "minMember": 4,
        "resizable": False,
        "createdAt": NOW - dt.timedelta(hours=2),
        "object": {"spec": {"runPolicy": {"suspend": True}}},
    }
    return base | over


def run(text, expected, variables=cel.MAPPING_VARS, **values):
    program = cel.compile_expression(text, variables, expected)
    assert isinstance(program, cel.CelProgram), program
    return program.evaluate(cel.activation(variables, **values))


@pytest.mark.parametrize(
    ("text", "expected", "result"),
    [
        ('job.labels["fleetgate.io/queue"]', STRING, "research"),
        ('job.total["nvidia.com/gpu"] >= 32.0', BOOL, True),
        ("job.components.all(c, c.requests['nvidia.com/gpu'] == 8.0)", BOOL, True),
        ("job.components.map(c, c.replicas).size()", INT, 2),
        ("job.priority + 1000", INT, 1100),
        ("now - job.createdAt > duration('1h')", BOOL, True),
        ("job.object.spec.runPolicy.suspend", BOOL, True),
        ('quantity("8Gi") == 8589934592.0', BOOL, True),
        ('quantity("500m")', DOUBLE, 0.5),
        ("job.minMember", DOUBLE, 4.0),  # an int where a double is expected is widened
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_evaluates_with_typed_variables(text, expected, result):
    assert run(text, expected, job=job(), now=NOW) == result


def test_quantities_are_doubles_even_when_whole():
    assert run('job.total["cpu"]', DOUBLE, job=job(), now=NOW) == 16.0
    program = cel.compile_expression('job.total["cpu"] * 2', cel.MAPPING_VARS, DOUBLE)
    assert isinstance(program, list)
    assert "write 2.0" in program[0].message


def test_quantities_compare_with_int_literals_as_in_kubernetes():
    assert run('job.total["cpu"] > 8', BOOL, job=job(), now=NOW) is True
    assert run('job.total["nvidia.com/gpu"] <= 31', BOOL, job=job(), now=NOW) is False


@pytest.mark.parametrize(
    ("text", "expected", "fragment"),
    [
        ('job.labels["missing"]', STRING, "missing"),
        ("job.priority / 0", INT, "divide by zero"),
        ('quantity("8GB") > 1.0', BOOL, "'8GB' is not a quantity"),
        ("job.object.spec.nothing", BOOL, "nothing"),
        ("job.object.spec.runPolicy", BOOL, "expected bool"),
    ],
    ids=["missing map key", "division by zero", "bad quantity", "missing dyn field", "dyn type"],
)
def test_runtime_errors_are_values_not_exceptions(text, expected, fragment):
    result = run(text, expected, job=job(), now=NOW)
    assert isinstance(result, cel.CelError)
    assert fragment in result.message
    assert result.expression == text


def test_placement_expression_sees_job_cluster_queue():
    cluster = {
        "name": "gpu-east",
        "labels": {"gpu.fleetgate.io/model": "h100"},
        "provider": "aws",
        "region": "us-east-1",
        "zones": ["us-east-1a"],
        "allocatable": {"nvidia.com/gpu": 32},
        "free": {"nvidia.com/gpu": 16},
        "ready": True,
        "taints": [{"key": "spot", "value": "", "effect": "NoSchedule"}],
    }
    queue = {
        "name": "research",
        "parent": "",
        "priority": 10,
        "weight": 2,
        "guarantee": {"nvidia.com/gpu": 32},
        "max": {},
        "usage": {"nvidia.com/gpu": 8},
    }
    text = (
        'cluster.free["nvidia.com/gpu"] >= job.total["nvidia.com/gpu"] / 2.0'
        ' && queue.usage["nvidia.com/gpu"] < queue.guarantee["nvidia.com/gpu"]'
        ' && !cluster.taints.exists(t, t.effect == "NoExecute")'
    )
    result = run(text, BOOL, cel.PLACEMENT_VARS, job=job(), cluster=cluster, queue=queue, now=NOW)
    assert result is True


def test_activation_is_reused_and_extended_without_mutation():
    base = cel.activation(cel.PLACEMENT_VARS, job=job(), now=NOW)
    program = cel.compile_expression('cluster.name + "/" + job.name', cel.PLACEMENT_VARS, STRING)
    assert isinstance(program, cel.CelProgram)
    names = [
        program.evaluate(base.extend(cel.PLACEMENT_VARS, cluster={"name": n})) for n in ("a", "b")
    ]
    assert names == ["a/train", "b/train"]
    assert "cluster" not in base.values


def test_concurrent_evaluation_is_isolated():
    """celpy's own CompiledRunner shares the activation through module globals; ours must not.

    Threads evaluate the same and different programs at once, each with its own variables, while
    the interpreter switches threads as often as it can; every result must be the thread's own.
    """
    doubled = cel.compile_expression("job.priority * 2 + 1", cel.MAPPING_VARS, INT)
    named = cel.compile_expression(
        'job.name + "-" + string(job.priority)', cel.MAPPING_VARS, STRING
    )
    assert isinstance(doubled, cel.CelProgram)
    assert isinstance(named, cel.CelProgram)
    wrong: list[str] = []
    barrier = threading.Barrier(8)

    def worker(index: int) -> None:
        act = cel.activation(cel.MAPPING_VARS, job=job(priority=index, name=f"j{index}"), now=NOW)
        barrier.wait()
        for _ in range(300):
            a, b = doubled.evaluate(act), named.evaluate(act)
            if a != index * 2 + 1 or b != f"j{index}-{index}":
                wrong.append(f"thread {index} got {a!r}, {b!r}")

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
    finally:
        sys.setswitchinterval(interval)
    assert not any(t.is_alive() for t in threads)
    assert wrong == []


def test_compile_reports_syntax_error_position():
    issues = cel.compile_expression("job.name ==", cel.MAPPING_VARS, BOOL)
    assert isinstance(issues, list)
    assert issues[0].message.startswith("CEL syntax error")
    assert issues[0].column >= 10


def test_result_type_mismatch_is_a_compile_issue():
    issues = cel.compile_expression("job.name", cel.MAPPING_VARS, BOOL)
    assert isinstance(issues, list)
    assert issues[0].message == "CEL type error: expression gives string, expected bool"
