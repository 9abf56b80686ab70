"""The ``--snapshot`` files of ``fleetgate dry-run`` and ``fleetgate diff``: their documents, with
what cannot be read printed."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from engine.fleet.files import read_objects
from engine.fleet.model import IssueCode


def read_fleet_objects(paths: Sequence[Path]) -> list[tuple[str, Mapping[str, Any]]] | None:
    """The snapshot's documents (refused ones warned of, left out); None, the errors printed,
    when any cannot be read: a cycle on part of the fleet would miss capacity and jobs."""
    objects, problems = read_objects(paths)
    for refused in (p for p in problems if p.code is IssueCode.REFUSED):
        print(f"warning: {refused}; that document is left out", file=sys.stderr)
    problems = [p for p in problems if p.code is not IssueCode.REFUSED]
    if problems:
        for problem in problems:
            print(problem, file=sys.stderr)
        print(
            f"{len(problems)} error(s): the snapshot cannot be read; no cycle was run",
            file=sys.stderr,
        )
        return None
    return objects
