"""The small error hierarchy of fleetgate.

Exceptions are for broken input and bugs; a scheduling refusal is a value, never an exception.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


class FleetgateError(Exception):
    """Root of every error fleetgate raises on purpose."""


class QuantityError(FleetgateError, ValueError):
    """A Kubernetes quantity that does not parse."""


@dataclass(frozen=True, slots=True)
class PolicyIssue:
    """One problem in a policy document, with its place.

    ``line`` and ``column`` are 1-based positions in ``file``, 0 when the problem is the file
    itself; ``path`` is a JSON path inside the document (``spec.guarantee["nvidia.com/gpu"]``);
    ``obj`` is ``Kind/name`` when known.
    """

    file: str
    line: int
    column: int
    obj: str
    path: str
    message: str

    def __str__(self) -> str:
        return issue_text(self.file, self.line, self.column, self.obj, self.path, self.message)


def issue_text(file: str, line: int, column: int, obj: str, path: str, message: str) -> str:
    """The one line every command prints for a problem in its input.

    ``FILE:LINE:COL: Kind/name: path: message``; a part that is not known (line 0, an empty
    object or path) is left out, so a file that cannot be read reads ``FILE: message``.
    """
    where = f"{file}:{line}:{column}" if file and line else file
    return ": ".join(part for part in (where, obj, path, message) if part)


# -- the same words for input that cannot be read, in every command ----------------------------

NO_SUCH_FILE = "no such file or directory"


def no_files_in(suffixes: Sequence[str]) -> str:
    """The message for a directory without any file a command reads."""
    names = ", ".join(suffixes[:-1]) + f" or {suffixes[-1]}" if len(suffixes) > 1 else suffixes[0]
    return f"directory holds no {names} file"


def cannot_read(err: OSError | UnicodeDecodeError) -> str:
    """Why a file could not be read; the file name is not repeated (the issue carries it)."""
    if isinstance(err, UnicodeDecodeError):
        return (
            f"cannot read: not UTF-8 text (byte {err.object[err.start]:#04x} at offset {err.start})"
        )
    if isinstance(err, FileNotFoundError):
        return NO_SUCH_FILE
    return f"cannot read: {err.strerror or err}"


def yaml_syntax(problem: str) -> str:
    return f"YAML syntax: {problem}"


def not_an_object(value: Any) -> str:
    """The message for a YAML document that is not a Kubernetes object."""
    return f"expected an object with apiVersion and kind, got {value_type(value)}"


def value_type(value: Any) -> str:
    """``a list``, ``a string``…: the type of a parsed YAML or JSON value, as people say it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return f"a {type(value).__name__}"


class PolicyLoadError(FleetgateError):
    """A policy set that cannot be loaded; carries every issue found, in file order."""

    def __init__(self, issues: Sequence[PolicyIssue]) -> None:
        self.issues: tuple[PolicyIssue, ...] = tuple(issues)
        count = len(self.issues)
        head = "\n".join(str(i) for i in self.issues[:20])
        more = f"\n… and {count - 20} more" if count > 20 else ""
        super().__init__(f"{count} policy error(s):\n{head}{more}")
