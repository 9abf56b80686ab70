"""Names, labels and annotations Karmada gives the objects its controllers write.

``work_name`` is ``names.GenerateBasicWorkName`` of karmada-io/karmada ``pkg/util/names``: the
template's name and an FNV-32a hash of ``<namespace>-<name>-<kind>`` as
``hashutil.DeepHashObject`` writes a string (its bare bytes), encoded with
``rand.SafeEncodeString``: Deployment ``default/nginx`` gets ``nginx-687f7fb96f``, as in
Karmada's documentation. Name collisions (Karmada then appends a random suffix and records
it in an annotation) are not modelled.
"""

from __future__ import annotations

EXECUTION_SPACE_PREFIX = "karmada-es-"
BINDING_PERMANENT_ID = "resourcebinding.karmada.io/permanent-id"
CLUSTER_BINDING_PERMANENT_ID = "clusterresourcebinding.karmada.io/permanent-id"
BINDING_NAME = "resourcebinding.karmada.io/name"
BINDING_NAMESPACE = "resourcebinding.karmada.io/namespace"
CLUSTER_BINDING_NAME = "clusterresourcebinding.karmada.io/name"
TEMPLATE_UID = "resourcetemplate.karmada.io/uid"
WORK_NAME = "work.karmada.io/name"
WORK_NAMESPACE = "work.karmada.io/namespace"
MANAGED_BY = "karmada.io/managed"
# the sandbox's own: how long a job runs on a member (seconds, or 90s / 5m / 1h)
DURATION_ANNOTATION = "sandbox.fleetgate.io/duration"

_SAFE = "bcdfghjklmnpqrstvwxz2456789"  # k8s.io/apimachinery/pkg/util/rand alphanums


def execution_namespace(cluster: str) -> str:
    """``names.GenerateExecutionSpaceName``."""
    return EXECUTION_SPACE_PREFIX + cluster


def work_name(kind: str, name: str, namespace: str) -> str:
    """``names.GenerateBasicWorkName``."""
    name = name.replace(":", ".").lower()
    basis = f"{name}-{kind}" if not namespace else f"{namespace}-{name}-{kind}"
    return f"{name}-{safe_encode(str(fnv32a(basis.lower())))}"


def fnv32a(text: str) -> int:
    value = 0x811C9DC5
    for byte in text.encode():
        value = ((value ^ byte) * 0x01000193) & 0xFFFFFFFF
    return value


def safe_encode(text: str) -> str:
    """``rand.SafeEncodeString``."""
    return "".join(_SAFE[ord(c) % len(_SAFE)] for c in text)
