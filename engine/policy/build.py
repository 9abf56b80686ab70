"""Schema-valid documents → frozen policy objects, with every CEL expression compiled.

Errors are collected, not raised: each carries the file position, the object and the JSON path.
A CEL error points at the character inside the expression where the file layout allows it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from engine.errors import PolicyIssue
from engine.fleet.affinity import LabelSelector, Requirement
from engine.fleet.frozen import FrozenDict
from engine.policy import cel, celcost, celfields, defaults
from engine.policy.celcheck import CelType
from engine.policy.celfields import JsonPath
from engine.policy.model import (
    AdmissionPolicy,
    AdmitOn,
    Cost,
    Dependencies,
    Enforcement,
    Expression,
    FailurePolicy,
    FairSharing,
    Gang,
    Groups,
    NamedFilter,
    NamedScore,
    NodeShape,
    Ordering,
    Origin,
    Placement,
    PlacementStrategy,
    PreemptionLimits,
    Queue,
    QueuePreemption,
    ReclaimPolicy,
    Requeue,
    Reservations,
    SchedulingPolicy,
    SpreadBy,
    Strategy,
    Unpriced,
    Validation,
    WithinQueuePreemption,
)
from engine.policy.source import Document, Position, format_path
from engine.quantity import parse_quantity

_DURATION_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ns|us|µs|ms|s|m|h)")
_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str) -> float:
    """A Go duration (``1h30m``, ``90s``) in seconds; the schema has checked its syntax."""
    return sum(float(n) * _SECONDS[unit] for n, unit in _DURATION_PART.findall(text))


def object_ref(doc: Document) -> str:
    data = doc.data if isinstance(doc.data, dict) else {}
    kind = data.get("kind") or "?"
    metadata = data.get("metadata")
    name = metadata.get("name") if isinstance(metadata, dict) else None
    return f"{kind}/{name or '?'}"


class Builder:
    """Builds one document at a time; ``issues`` accumulates across documents."""

    def __init__(self, limits: celcost.CelLimits = celcost.DEFAULT_LIMITS) -> None:
        self.issues: list[PolicyIssue] = []
        self.limits = limits
        self._doc: Document | None = None

    # -- reporting --------------------------------------------------------------------------

    def issue(self, path: JsonPath, message: str, at: Position | None = None) -> None:
        doc = self._doc
        assert doc is not None
        where = at or doc.position(path)
        self.issues.append(
            PolicyIssue(
                doc.file, where.line, where.column, object_ref(doc), format_path(path), message
            )
        )

    # -- kinds --------------------------------------------------------------------------------

    def queue(self, doc: Document) -> Queue:
        self._doc = doc
        spec: Mapping[str, Any] = doc.data.get("spec") or {}
        preemption = spec.get("preemption") or {}
        return Queue(
            name=doc.data["metadata"]["name"],
            parent=spec.get("parent"),
            priority=int(spec.get("priority", 0)),
            weight=float(spec.get("weight", 1)),
            strategy=Strategy(spec.get("strategy", Strategy.BEST_EFFORT_FIFO)),
            guarantee=_amounts(spec.get("guarantee")),
            max=_amounts(spec.get("max")),
            borrowing_limit=_amounts(spec["borrowingLimit"]) if "borrowingLimit" in spec else None,
            lending_limit=_amounts(spec["lendingLimit"]) if "lendingLimit" in spec else None,
            preemption=QueuePreemption(
                WithinQueuePreemption(preemption.get("withinQueue", "Never")),
                ReclaimPolicy(preemption.get("reclaim", "Never")),
            ),
            origin=Origin(doc.file, doc.position(()).line),
            description=spec.get("description", ""),
            namespace_selector=self._selector(
                spec.get("namespaceSelector"), ("spec", "namespaceSelector")
            ),
        )

    def _selector(self, raw: Any, path: JsonPath) -> LabelSelector | None:
        """A label selector the schema has checked; In and NotIn need values, Exists and
        DoesNotExist have none (as ``metav1.LabelSelectorAsSelector`` requires)."""
        if raw is None:
            return None
        found = []
        for i, item in enumerate(raw.get("matchExpressions") or ()):
            op, values = item["operator"], tuple(item.get("values") or ())
            if (op in ("In", "NotIn")) != bool(values):
                need = "needs values" if values == () else "takes no values"
                self.issue((*path, "matchExpressions", i, "values"), f"operator {op} {need}")
            found.append(Requirement(item["key"], op, values))
        return LabelSelector(FrozenDict(raw.get("matchLabels") or {}), tuple(found))

    def expressions(self, doc: Document | None, kind: str) -> dict[JsonPath, Expression]:
        """Compile every CEL expression of a document (or of the built-in default)."""
        self._doc = doc
        spec = (doc.data.get("spec") if doc else None) or {}
        compiled: dict[JsonPath, Expression] = {}
        for path, text, field in celfields.expressions(kind, spec):
            expression = self._cel(path, text, field.variables, field.result)
            if expression is None:
                continue
            if kind == "SchedulingPolicy" and _reads_job_object(expression):
                self.issue(path, JOB_OBJECT_UNSEEN)
                continue
            compiled[path] = expression
        return compiled

    def scheduling(self, doc: Document | None) -> SchedulingPolicy | None:
        """The document's policy, or the built-in default when ``doc`` is None."""
        before = len(self.issues)
        exprs = self.expressions(doc, "SchedulingPolicy")
        data = doc.data if doc else {"metadata": {"name": "default"}, "spec": {}}
        spec: Mapping[str, Any] = data.get("spec") or {}
        gang = spec.get("gang") or {}
        placement = spec.get("placement") or {}
        fair = spec.get("fairSharing") or {}
        self._unique_names(placement, "filters")
        self._unique_names(placement, "scores")
        if "spreadBy" in placement and placement.get("strategy") != "Spread":
            self.issue(("spec", "placement", "spreadBy"), "spreadBy needs strategy: Spread")
        requeue = self._requeue(spec.get("requeue") or {})
        if len(self.issues) != before:
            return None
        filters = tuple(
            NamedFilter(f["name"], exprs[("spec", "placement", "filters", i, "expression")])
            for i, f in enumerate(placement.get("filters", []))
        )
        scores = tuple(
            NamedScore(
                s["name"],
                float(s.get("weight", 1)),
                exprs[("spec", "placement", "scores", i, "expression")],
            )
            for i, s in enumerate(placement.get("scores", []))
        )
        return SchedulingPolicy(
            name=data["metadata"]["name"],
            queue=exprs[("spec", "queue")],
            tenant=exprs[("spec", "tenant")],
            priority=exprs[("spec", "priority")],
            fair_sharing=FairSharing(
                bool(fair.get("enabled", True)), tuple(fair.get("resources", ()))
            ),
            gang=Gang(
                min_member=exprs[("spec", "gang", "minMember")],
                admit_on=AdmitOn(gang.get("admitOn", AdmitOn.ALL)),
                allow_split=exprs[("spec", "gang", "allowSplit")],
            ),
            placement=Placement(
                filters,
                scores,
                PlacementStrategy(placement.get("strategy", PlacementStrategy.BIN_PACK)),
                _cost(placement.get("cost")),
                SpreadBy(placement.get("spreadBy", SpreadBy.CLUSTER)),
                NodeShape(placement.get("nodeShape", NodeShape.OPTIMISTIC)),
            ),
            requeue=requeue,
            preemption=_preemption(spec.get("preemption") or {}),
            reservations=_reservations(spec.get("reservations")),
            ordering=_ordering(spec.get("ordering") or {}),
            scope=exprs[("spec", "scope")],
            origin=Origin(doc.file, doc.position(()).line) if doc else None,
            dependencies=Dependencies(
                exprs.get(("spec", "dependencies", "after")),
                exprs.get(("spec", "dependencies", "sameClusterAs")),
                (spec.get("dependencies") or {}).get("crossNamespace") == "Allow",
            ),
            groups=Groups(
                exprs.get(("spec", "groups", "name")),
                exprs.get(("spec", "groups", "size")),
                exprs.get(("spec", "groups", "min")),
            ),
        )

    def admission(self, doc: Document) -> AdmissionPolicy | None:
        before = len(self.issues)
        exprs = self.expressions(doc, "AdmissionPolicy")
        if len(self.issues) != before:
            return None
        spec: Mapping[str, Any] = doc.data["spec"]
        validations = []
        for i, item in enumerate(spec["validations"]):
            base = ("spec", "validations", i)
            validations.append(
                Validation(
                    expression=exprs[(*base, "expression")],
                    message=item.get("message"),
                    message_expression=exprs.get((*base, "messageExpression")),
                    reason=item.get("reason", "Forbidden"),
                )
            )
        return AdmissionPolicy(
            name=doc.data["metadata"]["name"],
            match=exprs[("spec", "match")],
            validations=tuple(validations),
            enforcement=Enforcement(spec.get("enforcement", Enforcement.DENY)),
            failure_policy=FailurePolicy(spec.get("failurePolicy", FailurePolicy.FAIL)),
            origin=Origin(doc.file, doc.position(()).line),
        )

    # -- pieces -------------------------------------------------------------------------------

    def _unique_names(self, placement: Mapping[str, Any], key: str) -> None:
        seen: set[str] = set()
        for i, item in enumerate(placement.get(key, [])):
            if item["name"] in seen:
                self.issue(
                    ("spec", "placement", key, i, "name"),
                    f"duplicate {key[:-1]} name {item['name']!r}",
                )
            seen.add(item["name"])

    def _requeue(self, requeue: Mapping[str, Any]) -> Requeue:
        values = Requeue(
            startup_timeout=parse_duration(requeue.get("startupTimeout", defaults.STARTUP_TIMEOUT)),
            backoff_base=parse_duration(requeue.get("backoffBase", defaults.BACKOFF_BASE)),
            backoff_max=parse_duration(requeue.get("backoffMax", defaults.BACKOFF_MAX)),
            max_attempts=int(requeue.get("maxAttempts", defaults.MAX_ATTEMPTS)),
            cluster_not_ready_grace=parse_duration(
                requeue.get("clusterNotReadyGrace", defaults.CLUSTER_NOT_READY_GRACE)
            ),
            cluster_status_lag=parse_duration(
                requeue.get("clusterStatusLag", defaults.CLUSTER_STATUS_LAG)
            ),
        )
        if values.backoff_base > values.backoff_max:
            self.issue(
                ("spec", "requeue", "backoffBase"),
                f"backoffBase ({requeue.get('backoffBase', defaults.BACKOFF_BASE)}) is longer "
                f"than backoffMax ({requeue.get('backoffMax', defaults.BACKOFF_MAX)})",
            )
        return values

    def _cel(
        self,
        path: JsonPath,
        text: str,
        variables: Mapping[str, CelType],
        expected: CelType,
    ) -> Expression | None:
        compiled = cel.compile_expression(text, variables, expected, self.limits)
        if isinstance(compiled, cel.CelProgram):
            return Expression(format_path(path), compiled)
        for problem in compiled:
            at = self._expression_position(path, text, problem.line, problem.column)
            caret = _caret(text, problem.line, problem.column)
            self.issue(path, f"{problem.message}\n{caret}", at)
        return None

    def _expression_position(
        self, path: JsonPath, text: str, line: int, column: int
    ) -> Position | None:
        """The file position of character (line, column) of an expression, when exact."""
        doc = self._doc
        if doc is None or path not in doc.scalars:
            return None
        scalar = doc.scalars[path]
        start = scalar.start
        if scalar.style is None and "\n" not in text:
            return Position(start.line, start.column + column - 1)
        if scalar.style in ("'", '"') and "\n" not in text and "\\" not in text:
            prefix = text[: column - 1]
            extra = prefix.count("'") if scalar.style == "'" else 0  # '' escapes a quote
            return Position(start.line, start.column + column + extra)
        if scalar.style == "|":
            return Position(start.line + line, scalar.indent + column)
        return None  # folded or multi-line flow scalars: the caret in the message locates it


