"""The job kinds fleetgate reads, as ``(apiVersion, kind)``.

Declared here, apart from the readers, because naming needs them and the readers need naming:
``names`` qualifies a kind by the groups listed here, every ``Workload`` names itself with
``names``, and ``registry`` refuses to start when its family modules read other kinds than these.
"""

from __future__ import annotations

KINDS: frozenset[tuple[str, str]] = frozenset(
    {
        ("batch.volcano.sh/v1alpha1", "Job"),
        *(
            ("kubeflow.org/v1", kind)
            for kind in ("PyTorchJob", "TFJob", "XGBoostJob", "PaddleJob", "JAXJob", "MPIJob")
        ),
        ("kubeflow.org/v2beta1", "MPIJob"),
        ("sparkoperator.k8s.io/v1beta2", "SparkApplication"),
        ("ray.io/v1", "RayCluster"),
        ("ray.io/v1", "RayJob"),
        ("jobset.x-k8s.io/v1alpha2", "JobSet"),
        ("batch/v1", "Job"),
        *(("apps/v1", kind) for kind in ("Deployment", "ReplicaSet", "StatefulSet")),
        ("v1", "Pod"),
    }
)
