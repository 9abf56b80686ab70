"""A kustomization beside the policy files: kustomize's file, not a policy, and it must list them.

``policies/kustomization.yaml`` generates the webhook's ConfigMap, and kustomize names each file
of a configMapGenerator: it takes no glob and no directory, by design (kubernetes-sigs/kustomize
#189). A policy file missing from that list would pass ``fleetgate validate policies/`` and be
left out of the deployed set without a word, so the loader reports it. The kustomization found
directly in a directory given to the loader is checked against every policy file under it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from engine.errors import PolicyIssue, cannot_read, yaml_syntax

NAMES = ("kustomization.yaml", "kustomization.yml", "Kustomization")  # what kustomize reads


def is_kustomization(path: Path) -> bool:
    return path.name in NAMES


def unlisted(directory: Path, found: Sequence[Path]) -> list[PolicyIssue]:
    """An issue for each of ``found`` that the configMapGenerator files of ``directory``'s
    kustomization do not name; none when there is no kustomization or it generates nothing."""
    kustomization = next((directory / n for n in NAMES if (directory / n).is_file()), None)
    if kustomization is None:
        return []
    try:
        data = yaml.safe_load(kustomization.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as err:
        return [PolicyIssue(str(kustomization), 0, 0, "", "", cannot_read(err))]
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark
        line, column = (mark.line + 1, mark.column + 1) if mark else (0, 0)
        problem = yaml_syntax(err.problem or "invalid YAML")
        return [PolicyIssue(str(kustomization), line, column, "", "", problem)]
    except yaml.YAMLError as err:
        return [PolicyIssue(str(kustomization), 0, 0, "", "", yaml_syntax(str(err)))]
    generators = data.get("configMapGenerator") if isinstance(data, dict) else None
    if not isinstance(generators, list) or not generators:
        return []
    listed = {os.path.normpath(directory / source) for source in _file_sources(generators)}
    return [
        PolicyIssue(
            str(path),
            0,
            0,
            "",
            "",
            f"not listed in {kustomization} (configMapGenerator files), so the ConfigMap "
            "generated for the webhook would leave it out; add it there",
        )
        for path in found
        if os.path.normpath(path) not in listed
    ]


def _file_sources(generators: list[Any]) -> list[str]:
    """The paths of every generator's ``files`` (an entry may be ``key=path``)."""
    paths = []
    for generator in generators:
        files = generator.get("files") if isinstance(generator, dict) else None
        for entry in files if isinstance(files, list) else []:
            if isinstance(entry, str):
                paths.append(entry.split("=", 1)[-1])
    return paths
