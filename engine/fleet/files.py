"""Snapshot files → (source, object) pairs. The only module of engine.fleet that touches files.

A file holds what ``kubectl get … -o yaml`` prints: one ``kind: List`` or several YAML documents
(JSON is YAML too). A directory stands for its ``*.yaml``, ``*.yml`` and ``*.json`` files, searched
recursively.

What cannot be read becomes an ``IssueCode.UNREADABLE`` issue in the words every command uses
(``engine.errors``): a missing path, a file that is not UTF-8 text, a YAML syntax error, a
document that is not an object, a directory with no file to read.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

from engine.errors import cannot_read, no_files_in, not_an_object, yaml_syntax
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
        if isinstance(path, SnapshotIssue):
            issues.append(path)
            continue
        source = str(path)
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as err:
            issues.append(_unreadable(source, cannot_read(err)))
            continue
        loader = yaml.SafeLoader(text)
        try:
            while loader.check_node():
                node = loader.get_node()
                document = loader.construct_document(node)
                if document is None:
                    continue
                if isinstance(document, Mapping):
                    objects.append((source, document))
                else:
                    issues.append(_unreadable(source, not_an_object(document), node.start_mark))
        except yaml.MarkedYAMLError as err:
            problem = err.problem or err.context or "invalid YAML"
            issues.append(
                _unreadable(source, yaml_syntax(problem), err.problem_mark or err.context_mark)
            )
        except yaml.YAMLError as err:
            issues.append(_unreadable(source, yaml_syntax(str(err))))
        finally:
            loader.dispose()
    return objects, issues


def _expand(paths: Iterable[str | Path]) -> Iterator[Path | SnapshotIssue]:
    """The files to read, in the order given; a directory with none is an issue in its place."""
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.suffix in SUFFIXES and p.is_file())
            if not found:
                yield _unreadable(str(path), no_files_in(SUFFIXES))
            yield from found
        else:
            yield path


def _unreadable(source: str, message: str, mark: yaml.Mark | None = None) -> SnapshotIssue:
    line, column = (mark.line + 1, mark.column + 1) if mark is not None else (0, 0)
    return SnapshotIssue(source, "", "", message, IssueCode.UNREADABLE, line, column)
