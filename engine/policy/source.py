"""Policy files → YAML documents, each with the file position of every value in it.

Safe loading only. Positions are 1-based; a document's ``positions`` maps a JSON path (a tuple of
keys and indexes) to where that value (or, for mapping keys, the key) starts. Duplicate mapping
keys, which YAML parsers silently collapse, are reported as issues.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from engine.errors import NO_SUCH_FILE, PolicyIssue, cannot_read, no_files_in, yaml_syntax
from engine.policy import kustomize
from engine.yamlguard import YAMLLimitError, guarded_loader

JsonPath = tuple[str | int, ...]

_SUFFIXES = (".yaml", ".yml")


@dataclass(frozen=True, slots=True)
class Position:
    line: int
    column: int


@dataclass(frozen=True, slots=True)
class ScalarText:
    """How a string scalar was written, so CEL positions can be mapped back into the file."""

    style: str | None  # None (plain), "'", '"', "|", ">"
    start: Position
    indent: int  # column (0-based) of the block content, for | and >


@dataclass(frozen=True, slots=True)
class Document:
    file: str
    index: int  # position of the document in its file, from 0
    data: Any
    positions: Mapping[JsonPath, Position] = field(repr=False)
    key_positions: Mapping[JsonPath, Position] = field(repr=False)
    scalars: Mapping[JsonPath, ScalarText] = field(repr=False)

    def position(self, path: Iterable[str | int]) -> Position:
        """The nearest known position of ``path``: the value itself or its closest ancestor."""
        current = tuple(path)
        while current:
            if current in self.positions:
                return self.positions[current]
            current = current[:-1]
        return self.positions.get((), Position(1, 1))

    def key_position(self, path: Iterable[str | int]) -> Position:
        """Where the key of ``path`` is written (for 'unknown field' errors), else its value."""
        path = tuple(path)
        return self.key_positions.get(path) or self.position(path)


def policy_files(paths: Iterable[Path]) -> tuple[list[Path], list[PolicyIssue]]:
    """Expand directories (recursively, YAML files only, sorted) and check files exist.

    Inside a directory, hidden paths (a component of the path below the directory starts with
    ".") are skipped: editor files like ``.queues.yaml.swp`` and, in a ConfigMap volume, the
    kubelet's ``..2025_03_10_…/queues.yaml``, the real file behind the ``queues.yaml`` symlink
    (``queues.yaml -> ..data/queues.yaml``, ``..data -> ..2025_03_10_…``). Symlinks are
    followed, so each document is read once, under its visible name. A ``kustomization.yaml``
    is kustomize's, not a policy: skipped, and the one directly in a directory must list every
    policy file under it (``engine.policy.kustomize``).
    """
    files: list[Path] = []
    issues: list[PolicyIssue] = []
    for path in paths:
        if path.is_dir():
            found = sorted(p for p in path.rglob("*") if _is_policy_file(p, path))
            if not found:
                issues.append(_file_issue(path, no_files_in(_SUFFIXES)))
            files.extend(found)
            issues.extend(kustomize.unlisted(path, found))
        elif path.is_file():
            files.append(path)
        else:
            issues.append(_file_issue(path, NO_SUCH_FILE))
    return files, issues


def _is_policy_file(path: Path, directory: Path) -> bool:
    hidden = any(part.startswith(".") for part in path.relative_to(directory).parts)
    return (
        not hidden
        and path.suffix in _SUFFIXES
        and not kustomize.is_kustomization(path)
        and path.is_file()
    )


def read_documents(path: Path, text: str | None = None) -> tuple[list[Document], list[PolicyIssue]]:
    """Parse every YAML document in ``path``; empty documents are skipped.

    Nesting and alias expansion are bounded (``engine.yamlguard``): a document beyond them is
    an issue at its place that, like a syntax error, ends the reading of the file.
    """
    name = str(path)
    if text is None:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as err:
            return [], [_file_issue(path, cannot_read(err))]
    documents: list[Document] = []
    issues: list[PolicyIssue] = []
    loader = guarded_loader(text)
    try:
        index = 0
        while loader.check_node():
            try:
                node = loader.get_node()
            except YAMLLimitError as err:
                issues.append(_limit_issue(name, err))
                break
            if node is None:
                continue
            indexer = _Indexer(name, text)
            indexer.walk(node, ())
            issues.extend(indexer.issues)
            data = loader.construct_document(node)
            if data is not None:
                documents.append(
                    Document(
                        name, index, data, indexer.positions, indexer.key_positions, indexer.scalars
                    )
                )
            index += 1
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        line, column = (mark.line + 1, mark.column + 1) if mark else (0, 0)
        problem = err.problem or err.context or "invalid YAML"
        issues.append(PolicyIssue(name, line, column, "", "", yaml_syntax(problem)))
    except yaml.YAMLError as err:
        issues.append(PolicyIssue(name, 0, 0, "", "", yaml_syntax(str(err))))
    finally:
        loader.dispose()
    return documents, issues


def format_path(path: Iterable[str | int]) -> str:
    """``("spec", "guarantee", "nvidia.com/gpu")`` → ``spec.guarantee["nvidia.com/gpu"]``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part.isidentifier():
            out += f".{part}" if out else part
        else:
            out += f'["{part}"]'
    return out


