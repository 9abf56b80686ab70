"""Hot reload of the policy set: the only module that imports watchfiles.

A change under the watched paths (a YAML file, or the ``..data`` swap by which the kubelet updates
a ConfigMap volume) loads a complete new PolicySet; it replaces the live one with a single
reference assignment, and only when it loaded without error. A bad edit leaves the last
good set live and is recorded in ``PolicyHolder.status`` (for /readyz, metrics and logs).
watchfiles groups a burst of events (a ``git checkout`` touching many files) into one reload.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import watchfiles

from engine.errors import FleetgateError, PolicyIssue, PolicyLoadError
from engine.policy.policyset import PolicySet

log = logging.getLogger(__name__)

Clock = Callable[[], dt.datetime]


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


@dataclass(frozen=True, slots=True)
class ReloadStatus:
    """What the holder knows about loading; replaced whole, never mutated."""

    version: str | None = None  # of the live set
    loaded_at: dt.datetime | None = None  # when the live set was swapped in
    last_attempt_at: dt.datetime | None = None
    errors: tuple[PolicyIssue, ...] = ()  # of the last attempt; empty when it succeeded
    reloads: int = 0  # successful loads, the first included
    failures: int = 0  # failed loads

    @property
    def ready(self) -> bool:
        """A valid set is live (the last attempt may still have failed)."""
        return self.version is not None

    @property
    def healthy(self) -> bool:
        """The files on disk are what is live: the last attempt succeeded."""
        return self.ready and not self.errors


class NoPolicySetError(FleetgateError):
    """Asked for the live policy set before any valid one was loaded."""


class PolicyHolder:
    """Holds the live PolicySet. Read ``current`` once per request or cycle and keep it."""

    def __init__(self, load: Callable[[], PolicySet], clock: Clock = _utcnow) -> None:
        self._load = load
        self._clock = clock
        self._current: PolicySet | None = None
        self._status = ReloadStatus()
        self._lock = threading.Lock()  # one reload at a time; readers never take it

    @property
    def current(self) -> PolicySet:
        policies = self._current
        if policies is None:
            raise NoPolicySetError("no valid policy set has been loaded yet")
        return policies

    @property
    def status(self) -> ReloadStatus:
        return self._status

    def _record_failure(self, now: dt.datetime, issues: tuple[PolicyIssue, ...]) -> None:
        self._status = replace(
            self._status,
            last_attempt_at=now,
            errors=issues,
            failures=self._status.failures + 1,
        )

    def record_crash(self, error: BaseException) -> None:
        """A load that failed with a bug rather than bad input: keep the live set, report it."""
        issue = PolicyIssue("-", 1, 1, "", "", f"policy loader failed: {error!r}")
        with self._lock:
            self._record_failure(self._clock(), (issue,))

    def reload(self) -> bool:
        """Load the files again; swap the new set in if valid. True when swapped."""
        with self._lock:
            now = self._clock()
            try:
                policies = self._load()
            except PolicyLoadError as err:
                self._record_failure(now, err.issues)
                live = self._status.version or "none"
                log.error(
                    "policy reload failed; keeping version %s live:\n%s",
                    live,
                    "\n".join(str(issue) for issue in err.issues),
                )
                return False
            self._current = policies  # the one assignment readers can observe
            self._status = replace(
                self._status,
                version=policies.version,
                loaded_at=now,
                last_attempt_at=now,
                errors=(),
                reloads=self._status.reloads + 1,
            )
            log.info("policy version %s is live", policies.version)
            return True


ChangeFilter = Callable[[watchfiles.Change, str], bool]

# What the kubelet's AtomicWriter adds to a ConfigMap or Secret volume: the ..data symlink and
# the timestamped directories it points at (..2025_03_10_10_00_00.123456789). Not ..data_tmp:
# renaming it onto ..data is reported as a change of ..data.
_KUBELET_ENTRY = re.compile(r"\.\.(data|\d.*)")


def policy_change_filter(roots: Sequence[Path]) -> ChangeFilter:
    """Which file events under the watched ``roots`` can change the loaded policies.

    A ``.yaml``/``.yml`` file that ``policy_files`` reads, i.e. with no hidden component below
    its root, and the swap of a ConfigMap volume. The kubelet updates one by writing a new
    ``..<timestamp>/`` directory, renaming a symlink onto ``..data`` and removing the old
    directory: events name ``..data`` and paths in those directories, never the visible
    ``queues.yaml -> ..data/queues.yaml``. Other hidden paths (editor files like
    ``.queues.yaml.swp`` or ``.#queues.yaml``, ``.git/``) are ignored.
    """
    absolute = sorted((root.absolute() for root in roots), key=lambda r: -len(r.parts))

    def accept(change: watchfiles.Change, path: str) -> bool:
        changed = Path(path).absolute()
        below = next(
            (changed.relative_to(r).parts for r in absolute if changed.is_relative_to(r)), ()
        )
        for part in below or (changed.name,):
            if part.startswith("."):
                return _KUBELET_ENTRY.fullmatch(part) is not None
        return changed.suffix in (".yaml", ".yml")

    return accept


class PolicyWatcher:
    """Watches the policy paths in a background thread and reloads the holder on change."""

    def __init__(
        self,
        holder: PolicyHolder,
        paths: Sequence[Path | str],
        debounce_ms: int = 400,
        step_ms: int = 50,
    ) -> None:
        self._holder = holder
        self._paths = [Path(p) for p in paths]
        self._debounce_ms = debounce_ms
        self._step_ms = step_ms
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.batches = 0  # reloads triggered, for tests and metrics

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("watcher already started")
        ready = threading.Event()
        self._thread = threading.Thread(
            target=self._run, args=(ready,), name="policy-watcher", daemon=True
        )
        self._thread.start()
        if not ready.wait(timeout=5):
            self.stop()
            raise FleetgateError(f"watching {self._paths} did not start within 5 s")

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                raise FleetgateError(f"policy watcher did not stop within {timeout} s")
            self._thread = None

    def __enter__(self) -> PolicyWatcher:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self, ready: threading.Event) -> None:
        watched = [p if p.is_dir() else p.parent for p in self._paths]
        changes = watchfiles.watch(
            *watched,
            watch_filter=policy_change_filter(watched),
            debounce=self._debounce_ms,
            step=self._step_ms,
            stop_event=self._stop,
            yield_on_timeout=True,
            rust_timeout=200,
        )
        for batch in changes:
            ready.set()  # the first (empty, on timeout) batch means the watch is active
            if self._stop.is_set():
                return
            if not batch:
                continue
            self.batches += 1
            log.info("policy files changed (%d event(s)); reloading", len(batch))
            try:
                self._holder.reload()
            except Exception as err:  # a loader bug must not end the watch
                log.exception("policy reload crashed; the live set is kept")
                self._holder.record_crash(err)
