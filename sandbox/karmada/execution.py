"""The execution side: Works in ``karmada-es-<cluster>`` become jobs on that member.

Each pass submits the manifest of every Work in a member's execution namespace (idempotent),
removes member jobs whose Work is gone, then steps the member to ``now``. A manifest that the
member cannot run (a kind it does not serve, an unreadable template) is reported on the Work as
``Applied=False`` by the status controller, from :attr:`Execution.refused`.

Faults: Works are not applied (nor removed) on a member that is unreachable, or whose Cluster is
not ``Ready`` (Karmada's execution controller stops syncing a cluster that is not ready); its
jobs keep running. A job failure injected for a template (``job_failure(namespace, name)``)
fails its job on whichever member runs it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from engine.members import Phase
from engine.workloads.model import DemandError
from engine.workloads.registry import read_workload
from sandbox.faults import UNREACHABLE
from sandbox.karmada.clusters import CLUSTERS, FaultState, NoFaults
from sandbox.karmada.common import condition_status, deleting, get_or_none, log, meta
from sandbox.karmada.jobstatus import SERVICE_KINDS
from sandbox.karmada.members import Member
from sandbox.karmada.names import (
    DURATION_ANNOTATION,
    EXECUTION_SPACE_PREFIX,
    execution_namespace,
)
from sandbox.store import Store

WORKS = "works.work.karmada.io"
_DURATION = re.compile(r"^(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s)?$")


def job_key(work: Mapping[str, Any]) -> str:
    """How a member knows the job of a Work: the Work's namespace/name."""
    m = meta(work)
    return f"{m.get('namespace', '')}/{m.get('name', '')}"


def manifest_of(work: Mapping[str, Any]) -> dict[str, Any] | None:
    manifests = ((work.get("spec") or {}).get("workload") or {}).get("manifests") or []
    return manifests[0] if manifests and isinstance(manifests[0], dict) else None


def parse_duration(text: str) -> timedelta | None:
    """Seconds (``90``) or a Go-style duration (``1h30m``, ``90s``); None when unreadable."""
    text = text.strip()
    try:
        return timedelta(seconds=float(text))
    except ValueError:
        pass
    match = _DURATION.match(text)
    if not text or not match:
        return None
    hours, minutes, seconds = (float(g) if g else 0.0 for g in match.groups())
    return timedelta(hours=hours, minutes=minutes, seconds=seconds)


class Execution:
    def __init__(
        self,
        store: Store,
        members: Sequence[Member],
        default_duration: timedelta,
        faults: FaultState | None = None,
    ) -> None:
        self.store = store
        self.members = {m.name: m for m in members}
        self.default_duration = default_duration
        self.faults = faults or NoFaults()
        self.jobs: dict[str, set[str]] = {name: set() for name in self.members}
        self.templates: dict[str, tuple[str, str]] = {}  # job key → template (namespace, name)
        self.refused: dict[str, str] = {}  # job key → why the member did not take it
        self.unreachable: set[str] = set()  # members whose status cannot be collected now
        self.blocked: set[str] = set()  # members whose Works could not be applied lately

    def run(self, now: datetime) -> None:
        """A full pass: every Work of every member."""
        self.run_keys([], now, full=True)

    def run_keys(
        self, keys: Sequence[tuple[str, str]], now: datetime, full: bool = False
    ) -> list[tuple[str, str]]:
        """Apply these Works (namespace, name) to their members (``full``: every Work), fail
        the jobs with an injected failure, step every member; the Works whose job changed."""
        names: dict[str, set[str]] = {}
        for namespace, name in keys:
            names.setdefault(namespace[len(EXECUTION_SPACE_PREFIX) :], set()).add(name)
        changed: set[str] = set()
        failing = self.faults.failing_jobs()
        for name, member in sorted(self.members.items()):
            if self.faults.cluster_state(name) == UNREACHABLE:
                self.unreachable.add(name)
            else:
                self.unreachable.discard(name)
            if not self._applicable(name):
                self.blocked.add(name)  # everything is looked at again once it is back
            elif full or name in self.blocked:
                self.blocked.discard(name)
                changed |= self._sync(name, member, now)
            else:
                for work in sorted(names.get(name, ())):
                    changed |= self._sync_one(name, member, work, now)
            for key in sorted(self.jobs[name]):
                message = failing.get(self.templates[key])
                state = member.job_state(key) if message is not None else None
                if state is not None and state.phase in (Phase.PENDING, Phase.RUNNING):
                    member.fail(key, now, str(message))
                    changed.add(key)
            changed.update(member.step(now))
        return [_work_key(key) for key in sorted(changed)]

    def _applicable(self, name: str) -> bool:
        if name in self.unreachable:
            return False
        cluster = get_or_none(self.store, CLUSTERS, name)
        return cluster is not None and condition_status(cluster, "Ready") == "True"

    def _sync(self, name: str, member: Member, now: datetime) -> set[str]:
        works = self.store.list(WORKS, namespace=execution_namespace(name))["items"]
        wanted = {job_key(w): w for w in works if not deleting(w)}
        for key in sorted(self.jobs[name] - set(wanted)):
            self._remove(name, member, key)
        for key, work in sorted(wanted.items()):
            if key not in self.jobs[name]:
                self._submit(member, key, work, now)
        return set(wanted) | self.jobs[name]

    def _sync_one(self, name: str, member: Member, work_name: str, now: datetime) -> set[str]:
        namespace = execution_namespace(name)
        key = f"{namespace}/{work_name}"
        work = get_or_none(self.store, WORKS, work_name, namespace)
        if work is None or deleting(work):
            if key in self.jobs[name]:
                self._remove(name, member, key)
            return set()
        if key not in self.jobs[name]:
            self._submit(member, key, work, now)
        return {key}

    def _remove(self, name: str, member: Member, key: str) -> None:
        member.remove(key)
        self.jobs[name].discard(key)
        self.templates.pop(key, None)
        self.refused.pop(key, None)

    def _submit(self, member: Member, key: str, work: Mapping[str, Any], now: datetime) -> None:
        manifest = manifest_of(work)
        if manifest is None:
            self.refused[key] = "the Work has no manifest"
            return
        api_version, kind = str(manifest.get("apiVersion", "")), str(manifest.get("kind", ""))
        if not member.serves(api_version, kind):
            self.refused[key] = (
                f'no matches for kind "{kind}" in version "{api_version}" on cluster {member.name}'
            )
            return
        try:
            workload = read_workload(manifest)
        except DemandError as error:
            self.refused[key] = str(error)
            return
        if workload is None:
            self.refused[key] = f"{api_version} {kind} is not a kind the member model runs"
            return
        member.submit(key, workload, self._duration(manifest), now)
        self.jobs[member.name].add(key)
        mm = meta(manifest)
        self.templates[key] = (str(mm.get("namespace") or ""), str(mm.get("name", "")))
        self.refused.pop(key, None)

    def _duration(self, manifest: Mapping[str, Any]) -> timedelta | None:
        if manifest.get("kind") in SERVICE_KINDS:
            return None
        raw = (meta(manifest).get("annotations") or {}).get(DURATION_ANNOTATION)
        if raw is None:
            return self.default_duration
        duration = parse_duration(str(raw))
        if duration is None:
            log.warning("%s=%r is not a duration; using the default", DURATION_ANNOTATION, raw)
            return self.default_duration
        return duration


def _work_key(job: str) -> tuple[str, str]:
    namespace, _, name = job.partition("/")
    return namespace, name
