"""The checks as a table (rich), with what to fix after it, or as JSON."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any, TextIO

from fleetgate.preflight.model import Check, Status, exit_code

STYLES = {Status.OK: "green", Status.WARN: "yellow", Status.FAIL: "bold red", Status.SKIP: "dim"}
PLAIN_WIDTH = 132  # when the output is not a terminal: stable, and wide enough for the details


def summary(checks: Sequence[Check]) -> str:
    counts = Counter(c.status for c in checks)
    said = ", ".join(f"{counts[s]} {s}" for s in Status if counts[s])
    return f"preflight {'failed' if exit_code(checks) else 'passed'}: {said}"


def to_json(checks: Sequence[Check]) -> dict[str, Any]:
    return {
        "passed": not exit_code(checks),
        "checks": [c.to_json() for c in checks],
    }


def write_table(checks: Sequence[Check], out: TextIO) -> None:
    """In colour on a terminal, as wide as it is; otherwise plain, :data:`PLAIN_WIDTH` wide."""
    terminal = out.isatty()
    out.write(table(checks, width=None if terminal else PLAIN_WIDTH, color=terminal))


def table(checks: Sequence[Check], width: int | None = PLAIN_WIDTH, color: bool = False) -> str:
    import io

    from rich.console import Console
    from rich.table import Table

    buffer = io.StringIO()
    console = Console(
        file=buffer,
        width=width,
        force_terminal=color,
        no_color=not color,
        highlight=False,
        emoji=False,
    )
    grid = Table(box=None, pad_edge=False, show_edge=False, header_style="bold")
    grid.add_column("CHECK", no_wrap=True)
    grid.add_column("STATUS", no_wrap=True)
    grid.add_column("DETAIL", overflow="fold")
    for check in checks:
        status = f"[{STYLES[check.status]}]{check.status}[/]"
        grid.add_row(_plain(check.name), status, _plain(check.detail))
    console.print(grid)
    to_fix = [c for c in checks if c.fix and c.status in (Status.FAIL, Status.WARN)]
    if to_fix:
        console.print()
        console.print("To fix:")
        for check in sorted(to_fix, key=lambda c: c.status != Status.FAIL):
            line = f"  {check.status}  {_plain(check.name)}: {_plain(check.fix)}"
            console.print(line, soft_wrap=True)  # one line each: easy to copy, to grep
    console.print()
    console.print(summary(checks))
    return "".join(line.rstrip() + "\n" for line in buffer.getvalue().splitlines())


def _plain(text: str) -> str:
    """Text shown as it is: rich's markup brackets escaped."""
    from rich.markup import escape

    return escape(text)
