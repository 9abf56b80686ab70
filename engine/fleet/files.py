"""Snapshot files → (source, object) pairs. The only module of engine.fleet that touches files.

A file holds what ``kubectl get … -o yaml`` prints: one ``kind: List`` or several YAML documents
(JSON is YAML too). A directory stands for its ``*.yaml``, ``*.yml`` and ``*.json`` files, searched
recursively.

What cannot be read becomes an ``IssueCode.UNREADABLE`` issue in the words every command uses
(``engine.errors``): a missing path, a file that is not UTF-8 text, a YAML syntax error, a
document that is not an object, a directory with no file to read. A document nested too deep or
expanding too many aliases (``engine.yamlguard``) is an ``IssueCode.REFUSED`` issue; reading goes
on with the next document of the file. A syntax error ends the file.

Files are read with libyaml's parser when it is installed (``yamlguard.fast_loader``: a 50 MB
snapshot reads ~3× faster, see ``benchmarks/snapshot_load.py``), under the same limits.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

from engine import yamlguard
from engine.errors import cannot_read, no_files_in, not_an_object, yaml_syntax
from engine.fleet.model import IssueCode, SnapshotIssue
from engine.yamlguard import (
    YAMLLimitError,
    fast_loader,
    guarded_loader,
    resume_after,
)

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
        file_objects, file_issues = _read_text(source, text)
        objects.extend(file_objects)
        issues.extend(file_issues)
    return objects, issues


def _read_text(
    source: str, text: str
) -> tuple[list[tuple[str, Mapping[str, Any]]], list[SnapshotIssue]]:
    """The documents of one file, read fast; its syntax error, if any, in PyYAML's words.

    libyaml words syntax errors differently from PyYAML ("did not find expected ',' or ']'"
    against "expected ',' or ']', but got '<stream end>'"), and every command prints PyYAML's.
    So a file on which libyaml reports one is read again, whole, with PyYAML's parser, for the
    canonical message and position: errors are rare, and reading one bad file twice costs less
    than reading every good one slowly.
    """
    objects: list[tuple[str, Mapping[str, Any]]] = []
    issues: list[SnapshotIssue] = []
    if yamlguard.C_LOADER is not None:
        try:
            _read_documents(source, text, objects, issues, canonical=False)
            return objects, issues
        except yaml.YAMLError:
            objects.clear()
            issues.clear()
    _read_documents(source, text, objects, issues, canonical=True)
    return objects, issues


def _read_documents(
    source: str,
    text: str,
    objects: list[tuple[str, Mapping[str, Any]]],
    issues: list[SnapshotIssue],
    *,
    canonical: bool,
) -> None:
    """Append the documents of ``text``; documents before an error are kept.

    ``canonical``: PyYAML's parser, whose syntax errors become an issue that ends the file;
    otherwise libyaml's, whose syntax errors are raised (the caller reads the file again). After
    a refused document, reading goes on from the next document marker (``resume_after``).
    """
    make_loader = guarded_loader if canonical else fast_loader
    rest: str | None = text
    while rest:
        try:
            rest = _read_until_refused(source, rest, make_loader(rest), objects, issues)
        except yaml.MarkedYAMLError as err:
            if not canonical:
                raise
            problem = err.problem or err.context or "invalid YAML"
            mark = err.problem_mark or err.context_mark
            issues.append(_unreadable(source, yaml_syntax(problem), mark))
            return
        except yaml.YAMLError as err:
            if not canonical:
                raise
            issues.append(_unreadable(source, yaml_syntax(str(err))))
            return


def _read_until_refused(
    source: str,
    text: str,
    loader: Any,
    objects: list[tuple[str, Mapping[str, Any]]],
    issues: list[SnapshotIssue],
) -> str | None:
    """Read documents to the end (None) or to a refused one (the text after it, if any)."""
    try:
        while loader.check_node():
            try:
                node = loader.get_node()
            except YAMLLimitError as err:
                message = f"YAML document refused: {err.problem}"
                mark = err.problem_mark
                line, column = (mark.line + 1, mark.column + 1) if mark else (0, 0)
                issues.append(
                    SnapshotIssue(source, "", "", message, IssueCode.REFUSED, line, column)
                )
                return resume_after(text, err)
            document = loader.construct_document(node)
            if document is None:
                continue
            if isinstance(document, Mapping):
                objects.append((source, document))
            else:
                issues.append(_unreadable(source, not_an_object(document), node.start_mark))
    finally:
        loader.dispose()
    return None


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
