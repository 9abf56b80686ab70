"""The CEL ``job`` variable of a workload, built lazily: expressions read only a few fields. The
one builder of it: the cycle, the webhook and ``fleetgate inspect`` all use :class:`JobValues`."""

from __future__ import annotations

import datetime as dt
from collections.abc import Hashable, Iterator, Mapping
from typing import Any

from engine.policy.access import Projector
from engine.resources import PODS
from engine.workloads.model import Workload

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


class JobValues(Mapping[str, Any]):
    """The CEL ``job`` variable of a workload, built field by field as expressions read it.

    ``job.object`` is ``template``, the raw object, where one is given (the webhook's
    AdmissionPolicies); the cycle reads jobs from their parsed templates, so there (and so in
    the mapping, wherever it is evaluated) it is empty.
    """

    __slots__ = ("_cache", "_part", "priority", "queue", "template", "tenant", "workload")

    def __init__(
        self, workload: Workload, priority: int, template: Mapping[str, Any] | None = None
    ) -> None:
        self.workload = workload
        self.priority = priority
        self.template = template
        self.queue = ""
        self.tenant = ""
        self._cache: dict[str, Any] = {}
        self._part: tuple[Projector, Hashable] | None = None

    def part(self, projector: Projector) -> Hashable:
        """``projector.part("job", self)``, kept for the last projector asked.

        Sound while the values do not change: the workload is immutable, and ``queue``,
        ``tenant`` and ``priority`` are set once, from the mapping, before anything reads them.
        """
        found = self._part
        if found is None or found[0] is not projector:
            found = (projector, projector.part("job", self))
            self._part = found
        return found[1]

    _KEYS = (
        "apiVersion",
        "kind",
        "namespace",
        "name",
        "uid",
        "labels",
        "annotations",
        "queue",
        "specQueue",
        "tenant",
        "priority",
        "priorityClassName",
        "components",
        "total",
        "minMember",
        "resizable",
        "createdAt",
        "object",
    )

    def __getitem__(self, key: str) -> Any:
        w = self.workload
        match key:
            case "apiVersion":
                return w.api_version
            case "kind":
                return w.kind
            case "namespace":
                return w.namespace
            case "name":
                return w.name
            case "uid":
                return w.uid
            case "labels":
                return w.labels
            case "annotations":
                return w.annotations
            case "queue":
                return self.queue
            case "specQueue":
                return w.queue or ""
            case "tenant":
                return self.tenant
            case "priority":
                return self.priority
            case "priorityClassName":
                return w.priority_class_name or ""
            case "minMember":
                return w.min_member
            case "resizable":
                return w.resizable
            case "createdAt":
                return w.created_at or EPOCH
            case "object":
                return self.template if self.template is not None else {}
            case "components" | "total":
                if key not in self._cache:
                    self._cache["total"] = float_total(w)
                    self._cache["components"] = [
                        {"name": r.name, "replicas": r.replicas, "requests": r.requests.to_floats()}
                        for r in w.roles
                    ]
                return self._cache[key]
        raise KeyError(key)

    def __contains__(self, key: object) -> bool:
        """Every key is always there (Mapping's own would compute the value to find out)."""
        return key in _KEY_SET

    def __iter__(self) -> Iterator[str]:
        return iter(self._KEYS)

    def __len__(self) -> int:
        return len(self._KEYS)


_KEY_SET = frozenset(JobValues._KEYS)


def float_total(workload: Workload) -> dict[str, float]:
    """``workload.total.to_floats()`` without building the exact sums as Fractions.

    Per resource, the exact sum of requests × replicas (+ pods) is kept as an integer
    numerator over the product of the denominators, and converted with one integer division,
    which Python rounds correctly, as ``float(Fraction)`` does: the same floats, the same
    (sorted) keys, zero sums left out.
    """
    sums: dict[str, tuple[int, int]] = {}
    for role in workload.roles:
        replicas = role.replicas
        for name, amount in role.requests.items():
            n, d = amount.numerator * replicas, amount.denominator
            found = sums.get(name)
            if found is None:
                sums[name] = (n, d)
            elif found[1] == d:
                sums[name] = (found[0] + n, d)
            else:
                sums[name] = (found[0] * d + n * found[1], found[1] * d)
    pods = workload.pods
    found = sums.get(PODS)
    sums[PODS] = (pods, 1) if found is None else (found[0] + pods * found[1], found[1])
    return {name: n / d for name, (n, d) in sorted(sums.items()) if n}
