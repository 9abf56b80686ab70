"""The immutable, versioned PolicySet and the loader that builds it from files."""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from engine.errors import PolicyIssue, PolicyLoadError, not_an_object
from engine.policy import schema
from engine.policy.build import Builder, object_ref
from engine.policy.celcost import DEFAULT_LIMITS, CelLimits
from engine.policy.checks import check_queues
from engine.policy.model import AdmissionPolicy, Queue, SchedulingPolicy
from engine.policy.source import Document, format_path, policy_files, read_documents

T = TypeVar("T")


@dataclass(frozen=True, slots=True, eq=False)
class PolicySet:
    """Everything the scheduler and webhook read, compiled and checked. Never mutated."""

    version: str  # content hash, with "@revision" when the loader was given one
    digest: str  # the content hash alone
    revision: str | None
    queues: tuple[Queue, ...]  # sorted by name
    scheduling: SchedulingPolicy
    admission: tuple[AdmissionPolicy, ...]  # sorted by name
    files: tuple[str, ...]
    _queues_by_name: Mapping[str, Queue] = field(repr=False)
    # the documents as ``content_digest`` reads them (sorted-key JSON): loading them again, as
    # one YAML file, gives the same set and version (``reconciler.lastgood`` stores them)
    documents: tuple[str, ...] = field(default=(), repr=False)
    # what ``kept`` built from this set: name → value
    _kept: dict[str, Any] = field(default_factory=dict, init=False, repr=False)
    _keeping: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def queue(self, name: str) -> Queue | None:
        return self._queues_by_name.get(name)

    def kept(self, name: str, build: Callable[[PolicySet], T]) -> T:
        """``build(self)``, made once and kept with this set: what is derived from one policy
        version (memoised evaluators of its expressions) lives and goes with it, so a reload
        starts afresh and nothing outlives the set. ``name`` says what it is (one per caller:
        ``"webhook.admission"``); two threads asking at once get the same value."""
        found = self._kept.get(name)
        if found is None:
            with self._keeping:
                found = self._kept.get(name)
                if found is None:
                    found = self._kept[name] = build(self)
        return found

    @property
    def expression_count(self) -> int:
        s = self.scheduling
        count = 6 + len(s.placement.filters) + len(s.placement.scores)
        for policy in self.admission:
            count += 1 + sum(1 + (v.message_expression is not None) for v in policy.validations)
        return count

    def summary(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "revision": self.revision,
            "files": len(self.files),
            "queues": len(self.queues),
            "schedulingPolicy": self.scheduling.name,
            "admissionPolicies": len(self.admission),
            "celExpressions": self.expression_count,
        }


def load_policy_set(
    paths: Iterable[Path | str],
    revision: str | None = None,
    *,
    cel_limits: CelLimits = DEFAULT_LIMITS,
) -> PolicySet:
    """Load every policy document under ``paths``; raise PolicyLoadError with all issues.

    ``cel_limits``: each expression's estimated-cost limit and runtime budget.

    Each path must give at least one document: an empty file, like a directory without YAML
    files, is an error (a wrong path or an empty ConfigMap, not a request for the defaults).
    """
    files: list[Path] = []
    issues: list[PolicyIssue] = []
    documents: list[Document] = []
    for root in (Path(p) for p in paths):
        found, problems = policy_files([root])
        issues.extend(problems)
        files.extend(found)
        read_before, issues_before = len(documents), len(issues)
        for file in found:
            docs, problems = read_documents(file)
            documents.extend(docs)
            issues.extend(problems)
        if found and len(documents) == read_before and len(issues) == issues_before:
            where = "directory holds" if root.is_dir() else "holds"
            issues.append(PolicyIssue(str(root), 0, 0, "", "", f"{where} no policy document"))
    builder = Builder(cel_limits)
    valid = []
    for doc in documents:
        if _schema_valid(doc, issues):
            valid.append(doc)
        elif isinstance(doc.data, dict) and doc.data.get("kind") in schema.KINDS:
            builder.expressions(doc, doc.data["kind"])  # report its CEL errors too
    by_kind: dict[str, list[Document]] = {kind: [] for kind in schema.KINDS}
    for doc in _unique(valid, issues):
        by_kind[doc.data["kind"]].append(doc)

    queues = [builder.queue(doc) for doc in by_kind["Queue"]]
    scheduling_docs = by_kind["SchedulingPolicy"]
    for extra in scheduling_docs[1:]:
        first = scheduling_docs[0]
        issues.append(
            _issue(
                extra,
                (),
                f"more than one SchedulingPolicy: {object_ref(first)} is already defined at "
                f"{first.file}:{first.position(()).line}; a policy set has at most one",
            )
        )
    scheduling = builder.scheduling(scheduling_docs[0] if scheduling_docs else None)
    admission = [builder.admission(doc) for doc in by_kind["AdmissionPolicy"]]

    queue_docs = {doc.data["metadata"]["name"]: doc for doc in by_kind["Queue"]}

    def report(name: str, path: tuple[str | int, ...], message: str) -> None:
        issues.append(_issue(queue_docs[name], path, message))

    check_queues(queues, report)
    issues.extend(builder.issues)
    if issues or scheduling is None:
        raise PolicyLoadError(sorted(set(issues), key=_issue_order))

    canonical = _canonical(documents)
    digest = _digest(canonical)
    return PolicySet(
        version=f"{digest}@{revision}" if revision else digest,
        digest=digest,
        revision=revision,
        queues=tuple(sorted(queues, key=lambda q: q.name)),
        scheduling=scheduling,
        admission=tuple(sorted((a for a in admission if a), key=lambda a: a.name)),
        files=tuple(str(f) for f in files),
        _queues_by_name={q.name: q for q in queues},
        documents=canonical,
    )


