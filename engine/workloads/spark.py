"""Spark on Kubernetes: ``sparkoperator.k8s.io/v1beta2`` SparkApplication (kubeflow/spark-operator).

The operator does not write pod templates; Spark's Kubernetes backend builds the pods from the
driver/executor fields, so the demand is computed the way Spark computes it.

Per pod (Spark ``BasicDriverFeatureStep``/``BasicExecutorFeatureStep`` and
``ResourceProfile.calculateOverHeadMemory``):

* cpu request: ``coreRequest`` (a Kubernetes quantity, becomes
  ``spark.kubernetes.{driver,executor}.request.cores``) if set, else ``cores`` (whole cores,
  operator default 1). ``coreLimit`` only sets the limit and never changes the request.
* memory request = ``memory`` + overhead, in whole MiB. ``memory`` is a JVM size string
  (``512m``, ``1g``, ``2G``, ``1024k``, ``1t``; binary units, case-insensitive, no suffix = MiB,
  no fractions) read by ``byteStringAsMb``, which truncates to whole MiB. Overhead is
  ``memoryOverhead`` (JVM string) if set, else ``max(int(factor × memoryMiB), 384)`` where
  ``factor`` is ``spec.memoryOverheadFactor`` if set, else 0.10 for Java/Scala and 0.40 for
  Python/R. ``int()`` truncates as Scala's ``.toInt`` does: ``4g`` → 4096 + 409 (not 409.6) =
  4505 MiB. Spark multiplies in double precision; so does this module, to agree to the MiB.
* executors also get ``spark.memory.offHeap.size`` (when ``spark.memory.offHeap.enabled``) and,
  for Python, ``spark.executor.pyspark.memory`` from ``sparkConf`` (Spark's ``totalMemMiB``).
* ``gpu: {name, quantity}`` becomes a limit ``<name>: quantity`` on the Spark container, which
  Kubernetes copies to the request.
* ``sidecars`` and ``initContainers`` are added to the pod by the operator's webhook; their
  requests count by the usual pod rules.

Koordinator batch pods (``engine.workloads.colocation``): a driver or executor whose own
``priorityClassName`` is ``koord-batch`` (the operator's webhook, ``addPriorityClassName``, puts
that field on the pod) asks for ``kubernetes.io/batch-cpu`` in milli-cores and
``kubernetes.io/batch-memory`` instead of cpu and memory, sidecars and init containers included.
``batchSchedulerOptions.priorityClassName`` goes to the batch scheduler's PodGroup, not the pods.

Pods: one driver plus the executors Spark asks for at start. Without dynamic allocation that is
``executor.instances`` (the operator defaults it to 1, ``api/v1beta2/defaults.go``). With dynamic
allocation it is Spark's ``getDynamicAllocationInitialExecutors``:
``max(instances, initialExecutors, minExecutors)`` with absent values as 0 (the same rule as the
operator's ``GetInitialExecutorNumber`` in ``pkg/util``), so it can be 0.

Gang minimum: with ``batchScheduler: volcano``, 1 (the driver), as the operator's Volcano
integration (``internal/scheduler/volcano``) writes the PodGroup in cluster mode: minMember 1,
because the executors do not exist until the driver runs and asks for them, and minResources
for the driver plus every initial executor (``GetInitialExecutorNumber``, the count above), so
the demand still counts every pod. Otherwise every pod (driver + initial executors), which is
what the YuniKorn integration asks for (task groups: driver 1 + executors = initial executors).

Not read: ``spec.driver.template``/``spec.executor.template`` pod templates, client mode (no
driver pod), and sparkConf keys other than the ones named in ``_CONF``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from engine.errors import QuantityError
from engine.quantity import parse_quantity
from engine.resources import Resources
from engine.workloads.colocation import batch_resources, is_batch_pod
from engine.workloads.common import workload
from engine.workloads.model import DemandError, Role, Workload
from engine.workloads.pods import container_requests, expect_int, expect_list, expect_mapping

MIB = 2**20
MIN_OVERHEAD_MIB = 384  # ResourceProfile.MEMORY_OVERHEAD_MIN_MIB
JVM_FACTOR = 0.10  # spark.{driver,executor}.memoryOverheadFactor default
NON_JVM_FACTOR = 0.40  # Constants.NON_JVM_MEMORY_OVERHEAD_FACTOR (Python, R)
DEFAULT_MEMORY = "1g"  # operator default for driver and executor memory
DEFAULT_CORES = 1
DEFAULT_INSTANCES = 1  # operator default when dynamic allocation is off
VOLCANO = "volcano"  # spec.batchScheduler value of the operator's Volcano integration
APP_TYPES = {"Java": True, "Scala": True, "Python": False, "R": False}  # type → is JVM

# JavaUtils.byteStringAs suffixes, as bytes.
_JVM_UNITS = {
    "b": 1,
    "k": 2**10,
    "kb": 2**10,
    "m": 2**20,
    "mb": 2**20,
    "g": 2**30,
    "gb": 2**30,
    "t": 2**40,
    "tb": 2**40,
    "p": 2**50,
    "pb": 2**50,
}
_JVM_SIZE = re.compile(r"([0-9]+)([a-z]*)")
_JVM_FRACTION = re.compile(r"[0-9]+\.[0-9]+[a-z]*")

# sparkConf keys read when the matching spec field is absent (the operator leaves the field
# unset when sparkConf has the key, and spark-submit then uses the conf value).
_CONF = {
    "instances": "spark.executor.instances",
    "dynamic": "spark.dynamicAllocation.enabled",
}


def jvm_mebibytes(value: Any, path: str) -> int:
    """A JVM size string as whole MiB, the way Spark's ``byteStringAsMb`` reads it."""
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise DemandError(path, f"expected a JVM size like '512m' or '2g', got {value!r}")
    text = str(value).strip().lower()
    if _JVM_FRACTION.fullmatch(text):
        raise DemandError(path, f"fractional JVM sizes are not supported: {value!r}")
    match = _JVM_SIZE.fullmatch(text)
    if match is None or match[2] not in ("", *_JVM_UNITS):
        raise DemandError(
            path, f"{value!r} is not a JVM size: a whole number with b, k, m, g, t or p"
        )
    unit = _JVM_UNITS[match[2]] if match[2] else MIB
    return int(match[1]) * unit // MIB


