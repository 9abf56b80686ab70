"""Hot reload of the policy set: the only module that imports watchfiles.

A change under the watched paths (a YAML file, or the ``..data`` swap by which the kubelet updates
a ConfigMap volume) loads a complete new PolicySet; it replaces the live one with a single
reference assignment, and only when it loaded without error. A bad edit leaves the last
good set live and is recorded in ``PolicyHolder.status`` (for /readyz, metrics and logs).
watchfiles groups a burst of events (a ``git checkout`` touching many files) into one reload.

No half-written file goes live: a change is loaded only once the files' fingerprints have stayed
the same for a settle interval (``Settler``), and a read is kept only if the fingerprints are the
same before and after it (``PolicyHolder`` with ``look``); otherwise it is discarded and tried
again once the files settle. A discarded read is not a failed reload: it counts in ``retries``.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
import threading
import time
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import watchfiles

from engine.errors import FleetgateError, PolicyIssue, PolicyLoadError
from engine.policy.policyset import PolicySet, load_policy_set
from engine.policy.source import policy_files

log = logging.getLogger(__name__)

Clock = Callable[[], dt.datetime]
Fingerprint = tuple[tuple[str, int, int, int], ...]
Look = Callable[[], Hashable | None]  # a fingerprint of what a load reads; None: look again


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
    retries: int = 0  # reads discarded because the files changed meanwhile (not failures)
    # where the live set came from when it is not the files: the last good set fleetgate
    # stored (``PolicyHolder.adopt``); None once the files load
    fallback: str | None = None

    @property
    def ready(self) -> bool:
        """A valid set is live (the last attempt may still have failed)."""
        return self.version is not None

    @property
    def healthy(self) -> bool:
        """The files on disk are what is live: the last attempt succeeded."""
        return self.ready and not self.errors


def _crash_issue(error: BaseException) -> PolicyIssue:
    return PolicyIssue("", 0, 0, "", "", f"policy loader failed: {type(error).__name__}: {error}")


class NoPolicySetError(FleetgateError):
    """Asked for the live policy set before any valid one was loaded."""


def fingerprint(paths: Iterable[Path]) -> Fingerprint | None:
    """(path, mtime_ns, size, inode) of each file, symlinks followed; None while one is missing.

    Following symlinks, the kubelet's ``..data`` swap changes the inode of every visible file.
    """
    try:
        return tuple(
            (str(path), s.st_mtime_ns, s.st_size, s.st_ino)
            for path in paths
            for s in (path.stat(),)
        )
    except OSError:
        return None  # mid-swap: look again next time


def policy_fingerprint(paths: Sequence[Path]) -> Callable[[], Fingerprint | None]:
    """A ``Look`` at the files that ``load_policy_set(paths)`` reads."""

    def look() -> Fingerprint | None:
        try:
            files = policy_files(paths)[0]
        except OSError:  # a directory removed while it was listed
            return None
        return fingerprint(files)

    return look


class Settler:
    """Says when a fingerprint has stayed the same for ``seconds``, as seen by ``settled``."""

    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.seconds = seconds
        self._clock = clock
        self._value: Hashable | None = None
        self._since = clock()
        self._known = False

    def restart(self) -> None:
        """Something changed that the fingerprint may not show yet: start counting again."""
        self._known = False

    def settled(self, value: Hashable | None) -> bool:
        """Record a look; True once ``value`` has been seen unchanged for ``seconds``.

        None (a file missing mid-swap) never settles and restarts the count.
        """
        now = self._clock()
        if not self._known or value is None or value != self._value:
            self._value, self._since, self._known = value, now, value is not None
            return value is not None and self.seconds <= 0
        return now - self._since >= self.seconds

    def remaining(self) -> float:
        """Seconds until the value last seen settles, if it does not change."""
        return max(0.0, self._since + self.seconds - self._clock())


class PolicyHolder:
    """Holds the live PolicySet. Read ``current`` once per request or cycle and keep it."""

    def __init__(
        self, load: Callable[[], PolicySet], clock: Clock = _utcnow, *, look: Look | None = None
    ) -> None:
        """``look``: a fingerprint of the files ``load`` reads. With it, a reload whose files
        changed while they were read is discarded (see ``reload``)."""
        self._load = load
        self._clock = clock
        self._look = look
        self._current: PolicySet | None = None
        self._status = ReloadStatus()
        self._lock = threading.Lock()  # one reload at a time; readers never take it

    @classmethod
    def for_paths(cls, paths: Sequence[Path], *, revision: str | None = None) -> PolicyHolder:
        """A holder that loads ``paths`` with ``load_policy_set`` and checks each read."""
        roots = list(paths)
        return cls(
            lambda: load_policy_set(roots, revision=revision), look=policy_fingerprint(roots)
        )

    @property
    def look(self) -> Look | None:
        return self._look

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
        with self._lock:
            self._record_failure(self._clock(), (_crash_issue(error),))

    def _record_discard(self, why: str) -> bool:
        self._status = replace(self._status, retries=self._status.retries + 1)
        log.info("policy read discarded: %s; retrying once the files settle", why)
        return False

    def _report_failure(self, now: dt.datetime, error: Exception) -> None:
        live = self._status.version or "none"
        if isinstance(error, PolicyLoadError):
            self._record_failure(now, error.issues)
            lines = "\n".join(str(issue) for issue in error.issues)
            log.error("policy reload failed; keeping version %s live:\n%s", live, lines)
        else:
            self._record_failure(now, (_crash_issue(error),))
            log.error("policy loader crashed; keeping version %s live", live, exc_info=error)

    def reload(self, expected: Hashable | None = None) -> bool:
        """Load the files again; swap the new set in if valid. True when swapped.

        With ``look``, the read must be consistent: the fingerprint before loading (equal to
        ``expected``, the one the caller saw settle, when given) and after it must be the same.
        If not, the outcome, good or bad, is discarded: the files are still being written. That
        counts in ``status.retries``, not as a failure; the caller tries again once they settle.
        """
        with self._lock:
            now = self._clock()
            before = self._look() if self._look is not None else None
            if self._look is not None:
                if before is None:
                    return self._record_discard("a policy file is missing mid-swap")
                if expected is not None and before != expected:
                    return self._record_discard("the files changed since they settled")
            # The edge where every loader failure must become a failed reload: a loader bug
            # (or RecursionError, MemoryError on hostile input) must not leave /readyz and
            # fleetgate_policy_healthy saying the files on disk are live. It is logged, with its
            # traceback, by _report_failure unless the read is discarded.
            try:
                outcome: PolicySet | Exception = self._load()
            except Exception as err:  # noqa: BLE001
                outcome = err
            if self._look is not None and self._look() != before:
                return self._record_discard("the files changed while they were read")
            if isinstance(outcome, Exception):
                self._report_failure(now, outcome)
                return False
            self._current = outcome  # the one assignment readers can observe
            self._status = replace(
                self._status,
                version=outcome.version,
                loaded_at=now,
                last_attempt_at=now,
                errors=(),
                reloads=self._status.reloads + 1,
                fallback=None,
            )
            log.info("policy version %s is live", outcome.version)
            return True

    def adopt(self, policies: PolicySet, source: str) -> bool:
        """Make ``policies`` (loaded from ``source``, not from the files: the last good set)
        live while the files do not load. True when adopted; False when a set from the files
        went live meanwhile (the files win). The errors of the files stay in ``status``."""
        with self._lock:
            if self._current is not None and self._status.fallback is None:
                return False
            self._current = policies
            self._status = replace(
                self._status, version=policies.version, loaded_at=self._clock(), fallback=source
            )
            log.error(
                "the policy files do not load; running on the last good policy set %s from %s",
                policies.version,
                source,
            )
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
    """Watches the policy paths in a background thread and reloads the holder on change.

    A change is loaded once no event came and the files' fingerprint (the holder's ``look``, else
    one of the policy files under ``paths``) stayed the same for ``settle`` seconds; the reload
    is told that fingerprint, so a write that starts meanwhile is not loaded half-done. If the
    files changed during the reload, it settles and reloads again.
    """

    def __init__(
        self,
        holder: PolicyHolder,
        paths: Sequence[Path | str],
        debounce_ms: int = 400,
        step_ms: int = 50,
        settle: float = 0.3,
    ) -> None:
        self._holder = holder
        self._paths = [Path(p) for p in paths]
        self._debounce_ms = debounce_ms
        self._step_ms = step_ms
        self._settle = settle
        self._look = holder.look or policy_fingerprint(self._paths)
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
        accept = policy_change_filter(watched)
        # Unfiltered, so that a stream of ignored events (an editor's swap file) cannot hold
        # back the timeouts that let a pending change settle.
        changes = watchfiles.watch(
            *watched,
            watch_filter=None,
            debounce=self._debounce_ms,
            step=self._step_ms,
            stop_event=self._stop,
            yield_on_timeout=True,
            rust_timeout=int(min(200, max(10, self._settle * 1000 / 4))),
        )
        settler = Settler(self._settle)
        pending = False
        for batch in changes:
            ready.set()  # the first (empty, on timeout) batch means the watch is active
            if self._stop.is_set():
                return
            relevant = [(change, path) for change, path in batch if accept(change, path)]
            if relevant:
                pending = True
                settler.restart()
            if not pending:
                continue
            settled = self._look()
            if not settler.settled(settled):
                continue
            self.batches += 1
            log.info("policy files changed and settled; reloading")
            try:
                self._holder.reload(expected=settled)
            except Exception as err:  # a loader bug must not end the watch
                log.exception("policy reload crashed; the live set is kept")
                self._holder.record_crash(err)
            pending = self._look() != settled  # changed during or since the read: settle again
