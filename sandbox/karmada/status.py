"""Status flowing back: Work status, the binding's aggregatedStatus, the template's status.

1. Work (Karmada's execution and work-status controllers): ``Applied`` (AppliedSuccessful /
   AppliedFailed) and ``manifestStatuses[]`` {identifier, status, health}, the status being the
   member job's as its operator writes it (:mod:`sandbox.karmada.jobstatus`).
2. Binding (the binding status controller): ``aggregatedStatus[]`` per target cluster, by name:
   {clusterName, applied, appliedMessage, health, status}, and ``FullyApplied``.
3. Template (the resource interpreter's AggregateStatus): one cluster's status is copied; for
   several, replica counts are summed and other fields taken from the first cluster by name.

Every write goes through the status subresource with the resourceVersion just read, and only
when something changed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sandbox.jsoncopy import copy_json
from sandbox.karmada.common import condition, deleting, get_or_none, meta, with_retry
from sandbox.karmada.execution import Execution, job_key, manifest_of
from sandbox.karmada.jobstatus import UNKNOWN, health, operator_status
from sandbox.karmada.names import EXECUTION_SPACE_PREFIX, execution_namespace
from sandbox.karmada.works import (
    WORKS,
    WorksLookup,
    cluster_of,
    reconcile_all_bindings,
    reconcile_binding_keys,
    works_index,
    works_of,
)
from sandbox.store import Store

SUMMED = (
    "replicas",
    "readyReplicas",
    "availableReplicas",
    "updatedReplicas",
    "active",
    "succeeded",
    "failed",
    "running",
    "pending",
)


class StatusController:
    def __init__(
        self, store: Store, execution: Execution, lookup: WorksLookup | None = None
    ) -> None:
        self.store = store
        self.execution = execution
        self.lookup = lookup or (lambda b: works_of(works_index(self.store), b))

    def run_keys(
        self,
        bindings: Sequence[tuple[str, str, str]],
        works: Sequence[tuple[str, str]],
        now: datetime,
    ) -> None:
        """Only these Works (namespace, name), then these bindings (resource, namespace, name)."""
        for namespace, name in works:
            cluster = namespace[len(EXECUTION_SPACE_PREFIX) :]
            if cluster not in self.execution.members or cluster in self.execution.unreachable:
                continue
            work = get_or_none(self.store, WORKS, name, namespace)
            if work is not None:
                with_retry(self.store, WORKS, work, lambda w, c=cluster: self._work(c, w, now))
        reconcile_binding_keys(
            self.store, bindings, self.lookup, lambda r, b, w: self._binding(r, b, w, now)
        )

    def run(self, now: datetime) -> None:
        for name in sorted(self.execution.members):
            if name in self.execution.unreachable:
                continue  # nothing can be collected: the Works' status stays as it was
            for work in self.store.list(WORKS, namespace=execution_namespace(name))["items"]:
                with_retry(self.store, WORKS, work, lambda w, n=name: self._work(n, w, now))
        reconcile_all_bindings(self.store, lambda r, b, w: self._binding(r, b, w, now))

    # 1. Work
    def _work(self, cluster: str, work: dict[str, Any], now: datetime) -> None:
        if deleting(work):
            return
        key = job_key(work)
        member = self.execution.members[cluster]
        status = copy_json(work.get("status") or {})
        before = copy_json(status)
        refused = self.execution.refused.get(key)
        state = member.job_state(key) if key in self.execution.jobs[cluster] else None
        if refused is not None:
            status["conditions"] = condition(
                status.get("conditions"), "Applied", "False", "AppliedFailed", refused, now
            )
        elif state is not None:
            status["conditions"] = condition(
                status.get("conditions"),
                "Applied",
                "True",
                "AppliedSuccessful",
                "Manifest has been successfully applied",
                now,
            )
        manifest = manifest_of(work)
        if state is not None and manifest is not None:
            api_version = str(manifest.get("apiVersion", ""))
            group, _, version = api_version.rpartition("/")
            mm = meta(manifest)
            status["manifestStatuses"] = [
                {
                    "identifier": {
                        "ordinal": 0,
                        "group": group,
                        "version": version,
                        "kind": manifest.get("kind", ""),
                        "namespace": mm.get("namespace", ""),
                        "name": mm.get("name", ""),
                        "resource": self._plural(api_version, str(manifest.get("kind", ""))),
                    },
                    "status": operator_status(api_version, str(manifest.get("kind", "")), state),
                    "health": health(state),
                }
            ]
        if status != before:
            work["status"] = status
            self.store.update_status(WORKS, work)

    def _plural(self, api_version: str, kind: str) -> str:
        rt = self.store.registry.for_kind(api_version, kind)
        return rt.plural if rt is not None else kind.lower() + "s"

    # 2. binding, 3. template
    def _binding(
        self,
        resource: str,
        binding: dict[str, Any],
        works_list: list[dict[str, Any]],
        now: datetime,
    ) -> None:
        if deleting(binding):
            return
        targets = [
            str(t.get("name"))
            for t in (binding.get("spec") or {}).get("clusters") or []
            if isinstance(t, Mapping)
        ]
        works = {cluster_of(w): w for w in works_list}
        items = [_item(cluster, works.get(cluster)) for cluster in sorted(set(targets))]
        status = copy_json(binding.get("status") or {})
        before = copy_json(status)
        if items:
            status["aggregatedStatus"] = items
        else:  # Karmada's ``omitempty``: no targets, no field (not an empty list written)
            status.pop("aggregatedStatus", None)
        if items:
            if all(i.get("applied") for i in items):
                reason, state, message = (
                    "FullyAppliedSuccess",
                    "True",
                    "All works have been successfully applied",
                )
            else:
                reason, state = "FullyAppliedFailed", "False"
                message = "Failed to apply all works, see status.aggregatedStatus for details"
            status["conditions"] = condition(
                status.get("conditions"), "FullyApplied", state, reason, message, now
            )
        if status != before:
            binding["status"] = status
            self.store.update_status(resource, binding)
        self._template(binding, items)

    def _template(self, binding: Mapping[str, Any], items: Sequence[Mapping[str, Any]]) -> None:
        statuses = [i["status"] for i in items if isinstance(i.get("status"), Mapping)]
        if not statuses:
            return
        ref = (binding.get("spec") or {}).get("resource") or {}
        rt = self.store.registry.for_kind(str(ref.get("apiVersion", "")), str(ref.get("kind", "")))
        if rt is None:
            return
        template = get_or_none(
            self.store, rt, str(ref.get("name", "")), ref.get("namespace") or None
        )
        if (
            template is None
            or deleting(template)
            or (ref.get("uid") and meta(template).get("uid") != ref["uid"])
        ):
            return
        desired = aggregate(statuses)
        if template.get("status") != desired:
            template["status"] = desired
            self.store.update_status(rt, template)


def aggregate(statuses: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The template status from its members' statuses, first cluster by name first."""
    result = copy_json(statuses[0])
    if len(statuses) > 1:
        for field in SUMMED:
            values = [s[field] for s in statuses if isinstance(s.get(field), int)]
            if values:
                result[field] = sum(values)
    return result


def _item(cluster: str, work: Mapping[str, Any] | None) -> dict[str, Any]:
    item: dict[str, Any] = {"clusterName": cluster, "applied": False, "health": UNKNOWN}
    if work is None:
        return item
    status = work.get("status") or {}
    applied = next((c for c in status.get("conditions") or [] if c.get("type") == "Applied"), None)
    if applied is not None:
        item["applied"] = applied.get("status") == "True"
        if not item["applied"]:
            item["appliedMessage"] = applied.get("message", "")
    manifests = status.get("manifestStatuses") or []
    if manifests:
        item["health"] = manifests[0].get("health", UNKNOWN)
        if manifests[0].get("status") is not None:
            item["status"] = manifests[0]["status"]
    return item
