"""The writes of one reconciler pass, sent by a bounded pool of worker threads.

Each binding's writes are one task (the Applier's spec patch, then its status, then its Event,
in that order, on one worker); up to ``workers`` bindings are written at once, so a pass waits
on about ``writes / workers`` round trips instead of ``writes``. ``WritePool.run`` returns the
tasks' results in the order the tasks were given, once every task has ended: the pass counts
outcomes in its own thread, exactly as when it wrote one binding at a time.

Events stay in their binding's task rather than going out asynchronously after the pass: an
Event is one request in six or so of the write time, the pool already overlaps it with other
bindings' patches, and a pass that ends when all its writes (Events too) have ended keeps
shutdown, leadership hand-over and tests simple (nothing of a pass is still sending after it).

The kubernetes client keeps at most ``connection_pool_maxsize`` connections per host: fewer
than the workers plus the informers' watches, and connections are opened and thrown away on
every request. ``widen_pool`` raises that bound on an ApiClient.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any, TypeVar

log = logging.getLogger("fleetgate.reconciler")

T = TypeVar("T")

DEFAULT_WRITE_WORKERS = 16  # docs/performance.md: 16 wrote a backlog ~25 % faster than 8
MAX_WRITE_WORKERS = 64
SPARE_CONNECTIONS = 4  # besides workers and watches: leader election, re-reads, the API's reads


class WritePool:
    """Runs a pass's write tasks on up to ``workers`` threads (1: in the caller's thread)."""

    def __init__(self, workers: int = DEFAULT_WRITE_WORKERS) -> None:
        if not 1 <= workers <= MAX_WRITE_WORKERS:
            raise ValueError(f"write workers: expected 1 to {MAX_WRITE_WORKERS}, got {workers}")
        self.workers = workers
        self._executor: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def run(self, tasks: Sequence[Callable[[], T]]) -> list[T]:
        """Every task's result, in the tasks' order, once all have ended. A task that raises
        does not stop the others; the first such error (in task order) is raised at the end.

        Each worker takes the next task not yet taken until none is left: one submission per
        worker, not per task (most of a pass's tasks send nothing: the binding is unchanged)."""
        if self.workers == 1 or len(tasks) <= 1:
            return [task() for task in tasks]
        executor = self._start()
        results: list[Any] = [None] * len(tasks)
        failures: dict[int, BaseException] = {}
        taken = iter(range(len(tasks)))
        lock = threading.Lock()

        def drain() -> None:
            while True:
                with lock:
                    index = next(taken, None)
                if index is None:
                    return
                try:
                    results[index] = tasks[index]()
                except Exception as error:  # noqa: BLE001 (a bug: raised once all have ended)
                    failures[index] = error

        drains = [executor.submit(drain) for _ in range(min(self.workers, len(tasks)))]
        wait(drains)  # every write ends before the pass goes on, even after a task's error
        for done in drains:
            done.result()
        if failures:
            raise failures[min(failures)]
        return results

    def close(self) -> None:
        """Stop the threads (a running task ends first; queued ones are dropped); idempotent."""
        with self._lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)

    def _start(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(
                    max_workers=self.workers, thread_name_prefix="reconciler-writer"
                )
            return self._executor


def pool_size(workers: int, watches: int) -> int:
    """Connections the reconciler's ApiClient may keep: one per writer and per watch, and spares."""
    return workers + watches + SPARE_CONNECTIONS


def widen_pool(api_client: Any, size: int) -> None:
    """Let ``api_client`` keep at least ``size`` connections per host (its configuration's
    ``connection_pool_maxsize``); pools it opened already keep their size."""
    configuration = getattr(api_client, "configuration", None)
    current = getattr(configuration, "connection_pool_maxsize", None)
    if configuration is not None and (current or 0) < size:
        configuration.connection_pool_maxsize = size
    manager = getattr(getattr(api_client, "rest_client", None), "pool_manager", None)
    settings = getattr(manager, "connection_pool_kw", None)
    if isinstance(settings, dict) and int(settings.get("maxsize") or 1) < size:
        settings["maxsize"] = size
        log.debug("reconciler: API client keeps up to %d connections per host", size)
