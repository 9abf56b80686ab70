"""SparkApplication demand: Spark's pod sizing (JVM units, overhead, cores), executor count."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from engine.quantity import parse_quantity
from engine.resources import Resources
from engine.workloads.model import DemandError
from engine.workloads.registry import read_workload

MIB = 2**20


def res(cpu: str | int, memory_mib: int, **extra: str | int) -> Resources:
    """Resources from cpu (a quantity), memory in MiB and extras (``nvidia_com_gpu``)."""
    amounts = {k.replace("nvidia_com_", "nvidia.com/"): parse_quantity(v) for k, v in extra.items()}
    return Resources({"cpu": parse_quantity(cpu), "memory": memory_mib * MIB, **amounts})


def app(
    driver: dict | None = None,
    executor: dict | None = None,
    *,
    kind: str | None = "Scala",
    **spec: Any,
) -> dict:
    body: dict[str, Any] = {
        "mode": "cluster",
        "image": "spark:3.5.5",
        "mainApplicationFile": "local:///opt/spark/examples/jars/spark-examples.jar",
        "driver": driver if driver is not None else {"cores": 1, "memory": "512m"},
        "executor": executor if executor is not None else {"instances": 1, "memory": "512m"},
        **spec,
    }
    if kind is not None:
        body["type"] = kind
    return {
        "apiVersion": "sparkoperator.k8s.io/v1beta2",
        "kind": "SparkApplication",
        "metadata": {"name": "pi", "namespace": "analytics"},
        "spec": body,
    }


DRIVER_512 = res(1, 512 + 384)

READS = [
    pytest.param(
        app(executor={"instances": 2, "cores": 1, "memory": "4g"}),
        [("driver", 1, DRIVER_512), ("executor", 2, res(1, 4096 + 409))],
        3,
        id="a 4g JVM executor gets 10 percent overhead truncated to whole MiB (4505, not 4505.6)",
    ),
    pytest.param(
        app(executor={"instances": 1, "memory": "2g"}, kind="Python"),
        [("driver", 1, res(1, 512 + 384)), ("executor", 1, res(1, 2048 + 819))],
        2,
        id="a Python application takes 40 percent overhead (2g gets 819 MiB)",
    ),
    pytest.param(
        app(executor={"instances": 1, "memory": "2g"}, kind="R"),
        [("driver", 1, DRIVER_512), ("executor", 1, res(1, 2048 + 819))],
        2,
        id="an R application also takes the non-JVM 40 percent overhead",
    ),
    pytest.param(
        app(driver={"memory": "1g"}, executor={"memory": "1g"}, kind="Java"),
        [("driver", 1, res(1, 1024 + 384)), ("executor", 1, res(1, 1024 + 384))],
        2,
        id="an overhead below 384 MiB is raised to the 384 MiB floor",
    ),
    pytest.param(
        app(executor={"instances": 1, "memory": "4g", "memoryOverhead": "1g"}),
        [("driver", 1, DRIVER_512), ("executor", 1, res(1, 4096 + 1024))],
        2,
        id="an explicit memoryOverhead replaces the factor and the floor",
    ),
    pytest.param(
        app(driver={"memory": "1g", "memoryOverhead": "100m"}),
        [("driver", 1, res(1, 1024 + 100)), ("executor", 1, res(1, 512 + 384))],
        2,
        id="an explicit overhead smaller than 384 MiB is taken as given",
    ),
    pytest.param(
        app(executor={"instances": 1, "memory": "10g"}, memoryOverheadFactor="0.2"),
        [("driver", 1, DRIVER_512), ("executor", 1, res(1, 10240 + 2048))],
        2,
        id="spec.memoryOverheadFactor overrides the default factor for both roles",
    ),
    pytest.param(
        app(executor={"instances": 1, "memory": "4g"}, kind="Python", memoryOverheadFactor="0.1"),
        [("driver", 1, DRIVER_512), ("executor", 1, res(1, 4096 + 409))],
        2,
        id="an explicit factor wins over the Python default",
    ),
    pytest.param(
        app(
            executor={"instances": 1, "memory": "4g"},
            kind="Python",
            sparkConf={
                "spark.memory.offHeap.enabled": "true",
                "spark.memory.offHeap.size": "1g",
                "spark.executor.pyspark.memory": "512m",
            },
        ),
        [("driver", 1, DRIVER_512), ("executor", 1, res(1, 4096 + 1638 + 1024 + 512))],
        2,
        id="executor off-heap and PySpark memory from sparkConf add to the executor request",
    ),
    pytest.param(
        app(
            executor={"instances": 1, "memory": "4g"},
            sparkConf={"spark.memory.offHeap.size": "1g", "spark.executor.pyspark.memory": "1g"},
        ),
        [("driver", 1, DRIVER_512), ("executor", 1, res(1, 4096 + 409))],
        2,
        id="off-heap size without offHeap.enabled and PySpark memory in a Scala app add nothing",
    ),
    pytest.param(
        app(
            executor={
                "instances": 2,
                "cores": 4,
                "coreRequest": "500m",
                "coreLimit": "4",
                "memory": "512m",
            }
        ),
        [("driver", 1, DRIVER_512), ("executor", 2, res("500m", 512 + 384))],
        3,
        id="coreRequest sets the cpu request instead of cores and coreLimit changes nothing",
    ),
    pytest.param(
        app(driver={"cores": 2, "coreLimit": "3", "memory": "512m"}),
        [("driver", 1, res(2, 512 + 384)), ("executor", 1, res(1, 512 + 384))],
        2,
        id="without coreRequest the cpu request is the whole cores",
    ),
    pytest.param(
        app(driver={"memory": "2G"}, executor={"instances": 1, "memory": "4096M"}),
        [("driver", 1, res(1, 2048 + 384)), ("executor", 1, res(1, 4096 + 409))],
        2,
        id="JVM units are binary and case-insensitive (2G is 2048 MiB, 4096M is 4 GiB)",
    ),
    pytest.param(
        app(driver={"memory": "1024k"}, executor={"instances": 1, "memory": "1536"}),
        [("driver", 1, res(1, 1 + 384)), ("executor", 1, res(1, 1536 + 384))],
        2,
        id="1024k is one MiB and a size with no suffix is MiB",
    ),
    pytest.param(
        app(driver={"memory": "1500k"}, executor={"instances": 1, "memory": "1t"}),
        [("driver", 1, res(1, 1 + 384)), ("executor", 1, res(1, 2**20 + 104857))],
        2,
        id="sizes are truncated to whole MiB and 1t is a tebibyte",
    ),
    pytest.param(
        app(driver={"memory": 1024}, executor={"instances": 1, "memory": "2gb"}),
        [("driver", 1, res(1, 1024 + 384)), ("executor", 1, res(1, 2048 + 384))],
        2,
        id="a bare YAML number is MiB and the gb suffix means GiB",
    ),
    pytest.param(
        app(driver={}, executor={}, kind=None),
        [("driver", 1, res(1, 1024 + 384)), ("executor", 1, res(1, 1024 + 384))],
        2,
        id="with nothing set the operator defaults give 1 core, 1g and one Scala executor",
    ),
    pytest.param(
        app(
            executor={"instances": 1, "memory": "512m"},
            dynamicAllocation={
                "enabled": True,
                "initialExecutors": 2,
                "minExecutors": 1,
                "maxExecutors": 5,
            },
        ),
        [("driver", 1, DRIVER_512), ("executor", 2, res(1, 512 + 384))],
        3,
        id="dynamic allocation starts max(instances, initialExecutors, minExecutors) executors",
    ),
    pytest.param(
        app(
            executor={"memory": "512m"},
            dynamicAllocation={"enabled": True, "minExecutors": 3, "maxExecutors": 10},
        ),
        [("driver", 1, DRIVER_512), ("executor", 3, res(1, 512 + 384))],
        4,
        id="dynamic allocation without initialExecutors starts minExecutors",
    ),
    pytest.param(
        app(executor={"instances": 4, "memory": "512m"}, dynamicAllocation={"enabled": True}),
        [("driver", 1, DRIVER_512), ("executor", 4, res(1, 512 + 384))],
        5,
        id="dynamic allocation keeps executor.instances when it is the largest",
    ),
    pytest.param(
        app(executor={"memory": "512m"}, dynamicAllocation={"enabled": True}),
        [("driver", 1, DRIVER_512), ("executor", 0, res(1, 512 + 384))],
        1,
        id="dynamic allocation with no counts starts no executors, only the driver",
    ),
    pytest.param(
        app(
            executor={"instances": 2, "memory": "512m"},
            dynamicAllocation={"enabled": False, "initialExecutors": 9},
        ),
        [("driver", 1, DRIVER_512), ("executor", 2, res(1, 512 + 384))],
        3,
        id="disabled dynamic allocation ignores its executor counts",
    ),
    pytest.param(
        app(
            executor={"memory": "512m"},
            sparkConf={"spark.executor.instances": "4"},
        ),
        [("driver", 1, DRIVER_512), ("executor", 4, res(1, 512 + 384))],
        5,
        id="spark.executor.instances in sparkConf counts when the field is absent",
    ),
    pytest.param(
        app(
            executor={"memory": "512m"},
            sparkConf={"spark.dynamicAllocation.enabled": "true"},
        ),
        [("driver", 1, DRIVER_512), ("executor", 0, res(1, 512 + 384))],
        1,
        id="dynamic allocation can be switched on through sparkConf",
    ),
    pytest.param(
        app(
            executor={
                "instances": 2,
                "cores": 4,
                "memory": "8g",
                "gpu": {"name": "nvidia.com/gpu", "quantity": 1},
            },
            kind="Python",
        ),
        [
            ("driver", 1, DRIVER_512),
            ("executor", 2, res(4, 8192 + 3276, nvidia_com_gpu=1)),
        ],
        3,
        id="a gpu on the executor becomes a request of that resource on each executor",
    ),
    pytest.param(
        app(
            driver={
                "memory": "512m",
                "sidecars": [
                    {"name": "log", "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}},
                    {"name": "gpu-only", "resources": {"limits": {"nvidia.com/gpu": 1}}},
                ],
                "initContainers": [
                    {"name": "fetch", "resources": {"requests": {"cpu": "3", "memory": "16Mi"}}}
                ],
            },
        ),
        [
            ("driver", 1, Resources({"cpu": 3, "memory": 960 * MIB, "nvidia.com/gpu": 1})),
            ("executor", 1, res(1, 512 + 384)),
        ],
        2,
        id="sidecars add to the pod and a larger init container raises the cpu",
    ),
]


@pytest.mark.parametrize(("obj", "roles", "min_member"), READS)
def test_spark_application_demand(obj, roles, min_member):
    workload = read_workload(obj)
    assert [(r.name, r.replicas, r.requests) for r in workload.roles] == roles
    assert workload.min_member == min_member
    assert workload.resizable is False
    assert workload.pods == sum(replicas for _, replicas, _ in roles)


def test_with_volcano_the_gang_minimum_is_the_driver_and_the_demand_is_every_pod():
    """The operator's Volcano PodGroup: minMember 1 (the driver runs first and asks for its
    executors), minResources for the driver and every initial executor."""
    workload = read_workload(
        app(
            executor={"instances": 1, "memory": "512m"},
            batchScheduler="volcano",
            dynamicAllocation={"enabled": True, "initialExecutors": 3, "maxExecutors": 10},
        )
    )
    assert workload.min_member == 1
    assert [(r.name, r.replicas) for r in workload.roles] == [("driver", 1), ("executor", 3)]
    assert workload.total == res(4, 4 * (512 + 384)) + {"pods": 4}


@pytest.mark.parametrize("scheduler", ["yunikorn", "kube-scheduler", "Volcano"])
def test_other_batch_schedulers_gang_every_pod(scheduler):
    workload = read_workload(
        app(executor={"instances": 2, "memory": "512m"}, batchScheduler=scheduler)
    )
    assert workload.min_member == 3


def test_batch_scheduler_options_give_the_queue_and_priority_hints():
    workload = read_workload(
        app(
            driver={"memory": "512m", "priorityClassName": "low"},
            batchSchedulerOptions={"queue": "etl", "priorityClassName": "high"},
        )
    )
    assert (workload.queue, workload.priority_class_name) == ("etl", "high")


def test_driver_priority_class_is_the_fallback_and_no_queue_is_none():
    workload = read_workload(app(driver={"memory": "512m", "priorityClassName": "low"}))
    assert (workload.queue, workload.priority_class_name) == (None, "low")


def test_the_json_entry_shows_whole_bytes_and_float_cores():
    entry = read_workload(app(executor={"instances": 2, "memory": "4g"})).to_json()
    assert entry["roles"][1] == {
        "name": "executor",
        "replicas": 2,
        "requests": {"cpu": 1.0, "memory": 4505 * MIB},
    }
    assert entry["total"] == {"cpu": 3.0, "memory": (896 + 2 * 4505) * MIB, "pods": 3}


def broken(path: list[Any], value: Any, base: dict | None = None) -> dict:
    obj = copy.deepcopy(base or app())
    target = obj
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return obj


MALFORMED = [
    pytest.param(
        broken(["spec", "executor", "memory"], "1.5g"),
        "spec.executor.memory",
        id="a fractional JVM size is rejected as Spark rejects it",
    ),
    pytest.param(
        broken(["spec", "driver", "memory"], "1Gi"),
        "spec.driver.memory",
        id="Kubernetes quantity syntax is not a JVM size",
    ),
    pytest.param(
        broken(["spec", "driver", "memory"], "lots"),
        "spec.driver.memory",
        id="a memory that is not a size names the driver memory",
    ),
    pytest.param(
        broken(["spec", "executor", "memoryOverhead"], "2x"),
        "spec.executor.memoryOverhead",
        id="a bad memoryOverhead names the executor memoryOverhead",
    ),
    pytest.param(
        broken(["spec", "executor", "coreRequest"], "half"),
        "spec.executor.coreRequest",
        id="a coreRequest that is not a quantity names coreRequest",
    ),
    pytest.param(
        broken(["spec", "executor", "coreRequest"], "0"),
        "spec.executor.coreRequest",
        id="a zero coreRequest is rejected",
    ),
    pytest.param(
        broken(["spec", "driver", "cores"], "2"),
        "spec.driver.cores",
        id="cores given as a string names the driver cores",
    ),
    pytest.param(
        broken(["spec", "driver", "cores"], 0),
        "spec.driver.cores",
        id="zero cores is rejected",
    ),
    pytest.param(
        broken(["spec", "executor", "gpu"], {"quantity": 1}),
        "spec.executor.gpu.name",
        id="a gpu without a name names gpu.name",
    ),
    pytest.param(
        broken(["spec", "executor", "gpu"], {"name": "nvidia.com/gpu", "quantity": -1}),
        "spec.executor.gpu.quantity",
        id="a negative gpu quantity names gpu.quantity",
    ),
    pytest.param(
        broken(["spec", "type"], "Go"),
        "spec.type",
        id="an unknown application type names spec.type",
    ),
    pytest.param(
        broken(["spec", "memoryOverheadFactor"], "abc"),
        "spec.memoryOverheadFactor",
        id="a factor that is not a number names memoryOverheadFactor",
    ),
    pytest.param(
        broken(["spec", "memoryOverheadFactor"], ".inf"),
        "spec.memoryOverheadFactor",
        id="an infinite factor is rejected",
    ),
    pytest.param(
        broken(["spec", "executor", "instances"], -1),
        "spec.executor.instances",
        id="negative instances name executor.instances",
    ),
    pytest.param(
        broken(["spec", "dynamicAllocation"], {"enabled": "yes"}),
        "spec.dynamicAllocation.enabled",
        id="a non-boolean enabled names dynamicAllocation.enabled",
    ),
    pytest.param(
        broken(["spec", "dynamicAllocation"], {"enabled": True, "minExecutors": 1.5}),
        "spec.dynamicAllocation.minExecutors",
        id="a fractional minExecutors names it",
    ),
    pytest.param(
        broken(
            ["spec", "sparkConf"],
            {"spark.executor.instances": "many"},
            broken(["spec", "executor"], {"memory": "512m"}),
        ),
        'spec.sparkConf["spark.executor.instances"]',
        id="a sparkConf instance count that is not a number names the conf key",
    ),
    pytest.param(
        broken(
            ["spec", "driver", "sidecars"],
            [{"name": "s", "resources": {"requests": {"cpu": "fast"}}}],
        ),
        "spec.driver.sidecars[0].resources.requests.cpu",
        id="a bad sidecar quantity names the sidecar field",
    ),
    pytest.param(
        broken(["spec", "batchSchedulerOptions"], {"queue": 5}),
        "spec.batchSchedulerOptions.queue",
        id="a queue that is not a string names batchSchedulerOptions.queue",
    ),
    pytest.param(
        broken(["spec", "executor"], ["not", "a", "map"]),
        "spec.executor",
        id="an executor that is not an object names spec.executor",
    ),
    pytest.param(
        broken(
            ["spec", "sparkConf"],
            {"spark.memory.offHeap.enabled": "true", "spark.memory.offHeap.size": "1.5g"},
        ),
        'spec.sparkConf["spark.memory.offHeap.size"]',
        id="a bad off-heap size names the sparkConf key",
    ),
    pytest.param(
        broken(["spec", "batchScheduler"], ["volcano"]),
        "spec.batchScheduler",
        id="a batchScheduler that is not a string names spec.batchScheduler",
    ),
    pytest.param(broken(["spec"], "x"), "spec", id="a spec that is not an object names spec"),
]


@pytest.mark.parametrize(("obj", "path"), MALFORMED)
def test_malformed_spark_application_names_the_field(obj, path):
    with pytest.raises(DemandError) as caught:
        read_workload(obj)
    assert caught.value.path == path
