"""Koordinator batch (colocation) resources: the requests a koord-batch pod really makes.

On a cluster colocated with Koordinator, koord-manager's pod mutating webhook
(``pkg/webhook/pod/mutating/cluster_colocation_profile.go``, ``mutatePodResourceSpec``) rewrites
the pods of the batch priority class before they reach the scheduler, so they ask for the
overcommitted batch capacity nodes advertise instead of ``cpu``/``memory``. This module mirrors
that rule, and only that rule:

* Which pods: those whose Kubernetes priority is in Koordinator's batch range, 5000-5999
  (``extension.GetPriorityClass`` reads ``spec.priority`` only). Koordinator installs the
  PriorityClass ``koord-batch`` with value 5000, so a pod naming it is a batch pod. Neither the
  label ``koordinator.sh/qosClass: BE`` nor ``koordinator.sh/priority-class`` changes the
  resources: the webhook does not read them.
* How, per container (init and app) and for the pod overhead: ``cpu`` becomes
  ``kubernetes.io/batch-cpu`` as an integer count of milli-cores, ``quantity.MilliValue()``,
  which rounds up (``500m`` → 500, ``4`` → 4000); ``memory`` becomes ``kubernetes.io/batch-memory``
  with the same quantity. ``cpu`` and ``memory`` are removed. Requests and limits are both
  translated, and a translated limit without a request becomes the request. Every other resource
  (GPUs, ephemeral-storage, an existing ``batch-*``) is left alone, except that a translated
  ``cpu``/``memory`` replaces an existing ``batch-cpu``/``batch-memory``.

Not modelled: the webhook acts only when a ClusterColocationProfile selects the pod, and a
profile can also give ``koord-batch`` to pods whose template names no class. fleetgate sees
neither, so it trusts the pod's own class; a PriorityClass of another name whose value is in
the batch range is recognised only when the template also carries ``spec.priority``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from fractions import Fraction

from engine.resources import Resources

BATCH_CPU = "kubernetes.io/batch-cpu"
BATCH_MEMORY = "kubernetes.io/batch-memory"
BATCH_PRIORITY_CLASS = "koord-batch"  # installed by Koordinator with value 5000
BATCH_PRIORITY_MIN = 5000  # extension.PriorityBatchValueMin
BATCH_PRIORITY_MAX = 5999  # extension.PriorityBatchValueMax


def is_batch_pod(priority_class_name: object, priority: object = None) -> bool:
    """Whether Koordinator's webhook turns this pod's cpu/memory into batch resources.

    ``priority`` is the pod's ``spec.priority`` when it is written down: it decides, as in
    Koordinator. Without it the class name does: ``koord-batch`` has value 5000.
    """
    if isinstance(priority, int) and not isinstance(priority, bool):
        return BATCH_PRIORITY_MIN <= priority <= BATCH_PRIORITY_MAX
    return priority_class_name == BATCH_PRIORITY_CLASS


def batch_resources(requests: Mapping[str, Fraction]) -> Resources:
    """One container's (or the overhead's) resource list as Koordinator rewrites it.

    Koordinator translates container by container, before a pod's requests are added up, so
    callers apply this per container: the milli-core rounding happens where Koordinator does it.
    """
    result = {k: v for k, v in requests.items() if k not in ("cpu", "memory")}
    if "cpu" in requests:
        result[BATCH_CPU] = Fraction(math.ceil(requests["cpu"] * 1000))
    if "memory" in requests:
        result[BATCH_MEMORY] = requests["memory"]
    return Resources(result)
