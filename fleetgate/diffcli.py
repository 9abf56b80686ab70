"""``fleetgate diff``, the edge: read both policy sets (a directory, or ``REV:path`` from git),
read the snapshot, run one cycle under each, and print ``engine.diff``'s comparison.

Exit codes as ``git diff --exit-code``: 0 nothing differs, 1 something does, 2 an error (an
invalid policy set on either side, an unreadable snapshot, a revision git cannot show).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from engine.errors import FleetgateError, PolicyLoadError
from engine.policy.policyset import PolicySet, load_policy_set
from fleetgate.snapshotfiles import fleet_objects

EXIT_SAME, EXIT_DIFFERENT, EXIT_ERROR = 0, 1, 2
SIDES = ("base", "head")


class GitError(FleetgateError):
    """A ``REV:path`` that git cannot show; the message says why."""


def run(args: argparse.Namespace) -> int:
    from engine import diffreport
    from engine.cycle import run_cycle
    from engine.diff import diff_results
    from engine.gcpause import collector_paused

    with tempfile.TemporaryDirectory(prefix="fleetgate-diff-") as scratch:
        sides = [
            load_side(side, spec, Path(scratch) / side)
            for side, spec in zip(SIDES, (args.base, args.head), strict=True)
        ]
    errors = [line for _, lines in sides for line in lines]
    for line in errors:
        print(line, file=sys.stderr)
    snapshot = _read_snapshot(args)
    if errors or snapshot is None:
        if errors:
            broken = " and ".join(
                side for side, (_, lines) in zip(SIDES, sides, strict=True) if lines
            )
            print(f"the {broken} policies cannot be used; no cycle was run", file=sys.stderr)
        return EXIT_ERROR
    (base, _), (head, _) = sides
    assert base is not None and head is not None
    now = args.now or dt.datetime.now(dt.UTC)
    with collector_paused():
        diff = diff_results(run_cycle(snapshot, base, now), run_cycle(snapshot, head, now))
    if args.output == "json":
        print(json.dumps(diffreport.to_json(diff, args.base, args.head), indent=2))
    elif args.output == "markdown":
        print(diffreport.markdown(diff, args.base, args.head))
    else:
        print(diffreport.table(diff, args.base, args.head))
    return EXIT_DIFFERENT if diff.changed else EXIT_SAME


def load_side(side: str, spec: str, scratch: Path) -> tuple[PolicySet | None, list[str]]:
    """The policy set ``spec`` names, or the lines that say why there is none, each starting
    with ``side``. A path that exists is read as it is; otherwise ``REV:path`` is read from
    git at REV, with REV's short commit id recorded in the policy version."""
    revision = None
    if not Path(spec).exists() and ":" in spec:
        rev, path = spec.split(":", 1)
        try:
            revision, root = checkout(rev, path, scratch)
        except GitError as err:
            return None, [f"{side}: {spec}: {str(err) or 'git failed'}"]
    else:
        rev, root = "", Path(spec)
    try:
        return load_policy_set([root], revision=revision), []
    except PolicyLoadError as err:
        lines = [f"{side}: {issue}" for issue in err.issues]
        if revision is not None:  # name the files as git does, not by where they were copied
            lines = [line.replace(f"{scratch}{os.sep}", f"{rev}:") for line in lines]
        return None, [*lines, f"{side}: {len(err.issues)} error(s) in {spec}"]


def checkout(rev: str, path: str, into: Path) -> tuple[str, Path]:
    """Copy the files under ``path`` (relative to the current directory) at ``rev`` into
    ``into``, keeping their layout from the repository's root; return the short commit id and
    where ``path`` is in the copy."""
    if not rev or not path:
        raise GitError("expected REV:PATH, e.g. HEAD~1:policies")
    try:
        commit = _git("rev-parse", "--verify", "--quiet", "--short", f"{rev}^{{commit}}").strip()
    except GitError as err:
        raise GitError(f"no commit {rev!r}" + (f" ({err})" if str(err) else "")) from err
    full = os.path.normpath(Path(_git("rev-parse", "--show-prefix").strip()) / path)
    if full == ".." or full.startswith(f"..{os.sep}"):
        raise GitError("the path is outside the git repository")
    listing = _git("ls-tree", "-r", "-z", "--name-only", "--full-tree", commit, "--", full)
    names = [name for name in listing.split("\0") if name]
    if not names:
        raise GitError(f"no file under {full!r} at {rev} ({commit})")
    for name in names:
        target = into / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(_git_bytes("cat-file", "blob", f"{commit}:{name}"))
    return commit, into / full


def _git(*argv: str) -> str:
    return _git_bytes(*argv).decode("utf-8", "surrogateescape")


def _git_bytes(*argv: str) -> bytes:
    try:
        done = subprocess.run(["git", *argv], capture_output=True, check=False)
    except OSError as err:
        raise GitError(f"cannot run git: {err.strerror or err}") from err
    if done.returncode != 0:
        message = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise GitError(message[-1] if message else "")
    return done.stdout


def _read_snapshot(args: argparse.Namespace):  # -> Snapshot | None
    """The snapshot, its warnings printed; None (the errors printed) when it cannot be read."""
    from engine.fleet.snapshot import build_snapshot
    from engine.fleet.submit import unbound_templates

    objects = fleet_objects(args)
    if objects is None:
        return None
    snapshot = build_snapshot(objects)
    for issue in [*snapshot.errors, *unbound_templates(objects)]:
        print(f"warning: {issue}", file=sys.stderr)
    return snapshot
