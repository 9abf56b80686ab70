"""The fleet ``fleetgate dry-run`` and ``fleetgate diff`` decide on: ``--snapshot`` files (their
documents, with what cannot be read printed), or the live fleet (``--kubeconfig``), read once as
the reconciler's informers read it: every resource they list, in the same form, so a dry-run
decides as the reconciler's next pass would. ``--save-snapshot FILE`` keeps what was read, as a
``List`` that ``--snapshot`` reads back."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

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


LIVE_TIMEOUT = 120.0  # seconds the API server has to list everything


def add_fleet_arguments(parser: argparse.ArgumentParser) -> None:
    """``--snapshot FILE…`` or ``--kubeconfig [--context]``, and ``--save-snapshot``."""
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--snapshot", type=Path, nargs="+", metavar="FILE", dest="snapshot")
    source.add_argument(
        "--kubeconfig",
        help="read the live fleet from this karmada-apiserver, once, as the reconciler does",
    )
    parser.add_argument("--context", help="the kubeconfig's context (with --kubeconfig)")
    parser.add_argument(
        "--save-snapshot", type=Path, metavar="FILE", help="write what was read, for --snapshot"
    )


def fleet_objects(args: argparse.Namespace) -> list[tuple[str, Mapping[str, Any]]] | None:
    """The objects of ``--snapshot`` or of the live fleet (``--kubeconfig``), saved when asked;
    None (said on stderr) when they cannot be read."""
    if args.snapshot:
        objects = read_fleet_objects(args.snapshot)
    else:
        objects = read_live_objects(args.kubeconfig, args.context)
    if objects is not None and args.save_snapshot is not None:
        items = [dict(obj) for _, obj in objects]
        text = yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items})
        try:
            args.save_snapshot.write_text(text, encoding="utf-8")
        except OSError as error:
            print(f"cannot write {args.save_snapshot}: {error}", file=sys.stderr)
            return None
    return objects


def read_live_objects(
    kubeconfig: str, context: str | None, timeout: float = LIVE_TIMEOUT
) -> list[tuple[str, Mapping[str, Any]]] | None:
    """Every object the reconciler's informers list, listed once."""
    import kubernetes

    from reconciler.informers import Informers

    configuration = kubernetes.client.Configuration()
    try:
        kubernetes.config.load_kube_config(
            config_file=kubeconfig, context=context, client_configuration=configuration
        )
    except (kubernetes.config.ConfigException, OSError, ValueError, yaml.YAMLError) as error:
        print(f"cannot read the kubeconfig: {' '.join(str(error).split())}", file=sys.stderr)
        return None
    api = kubernetes.client.ApiClient(configuration)
    informers = Informers(api)
    try:
        informers.start()
        if not informers.wait_synced(timeout):
            print(
                f"the API server did not list the fleet within {timeout:g}s; no cycle was run",
                file=sys.stderr,
            )
            return None
        return informers.snapshot_objects()
    finally:
        informers.stop()
        api.close()