def _cost(raw: Mapping[str, Any] | None) -> Cost | None:
    if raw is None:
        return None
    return Cost(raw["label"], raw.get("resource"), Unpriced(raw.get("unpriced", "Exclude")))


def _amounts(raw: Mapping[str, Any] | None) -> dict[str, Fraction]:
    return {name: parse_quantity(value) for name, value in (raw or {}).items()}


def _caret(text: str, line: int, column: int) -> str:
    lines = text.splitlines() or [""]
    source = lines[min(max(line, 1), len(lines)) - 1]
    return f"    | {source}\n    | {' ' * max(column - 1, 0)}^"


def _preemption(raw: Mapping[str, Any]) -> PreemptionLimits:
    runtime = raw.get("minRuntime")
    return PreemptionLimits(
        min_runtime=parse_duration(runtime) if runtime is not None else None,
        max_per_job=raw.get("maxPerJob"),
        max_victims_per_cycle=raw.get("maxVictimsPerCycle"),
    )


def _ordering(raw: Mapping[str, Any]) -> Ordering:
    late = raw.get("lateAfter")
    return Ordering(parse_duration(late) if late is not None else None)


def _reservations(raw: Mapping[str, Any] | None) -> Reservations | None:
    if raw is None:
        return None
    return Reservations(parse_duration(raw["after"]), int(raw.get("max", 4)))


JOB_OBJECT_UNSEEN = (
    "job.object is empty here: the cycle reads a job from its parsed template, so the "
    "SchedulingPolicy's expressions never see the raw object (AdmissionPolicies do); use "
    "job.labels, job.annotations, job.specQueue or job.components"
)


def _reads_job_object(expression: Expression) -> bool:
    return any(path[:2] == ("job", "object") for path in expression.program.accesses)
