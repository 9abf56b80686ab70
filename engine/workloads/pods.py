"""Pod resource requests by the Kubernetes rules (``k8s.io/component-helpers`` PodRequests).

Per resource: max(sum of app containers + sum of sidecar init containers, each ordinary init
container + the sidecars started before it) + pod overhead. A limit without a request defaults
the request (as the API server does), which is how GPUs given only as limits are counted.

A Koordinator batch pod (``engine.workloads.colocation``) has each container's and the overhead's
cpu/memory rewritten into ``kubernetes.io/batch-cpu``/``batch-memory`` before they are added up,
as Koordinator's admission webhook rewrites them on the member cluster.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from engine.errors import QuantityError
from engine.quantity import MAX_QUANTITY, parse_quantity
from engine.resources import Resources
from engine.workloads.colocation import batch_resources, is_batch_pod
from engine.workloads.model import DemandError


def pod_requests(
    pod_spec: Any, path: str, *, fallback_priority_class: str | None = None
) -> Resources:
    """Requests of one pod whose ``spec`` is ``pod_spec``; ``path`` locates it for errors.

    ``fallback_priority_class`` is the class a controller gives the pod when its spec names none
    (Volcano copies the job's ``spec.priorityClassName``).
    """
    spec = expect_mapping(pod_spec, path)
    batch = pod_is_batch(spec, fallback_priority_class)
    containers = expect_list(spec.get("containers"), f"{path}.containers")
    if not containers:
        raise DemandError(f"{path}.containers", "a pod needs at least one container")
    total = Resources()
    for i, container in enumerate(containers):
        total = total + container_requests(container, f"{path}.containers[{i}]", batch=batch)
    sidecars = Resources()
    init_peak = Resources()
    for i, container in enumerate(
        expect_list(spec.get("initContainers"), f"{path}.initContainers")
    ):
        where = f"{path}.initContainers[{i}]"
        own = container_requests(container, where, batch=batch)
        if expect_mapping(container, where).get("restartPolicy") == "Always":
            total = total + own  # a sidecar runs for the pod's whole life
            sidecars = sidecars + own
            init_peak = init_peak.maximum(sidecars)
        else:
            init_peak = init_peak.maximum(own + sidecars)
    overhead = amounts(spec.get("overhead"), f"{path}.overhead")
    return total.maximum(init_peak) + (batch_resources(overhead) if batch else overhead)


def pod_is_batch(spec: Mapping[str, Any], fallback_priority_class: str | None = None) -> bool:
    """Whether Koordinator runs this pod on batch resources (its class, else the fallback)."""
    priority_class = spec.get("priorityClassName") or fallback_priority_class
    return is_batch_pod(priority_class, spec.get("priority"))


def container_requests(container: Any, path: str, *, batch: bool = False) -> Resources:
    """One container's requests (a limit without a request counts); ``batch``: Koordinator's."""
    resources = expect_mapping(
        expect_mapping(container, path).get("resources"), f"{path}.resources"
    )
    requests = amounts(resources.get("requests"), f"{path}.resources.requests")
    limits = amounts(resources.get("limits"), f"{path}.resources.limits")
    merged = {**limits, **requests}
    return batch_resources(merged) if batch else Resources(merged)


def amounts(raw: Any, path: str) -> dict[str, Fraction]:
    """A ResourceList (name → quantity) as exact amounts; a bad quantity names its field."""
    result: dict[str, Fraction] = {}
    for name, value in expect_mapping(raw, path).items():
        where = f"{path}.{name}" if str(name).isidentifier() else f'{path}["{name}"]'
        try:
            amount = parse_quantity(value)
        except QuantityError as err:
            raise DemandError(where, str(err)) from err
        if amount < 0:
            raise DemandError(where, f"negative quantity {value!r}")
        result[str(name)] = amount
    return result


def expect_mapping(value: Any, path: str) -> Mapping[str, Any]:
    """``value`` as a mapping; None (an absent field) is an empty one."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise DemandError(path, f"expected an object, got {type(value).__name__}")
    return value


def expect_list(value: Any, path: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise DemandError(path, f"expected a list, got {type(value).__name__}")
    return value


def expect_int(value: Any, path: str, default: int | None = None, minimum: int = 0) -> int:
    """An integer field (absent → ``default``); bools, negative numbers and numbers beyond
    int64 (as Kubernetes stores them; counts times quantities then stay within a float) are
    errors."""
    if value is None:
        if default is None:
            raise DemandError(path, "required")
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise DemandError(path, f"expected an integer, got {value!r}")
    if value < minimum:
        raise DemandError(path, f"must be at least {minimum}, got {value}")
    if value > MAX_QUANTITY:  # str() of a huge int is slow, and refused past 4300 digits
        raise DemandError(
            path, f"must be at most {MAX_QUANTITY}, got a {value.bit_length()}-bit integer"
        )
    return value