def overhead_factor(spec: Mapping[str, Any]) -> float:
    """``spec.memoryOverheadFactor`` (a string in the CRD), else the default for ``spec.type``."""
    raw = spec.get("memoryOverheadFactor")
    if raw is None:
        return JVM_FACTOR if _is_jvm(spec) else NON_JVM_FACTOR
    if isinstance(raw, bool) or not isinstance(raw, str | int | float):
        raise DemandError("spec.memoryOverheadFactor", f"expected a number, got {raw!r}")
    try:
        factor = float(raw)
    except ValueError as err:
        raise DemandError("spec.memoryOverheadFactor", f"not a number: {raw!r}") from err
    if not (math.isfinite(factor) and factor >= 0):
        raise DemandError("spec.memoryOverheadFactor", f"must be a number >= 0, got {raw!r}")
    return factor


def _is_jvm(spec: Mapping[str, Any]) -> bool:
    kind = spec.get("type", "Scala")
    if not isinstance(kind, str) or kind not in APP_TYPES:
        raise DemandError("spec.type", f"expected one of {', '.join(APP_TYPES)}, got {kind!r}")
    return APP_TYPES[kind]


def pod_memory_mib(pod: Mapping[str, Any], factor: float, path: str) -> int:
    """Spark's memory request for one pod, in MiB: memory + overhead."""
    memory = jvm_mebibytes(pod.get("memory", DEFAULT_MEMORY), f"{path}.memory")
    if pod.get("memoryOverhead") is not None:
        overhead = jvm_mebibytes(pod["memoryOverhead"], f"{path}.memoryOverhead")
    else:
        overhead = max(int(factor * memory), MIN_OVERHEAD_MIB)
    return memory + overhead


def pod_cpu(pod: Mapping[str, Any], path: str) -> Fraction:
    if pod.get("coreRequest") is not None:
        raw = pod["coreRequest"]
        try:
            cpu = parse_quantity(raw)
        except QuantityError as err:
            raise DemandError(f"{path}.coreRequest", str(err)) from err
        if cpu <= 0:
            raise DemandError(f"{path}.coreRequest", f"must be positive, got {raw!r}")
        return cpu
    return Fraction(expect_int(pod.get("cores"), f"{path}.cores", DEFAULT_CORES, minimum=1))


def executor_extra_mib(spec: Mapping[str, Any]) -> int:
    """Executor memory Spark adds beyond heap + overhead: off-heap and (Python) PySpark memory."""
    conf = _spark_conf(spec)
    extra = 0
    if str(conf.get("spark.memory.offHeap.enabled", "false")).strip().lower() == "true":
        key = "spark.memory.offHeap.size"
        if key in conf:
            extra += jvm_mebibytes(conf[key], f'spec.sparkConf["{key}"]')
    key = "spark.executor.pyspark.memory"
    if spec.get("type") == "Python" and key in conf:
        extra += jvm_mebibytes(conf[key], f'spec.sparkConf["{key}"]')
    return extra


