"""Snapshot files are read with libyaml's parser when it is installed, with PyYAML's results.

Each case is read twice, once with ``engine.yamlguard.C_LOADER`` and once with it switched off
(PyYAML's parser): same objects, same issues, same words and positions.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from engine import yamlguard
from engine.fleet.files import read_objects
from engine.fleet.model import IssueCode
from engine.yamlguard import MAX_DEPTH
from tests.hostile.test_yaml_bombs import deep, laughs

needs_libyaml = pytest.mark.skipif(not yaml.__with_libyaml__, reason="libyaml is not installed")

NAMESPACE = "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n"

CASES = {
    "documents and a List": NAMESPACE + "---\napiVersion: v1\nkind: List\nitems: [{kind: A}]\n",
    "JSON": '{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a"}}\n',
    "anchors, merge keys, timestamps": (
        "kind: A\nbase: &b {cpu: 1}\nx: {<<: *b, gpu: 2}\nt: 2025-03-10T10:00:00Z\n"
    ),
    "a syntax error at the end": NAMESPACE + "---\nkind: B\nitems: [1, 2\n",
    "a syntax error in a block": NAMESPACE + "---\nkind: B\n  bad: indent\n",
    "a tab for indentation": "kind: A\nspec:\n\tx: 1\n",
    "a non-printable character": "kind: A\nname: \x07\n",
    "a byte-order mark": "\ufeffkind: A\n",
    "CRLF and NEL line breaks": "kind: A\r\nx: 1\r\n---\r\nkind: B\x85---\n- 1\n",
    "text before the error": "kind: A\nname: ééé€😀\n---\n- [é, 😀\n",
    "a document that is not an object": NAMESPACE + "---\n- 1\n---\nplain\n",
    "a bad tag": "kind: A\nx: !!python/object:os.system {}\n",
    "empty documents": "---\n---\n" + NAMESPACE + "...\n",
    "a bomb, then a document": laughs() + "---\n" + NAMESPACE,
    "deep nesting, then documents": deep(5000) + "---\n" + NAMESPACE + "---\n- not an object\n",
    "a recursive alias, then a document": "a: &a [1, *a]\n...\n---\n" + NAMESPACE,
    "a refused document, then no document start": "a: &a [1, *a]\n...\n" + NAMESPACE,
    "a refused document that ends the file": NAMESPACE + "---\n" + deep(1000),
    "a syntax error after a refused document": deep(300) + "---\nkind: [\n",
    "block nesting, then a document": (
        "".join(" " * i + "a:\n" for i in range(MAX_DEPTH + 50)) + "---\n" + NAMESPACE
    ),
}


def read_both(path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any]:
    fast = read_objects([path])
    with monkeypatch.context() as patch:
        patch.setattr(yamlguard, "C_LOADER", None)
        pure = read_objects([path])
    return fast, pure


@needs_libyaml
@pytest.mark.parametrize("text", CASES.values(), ids=CASES.keys())
def test_libyaml_reads_as_pyyaml_does(
    text: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "snap.yaml"
    path.write_text(text, encoding="utf-8")
    fast, pure = read_both(path, monkeypatch)
    assert fast == pure


@needs_libyaml
def test_snapshots_are_read_with_libyaml_when_installed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[str] = []

    class Spy(yamlguard.C_LOADER):  # type: ignore[misc, name-defined]
        def __init__(self, stream: str) -> None:
            made.append(stream)
            super().__init__(stream)

    monkeypatch.setattr(yamlguard, "C_LOADER", Spy)
    path = tmp_path / "snap.yaml"
    path.write_text(NAMESPACE)
    objects, issues = read_objects([path])
    assert [o["kind"] for _, o in objects] == ["Namespace"]
    assert issues == []
    assert made == [NAMESPACE]


@needs_libyaml
def test_a_syntax_error_is_worded_as_pyyaml_words_it(tmp_path: Path) -> None:
    path = tmp_path / "snap.yaml"
    path.write_text(NAMESPACE + "---\nitems: [1, 2\n")
    objects, [issue] = read_objects([path])
    assert [o["kind"] for _, o in objects] == ["Namespace"]  # documents before the error stay
    assert str(issue) == f"{path}:6:1: YAML syntax: expected ',' or ']', but got '<stream end>'"


@needs_libyaml
def test_a_bomb_is_refused_with_libyaml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    used: list[bool] = []

    class Spy(yamlguard.C_LOADER):  # type: ignore[misc, name-defined]
        def __init__(self, stream: str) -> None:
            used.append(True)
            super().__init__(stream)

    monkeypatch.setattr(yamlguard, "C_LOADER", Spy)
    path = tmp_path / "snap.yaml"
    path.write_text(laughs() + "---\n" + deep(100_000))
    objects, issues = read_objects([path])
    assert used
    assert objects == []
    assert [i.code for i in issues] == [IssueCode.REFUSED, IssueCode.REFUSED]
    assert "aliases expand to more than" in issues[0].message
    assert (issues[1].line, issues[1].column) == (12, 6 + MAX_DEPTH)


@pytest.mark.parametrize("libyaml", [True, False], ids=["libyaml", "pyyaml"])
def test_documents_after_a_refused_one_are_read(
    libyaml: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if libyaml and not yaml.__with_libyaml__:
        pytest.skip("libyaml is not installed")
    if not libyaml:
        monkeypatch.setattr(yamlguard, "C_LOADER", None)
    path = tmp_path / "snap.yaml"
    # a million levels: skipping them through either parser would take minutes
    path.write_text(
        NAMESPACE + "---\n" + deep(1_000_000) + "---\n" + laughs() + "...\n---\n" + NAMESPACE
        + "---\n- 1\n"
    )  # fmt: skip
    objects, issues = read_objects([path])
    assert [o["kind"] for _, o in objects] == ["Namespace", "Namespace"]
    assert [(i.code, i.line, i.column) for i in issues] == [
        (IssueCode.REFUSED, 5, 6 + MAX_DEPTH),
        (IssueCode.REFUSED, 11, 10),  # the alias over the limit, in the file's own lines
        (IssueCode.UNREADABLE, 23, 1),  # the list after them, at its own line
    ]


def test_a_marker_on_the_refused_line_is_not_taken_for_the_next_document(
    tmp_path: Path,
) -> None:
    path = tmp_path / "snap.yaml"
    path.write_text("--- " + "[" * 1000 + "]" * 1000 + "\n---\n" + NAMESPACE)
    objects, [issue] = read_objects([path])
    assert [o["kind"] for _, o in objects] == ["Namespace"]
    assert (issue.code, issue.line) == (IssueCode.REFUSED, 1)
