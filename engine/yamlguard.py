"""YAML loading with bounded nesting and alias expansion ("billion laughs").

PyYAML shares the node (and the object) an alias names, so a 900-byte document of nested aliases
composes into a few dozen nodes, but anything that walks it as a tree (positions, freezing,
copying, JSON) visits ``10**9`` of them. Deep nesting overflows the stack: the pure-Python
composer raises RecursionError, libyaml's C composer crashes the process. So the composer here
counts, while composing and before anything is constructed:

- nesting depth, aliases followed: more than ``MAX_DEPTH`` levels is refused;
- nodes reached through aliases (each use counts the whole subtree it names): more than
  ``alias_limit(own)`` is refused, where ``own`` is the number of nodes written in the document;
- an alias used inside the node it names (a recursive document) is refused.

A refusal is a ``YAMLLimitError`` (a ``yaml.MarkedYAMLError``, so it carries the position) raised
from ``get_node``. Skipping the rest of a deep document through the parser takes time quadratic in
its depth (in PyYAML's scanner and in libyaml's alike: 100,000 levels of ``[`` take 24 s in
libyaml), so a reader that goes on with the next documents finds it in the text with
``resume_after`` instead; policies end the file there, snapshots go on.

Composition is always PyYAML's Python composer: libyaml's C composer cannot be bounded (it
recurses in C and crashes the process at about 100,000 levels). ``C_LOADER`` runs it over
libyaml's C scanner and parser, which keep their state on explicit stacks (no C recursion: a
million levels of ``[`` parse without growing the stack) and are pulled one event at a time, so
the composer refuses a deep document after reading its first ``MAX_DEPTH`` levels, whichever
parser feeds it. ``fast_loader`` picks it when libyaml is installed (snapshots); ``guarded_loader``
is PyYAML's parser, whose words and positions are the ones every command prints.
"""

from __future__ import annotations

import re
from typing import Any

import yaml
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.events import AliasEvent
from yaml.resolver import Resolver

# Kubernetes objects nest ~10 levels, deep CRD schemas ~40. Each level costs three Python frames
# while composing; 200 stays clear of the interpreter's default recursion limit of 1,000.
MAX_DEPTH = 200
ALIAS_RATIO = 100  # nodes reached through aliases per node written
ALIAS_FLOOR = 10_000  # always allowed, whatever the document's size
ALIAS_CAP = 1_000_000  # never allowed beyond, whatever the document's size


def alias_limit(own: int) -> int:
    """How many nodes a document of ``own`` written nodes may reach through aliases."""
    return min(ALIAS_CAP, max(ALIAS_FLOOR, ALIAS_RATIO * own))


class YAMLLimitError(yaml.MarkedYAMLError):
    """A document refused for its nesting or alias expansion; ``problem`` says which limit."""


class GuardedComposer(Composer):
    """PyYAML's composer, counting depth and alias expansion per document (see module doc)."""

    def compose_document(self) -> Any:
        self._depth = 0  # of the node being composed, aliases followed
        self._deepest = 0  # deepest level reached so far, aliases followed
        self._own = 0  # nodes written in the document
        self._aliased = 0  # nodes reached through aliases
        self._subtree: dict[int, tuple[int, int]] = {}  # anchored node → (size, height)
        return super().compose_document()

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        if self.check_event(AliasEvent):
            node = super().compose_node(parent, index)
            self._follow(node, event.start_mark)
            return node
        if self._depth >= MAX_DEPTH:
            raise YAMLLimitError(
                None, None, f"nested deeper than {MAX_DEPTH} levels", event.start_mark
            )
        outer_deepest = self._deepest
        self._depth += 1
        self._deepest = self._depth
        count_before = self._own + self._aliased
        try:
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
        self._own += 1
        if event.anchor is not None:
            size = self._own + self._aliased - count_before
            self._subtree[id(node)] = (size, self._deepest - self._depth)
        self._deepest = max(outer_deepest, self._deepest)
        return node

    def _follow(self, node: Any, mark: Any) -> None:
        known = self._subtree.get(id(node))
        if known is None:  # named by an anchor whose node is still being composed
            raise YAMLLimitError(None, None, "alias used inside the node it names", mark)
        size, height = known
        if self._depth + height > MAX_DEPTH:
            raise YAMLLimitError(
                None, None, f"nested deeper than {MAX_DEPTH} levels through aliases", mark
            )
        self._deepest = max(self._deepest, self._depth + height)
        self._aliased += size
        limit = alias_limit(self._own)
        if self._aliased > limit:
            raise YAMLLimitError(
                None,
                None,
                f"aliases expand to more than {limit:,} nodes (the limit: {ALIAS_RATIO}× "
                f"the {self._own:,} nodes written so far, at least {ALIAS_FLOOR:,}, "
                f"at most {ALIAS_CAP:,})",
                mark,
            )


class _PythonLoader(GuardedComposer, yaml.SafeLoader):
    pass


if yaml.__with_libyaml__:
    from yaml._yaml import CParser

    class _CLoader(GuardedComposer, CParser, SafeConstructor, Resolver):
        """libyaml's scanner and parser, the guarded composer, the safe constructor."""

        def __init__(self, stream: str) -> None:
            CParser.__init__(self, stream)
            Composer.__init__(self)
            SafeConstructor.__init__(self)
            Resolver.__init__(self)

    C_LOADER: type | None = _CLoader
else:  # pragma: no cover - libyaml is part of the supported install
    C_LOADER = None


def guarded_loader(text: str) -> Any:
    """A safe loader for ``text`` with the limits above, PyYAML's parser.

    Its error messages and marks are canonical: libyaml words syntax errors differently.
    """
    return _PythonLoader(text)


def fast_loader(text: str) -> Any:
    """``C_LOADER`` over ``text`` when libyaml is installed (~3× faster), else ``guarded_loader``.

    Same limits, same nodes and objects; only the wording of syntax errors differs, so a caller
    that prints one reads the text again with ``guarded_loader`` for the canonical message.
    """
    return _PythonLoader(text) if C_LOADER is None else C_LOADER(text)


# A document marker at the start of a line ends the document in any context: plain and block
# scalars stop there, in flow collections and quoted scalars it is an error of that document.
_MARKER = re.compile(r"(?<=[\r\n\x85\u2028\u2029])(?:---|\.\.\.)(?=[ \t\r\n\x85\u2028\u2029]|\Z)")
_BREAK = re.compile("\r\n|[\r\n\x85\u2028\u2029]")


def resume_after(text: str, error: YAMLLimitError) -> str | None:
    """The text of the documents after the refused one, or None if there are none.

    Found by the next document marker (``---`` or ``...`` at the start of a line after the
    refusal's line), in linear time. The text is padded with the line breaks before it, so marks
    read from it carry the line numbers of the whole file (columns are unchanged: it starts at
    the start of a line).
    """
    mark = error.problem_mark
    if mark is None:
        return None
    after = _BREAK.search(text, mark.index)
    if after is None:
        return None
    marker = _MARKER.search(text, after.end())
    if marker is None:
        return None
    lines = mark.line + 1 + len(_BREAK.findall(text, after.end(), marker.start()))
    if text.startswith("...", marker.start()):
        # A stream cannot start with "...": an empty document in the line before stands for
        # the refused one, so what follows reads as it does after the refused document.
        return "\n" * (lines - 1) + "---\n" + text[marker.start() :]
    return "\n" * lines + text[marker.start() :]