def pod_resources(
    pod: Mapping[str, Any], factor: float, path: str, extra_mib: int = 0
) -> Resources:
    """Requests of one driver or executor pod, built as Spark builds its containers."""
    batch = is_batch_pod(pod.get("priorityClassName"))
    main: dict[str, Fraction] = {
        "cpu": pod_cpu(pod, path),
        "memory": Fraction((pod_memory_mib(pod, factor, path) + extra_mib) * MIB),
    }
    gpu = expect_mapping(pod.get("gpu"), f"{path}.gpu")
    if gpu:
        name = gpu.get("name")
        if not isinstance(name, str) or not name:
            raise DemandError(f"{path}.gpu.name", "required (a resource name like nvidia.com/gpu)")
        main[name] = Fraction(expect_int(gpu.get("quantity"), f"{path}.gpu.quantity"))
    total = batch_resources(main) if batch else Resources(main)
    for i, sidecar in enumerate(expect_list(pod.get("sidecars"), f"{path}.sidecars")):
        total = total + container_requests(sidecar, f"{path}.sidecars[{i}]", batch=batch)
    init_peak = Resources()
    for i, init in enumerate(expect_list(pod.get("initContainers"), f"{path}.initContainers")):
        where = f"{path}.initContainers[{i}]"
        init_peak = init_peak.maximum(container_requests(init, where, batch=batch))
    return total.maximum(init_peak)


def executor_count(spec: Mapping[str, Any], executor: Mapping[str, Any]) -> int:
    conf = _spark_conf(spec)
    instances_path = "spec.executor.instances"
    instances_raw = executor.get("instances")
    if instances_raw is None and _CONF["instances"] in conf:
        instances_path = f'spec.sparkConf["{_CONF["instances"]}"]'
        instances_raw = _conf_int(conf[_CONF["instances"]], instances_path)
    dynamic = expect_mapping(spec.get("dynamicAllocation"), "spec.dynamicAllocation")
    if dynamic:
        enabled = dynamic.get("enabled", False)
        if not isinstance(enabled, bool):
            raise DemandError("spec.dynamicAllocation.enabled", f"expected a boolean: {enabled!r}")
    else:
        enabled = str(conf.get(_CONF["dynamic"], "false")).strip().lower() == "true"
    if not enabled:
        return expect_int(instances_raw, instances_path, DEFAULT_INSTANCES)
    return max(
        expect_int(instances_raw, instances_path, 0),
        expect_int(dynamic.get("initialExecutors"), "spec.dynamicAllocation.initialExecutors", 0),
        expect_int(dynamic.get("minExecutors"), "spec.dynamicAllocation.minExecutors", 0),
    )


def _spark_conf(spec: Mapping[str, Any]) -> Mapping[str, Any]:
    return expect_mapping(spec.get("sparkConf"), "spec.sparkConf")


def _conf_int(raw: Any, path: str) -> int:
    try:
        return int(str(raw).strip())
    except ValueError as err:
        raise DemandError(path, f"expected an integer, got {raw!r}") from err


def _optional_string(raw: Any, path: str) -> str | None:
    if raw is None:
        return None
    if not isinstance(raw, str):
        raise DemandError(path, f"expected a string, got {raw!r}")
    return raw


def read_spark_application(obj: Mapping[str, Any]) -> Workload:
    spec = expect_mapping(obj.get("spec"), "spec")
    factor = overhead_factor(spec)
    driver = expect_mapping(spec.get("driver"), "spec.driver")
    executor = expect_mapping(spec.get("executor"), "spec.executor")
    roles = [
        Role("driver", 1, pod_resources(driver, factor, "spec.driver")),
        Role(
            "executor",
            executor_count(spec, executor),
            pod_resources(executor, factor, "spec.executor", executor_extra_mib(spec)),
        ),
    ]
    options = expect_mapping(spec.get("batchSchedulerOptions"), "spec.batchSchedulerOptions")
    priority = _optional_string(
        options.get("priorityClassName"), "spec.batchSchedulerOptions.priorityClassName"
    ) or _optional_string(driver.get("priorityClassName"), "spec.driver.priorityClassName")
    scheduler = _optional_string(spec.get("batchScheduler"), "spec.batchScheduler")
    return workload(
        obj,
        roles,
        min_member=1 if scheduler == VOLCANO else sum(role.replicas for role in roles),
        resizable=False,
        priority_class_name=priority,
        queue=_optional_string(options.get("queue"), "spec.batchSchedulerOptions.queue"),
    )


READERS = {("sparkoperator.k8s.io/v1beta2", "SparkApplication"): read_spark_application}
