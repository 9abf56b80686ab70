"""Snapshot files → (source, object) pairs. The only module of engine.fleet that touches files.

A file holds what ``kubectl get … -o yaml`` prints: one ``kind: List`` or several YAML documents
(JSON is YAML too). A directory stands for its ``*.yaml``, ``*.yml`` and ``*.json`` files.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from engine.fleet.model import IssueCode, SnapshotIssue

SUFFIXES = (".yaml", ".yml", ".json")


def read_objects(
    paths: Iterable[str | Path],
) -> tuple[list[tuple[str, Mapping[str, Any]]], list[SnapshotIssue]]:
    """Every document of every file, with its file name; unreadable parts become issues.

    Documents before a YAML error in the same file are kept.
    """
    objects: list[tuple[str, Mapping[str, Any]]] = []
    issues: list[SnapshotIssue] = []
    for path in _expand(paths):
        source = str(path)
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as err:
            issues.append(
                SnapshotIssue(source, "", "", f"cannot read: {err}", IssueCode.UNREADABLE)
            )
            continue
        try:
            for index, document in enumerate(yaml.safe_load_all(text)):
                if document is None:
                    continue
                if isinstance(document, Mapping):
                    objects.append((source, document))
                else:
                    issues.append(
                        SnapshotIssue(
                            source,
                            "",
                            f"document {index + 1}",
                            f"expected an object, got {type(document).__name__}",
                            IssueCode.UNREADABLE,
                        )
                    )
        except yaml.YAMLError as err:
            issues.append(_yaml_issue(source, err))
    return objects, issues


def _expand(paths: Iterable[str | Path]) -> list[Path]:
    result: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            result.extend(
                sorted(p for p in path.rglob("*") if p.suffix in SUFFIXES and p.is_file())
            )
        else:
            result.append(path)
    return result


def _yaml_issue(source: str, err: yaml.YAMLError) -> SnapshotIssue:
    mark = getattr(err, "problem_mark", None) or getattr(err, "context_mark", None)
    where = f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    problem = getattr(err, "problem", None) or str(err)
    return SnapshotIssue(source, "", where, f"invalid YAML: {problem}", IssueCode.UNREADABLE)
