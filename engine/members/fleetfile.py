"""Fleet files: the simulated member clusters of the sandbox and the simulator.

Format (``examples/fleet.yaml``; every problem is reported at once, each as
``FILE:LINE:COL: Cluster/NAME: path: message``)::

    apiVersion: fleetgate.io/v1alpha1      # optional
    kind: Fleet                            # optional
    defaults: {jobDuration: 10m, statusPeriod: 10s}
    clusters:
    - name: gpu-east                       # required, unique, a DNS label
      labels: {gpu.fleetgate.io/model: h100}
      provider: aws
      region: us-east-1
      zones: [us-east-1a]
      kinds: [kubeflow.org/v1/PyTorchJob]  # apiVersion/Kind; default: every kind fleetgate reads
      taints: [{key: k, value: v, effect: NoSchedule}]
      nodes:                               # required
      - {count: 4, shape: {cpu: 96, memory: 1Ti, nvidia.com/gpu: 8}, labels: {...}}
      resourceModels: [...]                # optional, Karmada's spec.resourceModels, or
                                           # KarmadaDefaults (Karmada's nine cpu/memory
                                           # grades); default: built from the node shapes
                                           # (engine.members.grades)
      apiEndpoint: https://…               # optional
      kubernetesVersion: v1.31.0           # optional
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping, Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

from engine.errors import FleetgateError, PolicyIssue, QuantityError, value_type
from engine.fleet.clusters import TAINT_EFFECTS
from engine.fleet.frozen import FrozenDict
from engine.fleet.model import ResourceModel, Taint
from engine.members.grades import karmada_default_models
from engine.members.spec import (
    DEFAULT_JOB_DURATION,
    DEFAULT_PODS_PER_NODE,
    DEFAULT_STATUS_PERIOD,
    ClusterSpec,
    FleetSpec,
    NodeGroup,
)
from engine.policy.source import Document, JsonPath, format_path, read_documents
from engine.quantity import parse_quantity
from engine.resources import PODS, Resources
from engine.workloads.registry import known_kinds

API_VERSION = "fleetgate.io/v1alpha1"
KIND = "Fleet"
_TOP = ("apiVersion", "kind", "defaults", "clusters")
_DEFAULTS = ("jobDuration", "statusPeriod")
_CLUSTER = (
    "name", "labels", "region", "provider", "zones", "kinds", "taints", "nodes",
    "resourceModels", "apiEndpoint", "kubernetesVersion",
)  # fmt: skip
_NODES = ("count", "shape", "labels")
KARMADA_DEFAULTS = "KarmadaDefaults"  # resourceModels: Karmada's own default grades
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_DURATION = re.compile(r"(?:[0-9]+(?:\.[0-9]+)?(?:ms|s|m|h))+")
_DURATION_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ms|s|m|h)")
_SECONDS = {"ms": Fraction(1, 1000), "s": Fraction(1), "m": Fraction(60), "h": Fraction(3600)}


class FleetFileError(FleetgateError):
    """A fleet file that cannot be read; carries every issue found, in file order."""

    def __init__(self, issues: Sequence[PolicyIssue]) -> None:
        self.issues = tuple(issues)
        super().__init__("\n".join(str(i) for i in self.issues))


def load_fleet(path: str | Path) -> FleetSpec:
    """Read and check a fleet file; raises FleetFileError listing every problem."""
    return parse_fleet(Path(path))


def parse_fleet(path: Path, text: str | None = None) -> FleetSpec:
    """``text`` as the fleet file ``path`` (read from disk when ``text`` is None)."""
    documents, issues = read_documents(path, text)
    if issues:
        raise FleetFileError(issues)
    if len(documents) != 1:
        found = f"{len(documents)} documents" if documents else "no document"
        raise FleetFileError([PolicyIssue(str(path), 0, 0, "", "", f"expected one fleet, {found}")])
    reader = _Reader(documents[0])
    fleet = reader.fleet()
    if reader.issues:
        raise FleetFileError(sorted(reader.issues, key=lambda i: (i.line, i.column)))
    return fleet


def parse_duration(raw: Any) -> dt.timedelta | None:
    """``10m``, ``1h30m``, ``90s``, ``500ms`` or a number of seconds; None if not a duration."""
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int | float) and raw >= 0:
        return dt.timedelta(seconds=raw)
    if not isinstance(raw, str) or not _DURATION.fullmatch(raw):
        return None
    seconds = sum(Fraction(n) * _SECONDS[u] for n, u in _DURATION_PART.findall(raw))
    return dt.timedelta(seconds=float(seconds))


class _Reader:
    def __init__(self, doc: Document) -> None:
        self.doc = doc
        self.issues: list[PolicyIssue] = []
        self.obj = ""  # Cluster/NAME of the cluster being read
        self.base: JsonPath = ()  # the path of that cluster in the document

    def issue(self, path: JsonPath, message: str, *, key: bool = False) -> None:
        where = self.doc.key_position(path) if key else self.doc.position(path)
        shown = format_path(path[len(self.base) :])
        self.issues.append(
            PolicyIssue(self.doc.file, where.line, where.column, self.obj, shown, message)
        )

    def mapping(self, value: Any, path: JsonPath, keys: Sequence[str] | None) -> Mapping[str, Any]:
        """``value`` as an object (absent: empty); ``keys`` the known fields, None for any."""
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            self.issue(path, f"expected an object, got {value_type(value)}")
            return {}
        for key in value if keys is not None else ():
            if key not in keys:
                self.issue((*path, key), f"unknown field; known: {', '.join(keys)}", key=True)
        return value

    def items(self, value: Any, path: JsonPath) -> list[Any]:
        if value is None:
            return []
        if not isinstance(value, list):
            self.issue(path, f"expected a list, got {value_type(value)}")
            return []
        return value

    def text(self, value: Any, path: JsonPath) -> str:
        if value is None:
            return ""
        if not isinstance(value, str):
            self.issue(path, f"expected a string, got {value_type(value)}")
            return ""
        return value

    def labels(self, value: Any, path: JsonPath) -> FrozenDict[str, str]:
        if value is not None and not isinstance(value, Mapping):
            self.issue(path, f"expected an object, got {value_type(value)}")
            return FrozenDict()
        result: dict[str, str] = {}
        for key, item in (value or {}).items():
            if isinstance(item, Mapping | list):
                self.issue((*path, str(key)), f"expected a string, got {value_type(item)}")
            elif isinstance(item, bool):
                result[str(key)] = "true" if item else "false"
            else:
                result[str(key)] = "" if item is None else str(item)
        return FrozenDict(result)

    def quantity(self, value: Any, path: JsonPath) -> Fraction | None:
        try:
            amount = parse_quantity(value)
        except QuantityError as err:
            self.issue(path, str(err))
            return None
        if amount < 0:
            self.issue(path, f"negative quantity {value!r}")
            return None
        return amount

    def duration(self, value: Any, path: JsonPath, default: dt.timedelta) -> dt.timedelta:
        if value is None:
            return default
        parsed = parse_duration(value)
        if parsed is None:
            self.issue(path, f"{value!r} is not a duration (like 90s, 10m, 1h30m)")
            return default
        return parsed

    # -- the document -----------------------------------------------------------------------

    def fleet(self) -> FleetSpec:
        top = self.mapping(self.doc.data, (), _TOP)
        if top.get("apiVersion", API_VERSION) != API_VERSION:
            self.issue(("apiVersion",), f"expected {API_VERSION}")
        if top.get("kind", KIND) != KIND:
            self.issue(("kind",), f"expected {KIND}")
        defaults = self.mapping(top.get("defaults"), ("defaults",), _DEFAULTS)
        job = self.duration(
            defaults.get("jobDuration"), ("defaults", "jobDuration"), DEFAULT_JOB_DURATION
        )
        period = self.duration(
            defaults.get("statusPeriod"), ("defaults", "statusPeriod"), DEFAULT_STATUS_PERIOD
        )
        if "clusters" not in top:
            self.issue(("clusters",), "required")
        clusters: list[ClusterSpec] = []
        seen: set[str] = set()
        for i, raw in enumerate(self.items(top.get("clusters"), ("clusters",))):
            cluster = self.cluster(raw, ("clusters", i))
            if cluster.name in seen:
                self.issue(("clusters", i, "name"), f"another cluster is named {cluster.name!r}")
            seen.add(cluster.name)
            clusters.append(cluster)
        self.obj, self.base = "", ()
        return FleetSpec(tuple(clusters), job, period, self.doc.file)

    def cluster(self, raw: Any, path: JsonPath) -> ClusterSpec:
        self.obj, self.base = "", ()
        name = raw.get("name") if isinstance(raw, Mapping) else None
        if isinstance(name, str) and name:
            self.obj, self.base = f"Cluster/{name}", path
        data = self.mapping(raw, path, _CLUSTER)
        if not isinstance(name, str) or not _DNS_LABEL.fullmatch(name):
            problem = "required" if name is None else f"{name!r} is not a DNS label"
            self.issue((*path, "name"), problem)
        if "nodes" not in data and isinstance(raw, Mapping):
            self.issue((*path, "nodes"), "required")
        nodes = tuple(
            self.node_group(n, (*path, "nodes", i))
            for i, n in enumerate(self.items(data.get("nodes"), (*path, "nodes")))
        )
        kinds = data.get("kinds")
        return ClusterSpec(
            name=name if isinstance(name, str) else "",
            labels=self.labels(data.get("labels"), (*path, "labels")),
            region=self.text(data.get("region"), (*path, "region")),
            provider=self.text(data.get("provider"), (*path, "provider")),
            zones=tuple(
                self.text(z, (*path, "zones", i))
                for i, z in enumerate(self.items(data.get("zones"), (*path, "zones")))
            ),
            kinds=tuple(known_kinds()) if kinds is None else self.kinds(kinds, (*path, "kinds")),
            taints=tuple(
                self.taint(t, (*path, "taints", i))
                for i, t in enumerate(self.items(data.get("taints"), (*path, "taints")))
            ),
            nodes=tuple(n for n in nodes if n is not None),
            resource_models=self.models(data.get("resourceModels"), (*path, "resourceModels")),
            api_endpoint=self.text(data.get("apiEndpoint"), (*path, "apiEndpoint")),
            kubernetes_version=self.text(
                data.get("kubernetesVersion"), (*path, "kubernetesVersion")
            )
            or "v1.31.0",
        )

    def kinds(self, value: Any, path: JsonPath) -> tuple[tuple[str, str], ...]:
        pairs: list[tuple[str, str]] = []
        for i, item in enumerate(self.items(value, path)):
            text = self.text(item, (*path, i))
            api_version, _, kind = text.rpartition("/")
            if not api_version or not kind:
                self.issue((*path, i), f"{text!r} is not apiVersion/Kind (like batch/v1/Job)")
            else:
                pairs.append((api_version, kind))
        return tuple(pairs)

    def taint(self, raw: Any, path: JsonPath) -> Taint:
        data = self.mapping(raw, path, ("key", "value", "effect"))
        key = self.text(data.get("key"), (*path, "key"))
        effect = self.text(data.get("effect"), (*path, "effect"))
        if not key:
            self.issue((*path, "key"), "required")
        if effect not in TAINT_EFFECTS:
            self.issue((*path, "effect"), f"expected one of {', '.join(TAINT_EFFECTS)}")
        return Taint(key, self.text(data.get("value"), (*path, "value")), effect)

    def node_group(self, raw: Any, path: JsonPath) -> NodeGroup | None:
        data = self.mapping(raw, path, _NODES)
        count = data.get("count", 1)
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            self.issue((*path, "count"), f"expected a whole number of nodes ≥ 1, got {count!r}")
            count = 0
        if "shape" not in data:
            self.issue((*path, "shape"), "required")
        shape: dict[str, Fraction] = {PODS: Fraction(DEFAULT_PODS_PER_NODE)}
        for name, value in self.mapping(data.get("shape"), (*path, "shape"), None).items():
            amount = self.quantity(value, (*path, "shape", str(name)))
            if amount is not None:
                shape[str(name)] = amount
        labels = self.labels(data.get("labels"), (*path, "labels"))
        return NodeGroup(count, Resources(shape), labels) if count else None

    def models(self, raw: Any, path: JsonPath) -> tuple[ResourceModel, ...]:
        if isinstance(raw, str):
            if raw == KARMADA_DEFAULTS:
                return karmada_default_models()
            self.issue(path, f"expected a list of grades or {KARMADA_DEFAULTS!r}, got {raw!r}")
            return ()
        models: list[ResourceModel] = []
        for i, item in enumerate(self.items(raw, path)):
            where = (*path, i)
            data = self.mapping(item, where, ("grade", "ranges"))
            grade = data.get("grade")
            if isinstance(grade, bool) or not isinstance(grade, int) or grade < 0:
                self.issue((*where, "grade"), f"expected a whole number ≥ 0, got {grade!r}")
                continue
            ranges: dict[str, tuple[Fraction, Fraction]] = {}
            for j, entry in enumerate(self.items(data.get("ranges"), (*where, "ranges"))):
                at = (*where, "ranges", j)
                fields = self.mapping(entry, at, ("name", "min", "max"))
                low = self.quantity(fields.get("min"), (*at, "min"))
                high = self.quantity(fields.get("max"), (*at, "max"))
                if low is not None and high is not None:
                    if high <= low:
                        self.issue(at, f"max {fields.get('max')} is not above min")
                    ranges[self.text(fields.get("name"), (*at, "name"))] = (low, high)
            models.append(ResourceModel(grade, FrozenDict(ranges)))
        return tuple(sorted(models, key=lambda m: m.grade))