def default_policy_set() -> PolicySet:
    """The set of no documents: the built-in SchedulingPolicy, no queues, no AdmissionPolicies
    (``fleetgate inspect`` without ``--policies``)."""
    digest = _digest(())
    return PolicySet(
        version=digest,
        digest=digest,
        revision=None,
        queues=(),
        scheduling=default_scheduling_policy(),
        admission=(),
        files=(),
        _queues_by_name={},
    )


def default_scheduling_policy() -> SchedulingPolicy:
    """The built-in SchedulingPolicy, used when a policy set defines none."""
    policy = Builder().scheduling(None)
    assert policy is not None, "the built-in defaults compile"
    return policy


def content_digest(documents: Sequence[Document]) -> str:
    """A short hash of the documents' content: independent of layout, key and file order."""
    return _digest(_canonical(documents))


def _canonical(documents: Sequence[Document]) -> tuple[str, ...]:
    """Each document as sorted-key compact JSON, in sorted order: what the digest is of."""
    return tuple(
        sorted(
            json.dumps(doc.data, sort_keys=True, separators=(",", ":"), default=str)
            for doc in documents
        )
    )


def _digest(canonical: Sequence[str]) -> str:
    return hashlib.sha256("\n".join(canonical).encode()).hexdigest()[:12]


def _schema_valid(doc: Document, issues: list[PolicyIssue]) -> bool:
    if not isinstance(doc.data, dict):
        at = doc.position(())
        issues.append(PolicyIssue(doc.file, at.line, at.column, "", "", not_an_object(doc.data)))
        return False
    problems = schema.validate(doc.data)
    for problem in problems:
        at = doc.key_position(problem.path) if problem.at_key else doc.position(problem.path)
        issues.append(
            PolicyIssue(
                doc.file,
                at.line,
                at.column,
                object_ref(doc),
                format_path(problem.path),
                problem.message,
            )
        )
    return not problems


def _unique(documents: Sequence[Document], issues: list[PolicyIssue]) -> list[Document]:
    """Drop (and report) a second document of the same kind and name."""
    seen: dict[str, Document] = {}
    kept = []
    for doc in documents:
        ref = object_ref(doc)
        if ref in seen:
            first = seen[ref]
            issues.append(
                _issue(
                    doc,
                    ("metadata", "name"),
                    f"duplicate name: {ref} is already defined at "
                    f"{first.file}:{first.position(()).line}",
                )
            )
            continue
        seen[ref] = doc
        kept.append(doc)
    return kept


def _issue(doc: Document, path: tuple[str | int, ...], message: str) -> PolicyIssue:
    at = doc.position(path)
    return PolicyIssue(doc.file, at.line, at.column, object_ref(doc), format_path(path), message)


def _issue_order(issue: PolicyIssue) -> tuple[str, int, int, str]:
    return (issue.file, issue.line, issue.column, issue.message)