def _limit_issue(file: str, err: YAMLLimitError) -> PolicyIssue:
    mark = err.problem_mark
    line, column = (mark.line + 1, mark.column + 1) if mark else (0, 0)
    return PolicyIssue(file, line, column, "", "", f"YAML document refused: {err.problem}")


def _file_issue(path: Path, message: str) -> PolicyIssue:
    return PolicyIssue(str(path), 0, 0, "", "", message)


def _position(node: yaml.Node) -> Position:
    return Position(node.start_mark.line + 1, node.start_mark.column + 1)


class _Indexer:
    """Walks a composed YAML node tree, recording positions and duplicate keys."""

    def __init__(self, file: str, text: str) -> None:
        self.file = file
        self.text = text
        self.positions: dict[JsonPath, Position] = {}
        self.key_positions: dict[JsonPath, Position] = {}
        self.scalars: dict[JsonPath, ScalarText] = {}
        self.issues: list[PolicyIssue] = []
        self._active: set[int] = set()

    def walk(self, node: yaml.Node, path: JsonPath) -> None:
        self.positions.setdefault(path, _position(node))
        if id(node) in self._active:  # a recursive alias; the constructor reports it
            return
        self._active.add(id(node))
        try:
            for child_path, child in self._children(node, path):
                self.walk(child, child_path)
        finally:
            self._active.discard(id(node))
        if isinstance(node, yaml.ScalarNode) and node.tag == "tag:yaml.org,2002:str":
            self.scalars[path] = ScalarText(
                node.style, _position(node), _block_indent(node, self.text)
            )

    def _children(self, node: yaml.Node, path: JsonPath) -> Iterator[tuple[JsonPath, yaml.Node]]:
        if isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                yield (*path, i), item
        elif isinstance(node, yaml.MappingNode):
            seen: dict[str, Position] = {}
            for key_node, value_node in node.value:
                if not isinstance(key_node, yaml.ScalarNode):
                    continue
                key = key_node.value
                if key == "<<":  # merge key: its values land in this mapping
                    yield path, value_node
                    continue
                where = _position(key_node)
                if key in seen:
                    first = seen[key]
                    self.issues.append(
                        PolicyIssue(
                            self.file,
                            where.line,
                            where.column,
                            "",
                            format_path((*path, key)),
                            f"duplicate key {key!r} (first at line {first.line}); "
                            "YAML would keep only the last one",
                        )
                    )
                seen[key] = where
                self.key_positions[(*path, key)] = where
                yield (*path, key), value_node


def _block_indent(node: yaml.ScalarNode, text: str) -> int:
    """Column of the first content line of a block scalar (| or >), 0-based.

    From the document's text at the mark's character index: libyaml's marks have no buffer.
    """
    if node.style not in ("|", ">"):
        return 0
    newline = text.find("\n", node.start_mark.index)
    if newline < 0:
        return 0
    rest = text[newline + 1 :]
    for line in rest.splitlines():
        if line.strip():
            return len(line) - len(line.lstrip(" "))
    return 0
