"""Karmada's default replica interpreter: ``spec.replicas`` and ``spec.replicaRequirements``.

Follows karmada-io/karmada ``pkg/resourceinterpreter/default/native/replica.go`` and
``pkg/util/helper.GenerateReplicaRequirements`` (v1.19 main, f8fdd02), with the feature gates at
their defaults (``ResourceQuotaEstimate`` off: no ``priorityClassName`` or ``namespace`` in the
requirements; ``MultiplePodTemplatesScheduling`` off: no ``spec.components``). Only five kinds
have a native interpreter; Karmada's bundled customizations for the AI job kinds (PyTorchJob,
MPIJob, Volcano Job, RayJob, SparkApplication, …) implement ``componentResource`` only, so their
bindings carry neither field.

Per pod, as ``util.Resource.AddPodTemplateRequest``: a container limit without a request counts
as the request; app containers are summed; each init container raises the total to its own
request if larger (sidecars are not special-cased, unlike Kubernetes); pod overhead is added.
Only cpu, memory, ephemeral-storage, pods and scalar resources (extended, ``hugepages-*``,
``*kubernetes.io/*``, ``attachable-volumes-*``) are kept; cpu is rounded up to millicores and the
rest up to whole units, then written the way ``resource.Quantity`` prints them.

Replica counts are read from the template as the API server stores it, so absent fields take the
API server's defaults (``replicas: 1``, Job ``parallelism: 1``) where Karmada's code would read
nil as 0 on an object the API server had not defaulted.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from engine.workloads.pods import amounts, expect_int, expect_list, expect_mapping

# (apiVersion, kind) of the native interpreter's kinds → where their pod template is.
NATIVE_KINDS: dict[tuple[str, str], str] = {
    ("apps/v1", "Deployment"): "spec.template",
    ("apps/v1", "ReplicaSet"): "spec.template",
    ("apps/v1", "StatefulSet"): "spec.template",
    ("batch/v1", "Job"): "spec.template",
    ("v1", "Pod"): "",
}
_NATIVE = ("cpu", "memory", "ephemeral-storage", "pods")
_BINARY = ("memory", "ephemeral-storage")
_QUALIFIED = re.compile(
    r"(?:[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?"
)


def interpret_replicas(template: Mapping[str, Any]) -> tuple[int, dict[str, Any] | None] | None:
    """``(spec.replicas, spec.replicaRequirements)`` Karmada writes for ``template``; None for
    a kind without a native replica interpreter. Raises DemandError naming a malformed field."""
    key = (str(template.get("apiVersion", "")), str(template.get("kind", "")))
    if key not in NATIVE_KINDS:
        return None
    spec = expect_mapping(template.get("spec"), "spec")
    if key[1] == "Pod":
        return 1, replica_requirements(spec, "spec")
    if key[1] == "Job":
        parallelism = expect_int(spec.get("parallelism"), "spec.parallelism", default=1)
        completions = expect_int(spec.get("completions"), "spec.completions", default=parallelism)
        replicas = min(parallelism, completions)
    else:
        replicas = expect_int(spec.get("replicas"), "spec.replicas", default=1)
    pod = expect_mapping(spec.get("template"), "spec.template")
    return replicas, replica_requirements(
        expect_mapping(pod.get("spec"), "spec.template.spec"), "spec.template.spec"
    )


def replica_requirements(pod_spec: Mapping[str, Any], path: str) -> dict[str, Any] | None:
    """``GenerateReplicaRequirements``: node claim and per-pod request, None when both empty."""
    request = _resource_list(pod_request(pod_spec, path))
    claim = node_claim(pod_spec, path)
    if claim is None and not request:
        return None
    result: dict[str, Any] = {}
    if claim is not None:
        result["nodeClaim"] = claim
    if request:
        result["resourceRequest"] = request
    return result


def node_claim(pod_spec: Mapping[str, Any], path: str) -> dict[str, Any] | None:
    """``GenerateNodeClaimByPodSpec``: nodeSelector, tolerations, required node affinity."""
    selector = pod_spec.get("nodeSelector")
    if selector is not None:
        expect_mapping(selector, f"{path}.nodeSelector")
    tolerations = expect_list(pod_spec.get("tolerations"), f"{path}.tolerations")
    affinity = expect_mapping(pod_spec.get("affinity"), f"{path}.affinity")
    node_affinity = expect_mapping(affinity.get("nodeAffinity"), f"{path}.affinity.nodeAffinity")
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if selector is None and required is None and not tolerations:
        return None
    claim: dict[str, Any] = {}
    if required is not None:
        claim["hardNodeAffinity"] = required
    if selector:
        claim["nodeSelector"] = dict(selector)
    if tolerations:
        claim["tolerations"] = list(tolerations)
    return claim


def pod_request(pod_spec: Mapping[str, Any], path: str) -> dict[str, int]:
    """Per resource, the pod's request in Karmada's integer units (millicores for cpu)."""
    total: dict[str, int] = {}
    for i, container in enumerate(expect_list(pod_spec.get("containers"), f"{path}.containers")):
        for name, value in _container(container, f"{path}.containers[{i}]").items():
            total[name] = total.get(name, 0) + value
    init = expect_list(pod_spec.get("initContainers"), f"{path}.initContainers")
    for i, container in enumerate(init):
        for name, value in _container(container, f"{path}.initContainers[{i}]").items():
            total[name] = max(total.get(name, 0), value)
    for name, value in _units(amounts(pod_spec.get("overhead"), f"{path}.overhead")).items():
        total[name] = total.get(name, 0) + value
    return total


def is_scalar_resource(name: str) -> bool:
    """``lifted.IsScalarResourceName``: extended, hugepages, prefixed native, attachable volume."""
    prefixed_native = "kubernetes.io/" in name
    extended = (
        "/" in name
        and not prefixed_native
        and not name.startswith("requests.")
        and _qualified(f"requests.{name}")
    )
    return extended or prefixed_native or name.startswith(("hugepages-", "attachable-volumes-"))


def format_decimal(value: int, exponent: int = 0) -> str:
    """``value``×10^``exponent`` as ``resource.Quantity`` prints a DecimalSI amount."""
    while value != 0 and value % 10 == 0:
        value //= 10
        exponent += 1
    shift = exponent % 3
    value, exponent = value * 10**shift, exponent - shift
    suffixes = {-9: "n", -6: "u", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P"}
    if value == 0:
        return "0"
    if exponent in suffixes:
        return f"{value}{suffixes[exponent]}"
    return f"{value}E" if exponent == 18 else f"{value}e{exponent}"


def format_binary(value: int) -> str:
    """A whole number of bytes as ``resource.Quantity`` prints a BinarySI amount."""
    if -1024 < value < 1024:
        return format_decimal(value)
    power = 0
    while value % 1024 == 0 and power < 6:
        value //= 1024
        power += 1
    return f"{value}{('', 'Ki', 'Mi', 'Gi', 'Ti', 'Pi', 'Ei')[power]}"


def _container(container: Any, path: str) -> dict[str, int]:
    resources = expect_mapping(
        expect_mapping(container, path).get("resources"), f"{path}.resources"
    )
    requests = amounts(resources.get("requests"), f"{path}.resources.requests")
    limits = amounts(resources.get("limits"), f"{path}.resources.limits")
    return _units({**limits, **requests})


def _units(amounts_: Mapping[str, Fraction]) -> dict[str, int]:
    """Karmada's ``Resource.Add``: cpu in millicores, the rest in units, rounded up; others
    dropped."""
    result: dict[str, int] = {}
    for name, amount in amounts_.items():
        if name == "cpu":
            result[name] = math.ceil(amount * 1000)
        elif name in _NATIVE or is_scalar_resource(name):
            result[name] = math.ceil(amount)
    return result


def _resource_list(total: Mapping[str, int]) -> dict[str, str]:
    """``Resource.ResourceList``: positive amounts only, each in its Quantity format."""
    result: dict[str, str] = {}
    for name, value in sorted(total.items()):
        if value <= 0:
            continue
        if name == "cpu":
            result[name] = format_decimal(value, -3)
        elif name in _BINARY or name.startswith("hugepages-"):
            result[name] = format_binary(value)
        else:
            result[name] = format_decimal(value)
    return result


def _qualified(name: str) -> bool:
    """``validation.IsQualifiedName``: an optional DNS-subdomain prefix and a ≤63-char name."""
    if _QUALIFIED.fullmatch(name) is None:
        return False
    prefix, _, short = name.rpartition("/")
    return len(short) <= 63 and len(prefix) <= 253
