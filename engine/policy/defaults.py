"""Built-in defaults: what a SchedulingPolicy field means when it is left out.

The expressions are ordinary CEL, written out in the README, so users can copy one and change it.
"""

from __future__ import annotations

DEFAULT_QUEUE = "default"

# First hint found wins: fleetgate's own label, Volcano's annotation, Kueue's label, then the
# queue the template's own spec names (Volcano spec.queue, Kubeflow runPolicy.schedulingPolicy).
QUEUE = (
    '"fleetgate.io/queue" in job.labels ? job.labels["fleetgate.io/queue"]'
    ' : "scheduling.volcano.sh/queue-name" in job.annotations'
    ' ? job.annotations["scheduling.volcano.sh/queue-name"]'
    ' : "kueue.x-k8s.io/queue-name" in job.labels ? job.labels["kueue.x-k8s.io/queue-name"]'
    f' : job.specQueue != "" ? job.specQueue : "{DEFAULT_QUEUE}"'
)
TENANT = "job.namespace"
PRIORITY = "job.priority"  # the value of the job's PriorityClass (or the global default)
MIN_MEMBER = "job.minMember"  # what the job's operator itself would gang-schedule
ALLOW_SPLIT = "job.resizable"  # only kinds with per-cluster replicas may span clusters

# The job kinds fleetgate reads demand from, as apiVersion/kind of the binding's resource.
BATCH_KINDS = (
    "batch.volcano.sh/v1alpha1/Job",
    "kubeflow.org/v1/PyTorchJob",
    "kubeflow.org/v1/TFJob",
    "kubeflow.org/v1/XGBoostJob",
    "kubeflow.org/v1/PaddleJob",
    "kubeflow.org/v1/JAXJob",
    "kubeflow.org/v1/MPIJob",
    "kubeflow.org/v2beta1/MPIJob",
    "sparkoperator.k8s.io/v1beta2/SparkApplication",
    "ray.io/v1/RayJob",
    "ray.io/v1/RayCluster",
    "jobset.x-k8s.io/v1alpha2/JobSet",
    "batch/v1/Job",
)
SCOPE = (
    'resource.apiVersion + "/" + resource.kind in ['
    + ", ".join(f'"{kind}"' for kind in BATCH_KINDS)
    + "]"
)

STARTUP_TIMEOUT = "10m"
BACKOFF_BASE = "30s"
BACKOFF_MAX = "30m"
MAX_ATTEMPTS = 5
CLUSTER_NOT_READY_GRACE = "5m"
CLUSTER_STATUS_LAG = "20s"  # Karmada's --cluster-status-update-frequency (10s), twice

MATCH_ALL = "true"
