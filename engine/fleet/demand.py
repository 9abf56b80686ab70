"""A binding's demand when its template cannot tell: Karmada's own reading of the template.

Karmada's resource interpreter fills ``spec.replicas`` × ``spec.replicaRequirements`` for kinds it
knows (Deployment, Job, …) and ``spec.components`` behind the MultiplePodTemplatesScheduling gate.
For the AI job kinds neither is usually there; then the demand is unknown, which the snapshot
records as an issue: never a silent zero.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.fleet.fields import Metadata
from engine.fleet.model import BindingView
from engine.workloads.model import Role, Workload


def binding_demand(binding: BindingView, template: Metadata | None = None) -> Workload | None:
    """The Workload Karmada's replica fields describe, or None when they describe nothing.

    ``template`` is the template's metadata when the template is in the snapshot (its kind has
    no reader): its labels, annotations, uid and creation time then describe the job; otherwise
    the binding's do. The job is treated as one gang that cannot be split: nothing here says
    how many pods it can start with.
    """
    roles = _roles(binding)
    if not roles:
        return None
    ref = binding.resource
    source: Any = template or binding
    priority_class = binding.priority_class_name or next(
        (c.priority_class_name for c in binding.components if c.priority_class_name), ""
    )
    labels: Mapping[str, str] = source.labels
    return Workload(
        api_version=ref.api_version,
        kind=ref.kind,
        namespace=ref.namespace,
        name=ref.name,
        uid=ref.uid or (template.uid if template else ""),
        roles=roles,
        min_member=sum(role.replicas for role in roles),
        resizable=False,
        priority_class_name=priority_class or None,
        labels=labels,
        annotations=source.annotations,
        created_at=source.created_at,
        source="binding",
    )


def _roles(binding: BindingView) -> tuple[Role, ...]:
    if binding.components:
        return tuple(
            Role(name=c.name or f"component-{i}", replicas=c.replicas, requests=c.requests)
            for i, c in enumerate(binding.components)
        )
    if binding.replica_requirements is not None and binding.replicas > 0:
        return (
            Role(name="replica", replicas=binding.replicas, requests=binding.replica_requirements),
        )
    return ()
